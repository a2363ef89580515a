// enginehealth runs: the master's passes and recoveries.

package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
)

func newRunsCmd() *cobra.Command {
	var f clientFlags
	var limit int
	c := clientCmd(&cobra.Command{
		Use:   "runs [ID]",
		Short: "List the latest check and recovery runs, or show one",
		Long: `List the latest check and recovery runs, newest first; with an ID, show that
run: what it did per workflow task (repairs, expiries, retries, holds, by the
state instances went to), its duration and its error.`,
		Example: `  enginehealth runs --limit 5
  enginehealth runs 42
  enginehealth runs 42 -o json`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
	}, &f, 30*time.Second,
		func(ctx context.Context, cl *api.Client, args []string) (any, error) {
			if len(args) == 1 {
				id, err := strconv.ParseInt(args[0], 10, 64)
				if err != nil || id <= 0 {
					return nil, usageError{fmt.Errorf("run id %q: want a positive integer", args[0])}
				}
				return cl.Run(ctx, id)
			}
			if err := checkLimit(limit); err != nil {
				return nil, err
			}
			return cl.Runs(ctx, limit)
		},
		func(w io.Writer, v any) error {
			if d, ok := v.(apitype.RunDetail); ok {
				return runTable(w, d)
			}
			return tabs(w, "ID\tKIND\tTRIGGER\tTERM\tMASTER\tSTATUS\tCLAIMS EXPIRED\tINSTANCES PLANNED\tREPAIRED\tSTARTED\tNOTE", func(tw io.Writer) {
				for _, r := range v.([]apitype.Run) {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", r.ID, safe(string(r.Kind)), safe(string(r.Trigger)), r.Term, safe(r.Master), safe(r.Status),
						r.ClaimsExpired, r.Planned, r.Done, r.StartedAt.Format(time.RFC3339), safe(r.Error))
				}
			})
		})
	c.Flags().IntVar(&limit, "limit", api.DefaultRunsLimit, fmt.Sprintf("how many runs (at most %d)", api.MaxLimit))
	return c
}

// runTable prints one run and its counts per workflow task.
func runTable(w io.Writer, d apitype.RunDetail) error {
	fmt.Fprintf(w, "run %d: %s (%s) by %s in term %d, %s after %s\n", d.ID, safe(string(d.Kind)), safe(string(d.Trigger)), safe(d.Master), d.Term,
		safe(d.Status), d.Took.Round(time.Millisecond))
	fmt.Fprintf(w, "started %s", d.StartedAt.Format(time.RFC3339))
	if d.FinishedAt != nil {
		fmt.Fprintf(w, ", finished %s", d.FinishedAt.Format(time.RFC3339))
	}
	if d.ResumedFrom != nil {
		fmt.Fprintf(w, ", resumes run %d", *d.ResumedFrom)
	}
	fmt.Fprintf(w, "\nclaims expired %d, instances planned %d, repaired %d\n", d.ClaimsExpired, d.Planned, d.Done)
	if d.Error != "" {
		fmt.Fprintf(w, "error: %s\n", safe(d.Error))
	}
	if len(d.Counts) == 0 {
		_, err := fmt.Fprintln(w, "no instance events")
		return err
	}
	return tabs(w, "WORKFLOW\tTASK\tEVENT\tTO\tINSTANCES", func(tw io.Writer) {
		for _, c := range d.Counts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", safe(c.Workflow), safe(c.Task), safe(string(c.Kind)), safe(c.To), c.Count)
		}
	})
}
