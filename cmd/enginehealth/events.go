// enginehealth events: the audit trail, and one instance's history.

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
	"github.com/enginehealth/enginehealth/internal/infra/audit"
)

func newEventsCmd() *cobra.Command {
	var f clientFlags
	var p audit.ListParams
	var instance, kind, since, until string
	var c *cobra.Command
	c = clientCmd(&cobra.Command{
		Use:   "events",
		Short: "List the audit trail (oldest first), or one instance's timeline (--instance)",
		Long: `List the audit trail, oldest first, filtered by node, workflow, kind, run and
time (--since and --until take RFC 3339 times or a duration back from now,
such as 1h). Pages of at most --limit events; page on with --after the last
id shown. With --instance WORKFLOW/ID: that instance's state, claim,
attempts and whole timeline.`,
		Example: "  enginehealth events --limit 50\n  enginehealth events --node n2 --since 1h\n" +
			"  enginehealth events --workflow orders --kind instance_repaired --since 2026-11-23T14:00:00Z\n" +
			"  enginehealth events --run 42 -o json\n" +
			"  enginehealth events --instance orders/1042",
		Args: noArgs,
	}, &f, 30*time.Second,
		func(ctx context.Context, cl *api.Client, _ []string) (any, error) {
			if err := checkLimit(p.Limit); err != nil {
				return nil, err
			}
			if c.Flags().Changed("run") && p.RunID <= 0 {
				return nil, usageError{fmt.Errorf("--run %d: want a positive run id (runs count from 1)", p.RunID)}
			}
			if instance != "" {
				// The timeline is whole: a filter would be silently ignored.
				for _, name := range []string{"after", "node", "kind", "run", "since", "until"} {
					if c.Flags().Changed(name) {
						return nil, usageError{fmt.Errorf("--instance shows the instance's whole timeline: it takes no --%s", name)}
					}
				}
				ref, err := parseRef(instance, p.Workflow)
				if err != nil {
					return nil, err
				}
				if p.Workflow != "" && ref.Workflow != p.Workflow {
					return nil, usageError{fmt.Errorf("--instance %s and --workflow %s name different workflows", instance, p.Workflow)}
				}
				return cl.Instance(ctx, ref, p.Limit)
			}
			p.Kind = audit.Kind(kind)
			if kind != "" && !p.Kind.Valid() {
				return nil, usageError{fmt.Errorf("--kind %q is not an event kind: one of %v", kind, audit.Kinds)}
			}
			var err error
			now := clock()
			if p.Since, err = whenFlag("--since", since, now); err != nil {
				return nil, err
			}
			if p.Until, err = whenFlag("--until", until, now); err != nil {
				return nil, err
			}
			return allEvents(ctx, cl, p)
		},
		func(w io.Writer, v any) error {
			if iv, ok := v.(apitype.InstanceView); ok {
				return instanceTable(w, iv)
			}
			return eventsTable(w, v.([]apitype.Event))
		})
	c.Flags().Int64Var(&p.AfterID, "after", 0, "only events with a larger id (the cursor: the last id of the previous page)")
	c.Flags().IntVar(&p.Limit, "limit", api.DefaultEventsLimit, fmt.Sprintf("how many events (at most %d; page on with --after)", api.MaxLimit))
	c.Flags().StringVar(&p.Node, "node", "", "only events about this node")
	c.Flags().StringVar(&p.Workflow, "workflow", "", "only events about this workflow")
	c.Flags().StringVar(&kind, "kind", "", "only events of this kind (e.g. instance_repaired, node_status, paused)")
	c.Flags().Int64Var(&p.RunID, "run", 0, "only events of this run")
	c.Flags().StringVar(&since, "since", "", "only events at or after this time (RFC 3339, or a duration back from now: 1h)")
	c.Flags().StringVar(&until, "until", "", "only events before this time (RFC 3339, or a duration back from now)")
	c.Flags().StringVar(&instance, "instance", "", "WORKFLOW/ID (or ID with --workflow): the instance's state, claim, attempts and whole timeline")
	return c
}

// whenFlag reads a time flag: RFC 3339, or a duration back from now;
// nil when not given.
func whenFlag(name, v string, now time.Time) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return &t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		t := now.Add(-d)
		return &t, nil
	}
	return nil, usageError{fmt.Errorf("%s %q: want an RFC 3339 time (2026-11-23T14:00:00Z) or a duration back from now (90m)", name, v)}
}

// actor is an event's actor, with the node that took the request when
// it was an operator's.
func actor(e apitype.Event) string {
	if e.Via == nil {
		return safe(e.Actor)
	}
	return safe(e.Actor) + " via " + safe(*e.Via)
}

func eventsTable(w io.Writer, es []apitype.Event) error {
	return tabs(w, "ID\tAT\tKIND\tACTOR\tTERM\tNODE\tWORKFLOW\tINSTANCE\tTASK\tFROM\tTO\tREASON", func(tw io.Writer) {
		for _, e := range es {
			term := ""
			if e.Term != nil {
				term = fmt.Sprint(*e.Term)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.At.Format(time.RFC3339), safe(string(e.Kind)), actor(e), term,
				opt(e.Node), opt(e.Workflow), opt(e.Instance), opt(e.Task), opt(e.FromState), opt(e.ToState), safe(e.Reason))
		}
	})
}

// instanceTable prints an instance's state, claim and attempts rows, then
// its timeline: one line per event, with the attempt it belongs to.
func instanceTable(w io.Writer, v apitype.InstanceView) error {
	state := "gone (no row in the instance table)"
	if v.State != nil {
		state = "in " + safe(*v.State)
	}
	fmt.Fprintf(w, "%s/%s: %s", safe(v.Workflow), safe(v.Instance), state)
	if c := v.Claim; c != nil {
		verb := "expires"
		if c.Expired {
			verb = "expired"
		}
		fmt.Fprintf(w, ", claimed by %s (token %s) since %s, %s %s", safe(c.Node), safe(c.Token),
			c.ClaimedAt.Format(time.RFC3339), verb, c.ExpiresAt.Format(time.RFC3339))
	} else if v.State != nil {
		fmt.Fprint(w, ", unclaimed")
	}
	fmt.Fprintln(w)
	for _, a := range v.Attempts {
		fmt.Fprintf(w, "task %s: %s (%s), %d %s by the policy, %d by operators", safe(a.Task), safe(a.State), safe(string(a.Cause)),
			a.AttemptCount, plural(int64(a.AttemptCount), "retry", "retries"), a.Manual)
		if a.NextAttemptTime != nil {
			fmt.Fprintf(w, ", next attempt %s", a.NextAttemptTime.Format(time.RFC3339))
		}
		if len(a.Nodes) > 0 {
			fmt.Fprintf(w, ", interrupted on %s", safe(strings.Join(a.Nodes, ", ")))
		}
		fmt.Fprintf(w, "\n  %s\n", safe(a.LastReason))
	}
	err := tabs(w, "AT\tATTEMPT\tKIND\tNODE\tACTOR\tFROM\tTO\tREASON", func(tw io.Writer) {
		for _, e := range v.Events {
			attempt := ""
			if e.Attempt != nil {
				attempt = fmt.Sprint(*e.Attempt)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.At.Format(time.RFC3339Nano), attempt, safe(string(e.Kind)), opt(e.Node), actor(e),
				opt(e.FromState), opt(e.ToState), safe(e.Reason))
		}
	})
	if err == nil && v.Truncated {
		_, err = fmt.Fprintf(w, "(the first %d events only: raise --limit for more)\n", len(v.Events))
	}
	return err
}

// allEvents fetches up to p.Limit events, page after page: the daemon may
// end a page early to bound its answer.
func allEvents(ctx context.Context, cl *api.Client, p audit.ListParams) ([]apitype.Event, error) {
	all := []apitype.Event{}
	for q := p; len(all) < max(p.Limit, 1); {
		q.Limit = p.Limit - len(all)
		page, err := cl.Events(ctx, q)
		if err != nil {
			return nil, err
		}
		if len(page) == 0 || (len(all) > 0 && page[len(page)-1].ID <= q.AfterID) {
			break // the end, or a daemon that does not page on
		}
		all = append(all, page...)
		q.AfterID = page[len(page)-1].ID
	}
	return all, nil
}
