package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/recovery"
)

// parseRef reads WORKFLOW/ID (the first slash separates them; an id may
// hold more), or a bare ID when workflow is given.
func parseRef(s, workflow string) (apitype.Ref, error) {
	wf, id, ok := strings.Cut(s, "/")
	switch {
	case ok && wf != "" && id != "":
		return apitype.Ref{Workflow: wf, Instance: id}, nil
	case !ok && workflow != "" && s != "":
		return apitype.Ref{Workflow: workflow, Instance: s}, nil
	}
	return apitype.Ref{}, usageError{fmt.Errorf("instance %q: want WORKFLOW/ID (or ID with --workflow)", s)}
}

func newHoldsCmd() *cobra.Command {
	var f clientFlags
	var workflow string
	var limit int
	c := clientCmd(&cobra.Command{
		Use:   "holds",
		Short: "List instances held for an operator's decision (oldest first)",
		Long: `List instances a hold policy parked: each waits where it was left until an
operator decides with "holds retry" (back to begin) or "holds fail".`,
		Example: "  enginehealth holds\n  enginehealth holds --workflow orders -o json",
		Args:    noArgs,
	}, &f, 30*time.Second,
		func(ctx context.Context, cl *api.Client, _ []string) ([]apitype.Hold, error) {
			if err := checkLimit(limit); err != nil {
				return nil, err
			}
			return cl.Holds(ctx, workflow, limit)
		},
		func(w io.Writer, hs []apitype.Hold) error {
			return tabs(w, "WORKFLOW\tID\tTASK\tIN\tSINCE\tATTEMPTS\tLAST NODE\tLAST ERROR", func(tw io.Writer) {
				for _, h := range hs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", safe(h.Workflow), safe(h.Instance), safe(h.Task), safe(h.State),
						h.Since.Format(time.RFC3339), h.Attempts+h.Manual, safe(deref(h.LastNode)), safe(short(deref(h.LastError), 60)))
				}
			})
		})
	c.Flags().StringVar(&workflow, "workflow", "", "only holds of this workflow")
	c.Flags().IntVar(&limit, "limit", recovery.DefaultHoldsLimit, fmt.Sprintf("how many holds (at most %d)", api.MaxLimit))
	c.AddCommand(newHoldsDecideCmd(recovery.DecideRetry, "Send held instances back to their task's begin state (an operator's retry)"),
		newHoldsDecideCmd(recovery.DecideFail, "Fail held instances for good (to their task's failed state)"))
	return c
}

func newHoldsDecideCmd(action, short string) *cobra.Command {
	var f clientFlags
	var req apitype.HoldsRequest
	c := clientCmd(&cobra.Command{
		Use:   action + " WORKFLOW/ID... | --all [--workflow W]",
		Short: short + "; through the master, token required",
		Example: fmt.Sprintf("  enginehealth holds %[1]s orders/1042 orders/1043 --reason 'carrier fixed'\n"+
			"  enginehealth holds %[1]s --all --workflow orders --reason 'incident 77 over'", action),
		Args: func(_ *cobra.Command, args []string) error {
			if req.All == (len(args) > 0) {
				return usageError{fmt.Errorf("name held instances (WORKFLOW/ID) or give --all, not both, not neither")}
			}
			return nil
		},
	}, &f, longOp,
		func(ctx context.Context, cl *api.Client, args []string) (apitype.HoldResult, error) {
			r := req
			if !r.All {
				for _, a := range args {
					ref, err := parseRef(a, r.Workflow)
					if err != nil {
						return apitype.HoldResult{}, err
					}
					if r.Workflow != "" && ref.Workflow != r.Workflow {
						return apitype.HoldResult{}, usageError{fmt.Errorf("instance %q is not of --workflow %s", a, r.Workflow)}
					}
					r.Instances = append(r.Instances, ref)
				}
				r.Workflow = ""
			}
			return cl.DecideHolds(ctx, action, r)
		},
		func(w io.Writer, res apitype.HoldResult) error {
			verb := map[string]string{recovery.DecideRetry: "sent back to begin", recovery.DecideFail: "failed"}[action]
			fmt.Fprintf(w, "%d held %s %s\n", res.Decided, plural(res.Decided, "instance", "instances"), verb)
			for _, c := range res.Cancelled {
				fmt.Fprintf(w, "cancelled  %s/%s: %s\n", safe(c.Workflow), safe(c.Instance), safe(c.Reason))
			}
			for _, r := range res.NotHeld {
				fmt.Fprintf(w, "not held   %s/%s\n", safe(r.Workflow), safe(r.Instance))
			}
			return nil
		})
	c.Flags().BoolVar(&req.All, "all", false, "every open hold (of --workflow, when given)")
	c.Flags().StringVar(&req.Workflow, "workflow", "", "with --all: only this workflow's holds; with ids: the workflow of bare ids")
	c.Flags().StringVar(&req.Reason, "reason", "", "recorded in each event (default: decided by an operator)")
	return c
}

func newRetryCmd() *cobra.Command {
	var f clientFlags
	var req apitype.RetryRequest
	c := clientCmd(&cobra.Command{
		Use:   "retry WORKFLOW ID | WORKFLOW/ID",
		Short: "Send a failed, held or exhausted instance back to begin now (through the master, token required)",
		Long: `Send one instance back to its task's begin state at once. It must be in its
task's failed state, held, or waiting for a scheduled retry (which this
replaces). Refused, with the reason, while the instance is claimed or its
scheduled retry is due within one check interval. Counted as an operator's
retry, not against max_attempts.`,
		Example: "  enginehealth retry orders 1042 --reason 'card re-issued'\n  enginehealth retry orders/1042 --task ship",
		Args:    usageArgs(cobra.RangeArgs(1, 2)),
	}, &f, 30*time.Second,
		func(ctx context.Context, cl *api.Client, args []string) (apitype.RetryResult, error) {
			r := req
			if len(args) == 2 {
				r.Workflow, r.Instance = args[0], args[1]
				switch {
				case strings.TrimSpace(r.Workflow) == "" || strings.TrimSpace(r.Instance) == "":
					return apitype.RetryResult{}, usageError{fmt.Errorf("retry %q %q: an empty workflow or id", r.Workflow, r.Instance)}
				case strings.Contains(r.Workflow, "/"):
					return apitype.RetryResult{}, usageError{fmt.Errorf("retry %q %q: want WORKFLOW ID or WORKFLOW/ID, not both", r.Workflow, r.Instance)}
				}
			} else {
				// The form events --instance and holds take.
				ref, err := parseRef(args[0], "")
				if err != nil {
					return apitype.RetryResult{}, usageError{fmt.Errorf("instance %q: want WORKFLOW ID or WORKFLOW/ID", args[0])}
				}
				r.Workflow, r.Instance = ref.Workflow, ref.Instance
			}
			return cl.Retry(ctx, r)
		},
		func(w io.Writer, res apitype.RetryResult) error {
			fmt.Fprintf(w, "%s/%s: %s -> %s (task %s), manual retry %d", safe(res.Workflow), safe(res.Instance), safe(res.From),
				safe(res.To), safe(res.Task), res.Manual)
			if res.Replaced != "" {
				fmt.Fprintf(w, ", replaces the %s", safe(res.Replaced))
			}
			_, err := fmt.Fprintln(w)
			return err
		})
	c.Flags().StringVar(&req.Task, "task", "", "the task (only needed when the state is the failed state of several tasks)")
	c.Flags().StringVar(&req.Reason, "reason", "", "recorded in the event")
	return c
}

func newRetriesCmd() *cobra.Command {
	c := group("retries", "Retry policies' figures")
	var f clientFlags
	stats := clientCmd(&cobra.Command{
		Use:     "stats",
		Short:   "Retries by workflow and task: scheduled, by hand, succeeded, exhausted, failed, cancelled, holds open, success rate",
		Example: "  enginehealth retries stats\n  enginehealth retries stats -o json",
		Args:    noArgs,
	}, &f, 30*time.Second,
		func(ctx context.Context, cl *api.Client, _ []string) ([]apitype.RetryStats, error) {
			return cl.RetryStats(ctx)
		},
		func(w io.Writer, st []apitype.RetryStats) error {
			return tabs(w, "WORKFLOW\tTASK\tINSTANCES\tRETRIES\tBY HAND\tWAITING\tSUCCEEDED\tEXHAUSTED\tFAILED\tCANCELLED\tHOLDS OPEN\tSUCCESS RATE", func(tw io.Writer) {
				for _, s := range st {
					rate := "—"
					if s.SuccessRate != nil {
						rate = fmt.Sprintf("%.0f%%", 100**s.SuccessRate)
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", safe(s.Workflow), safe(s.Task), s.Instances, s.Scheduled,
						s.Manual, s.Waiting, s.Succeeded, s.Exhausted, s.Failed, s.Cancelled, s.HoldsOpen, rate)
				}
			})
		})
	c.AddCommand(stats)
	return c
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func short(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
