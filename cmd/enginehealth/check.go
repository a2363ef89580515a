// enginehealth check, pause, resume and recover: the actions the
// master carries out.

package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
)

// checkAnswer is the answer of check: a pass that the disruption guard
// or a pause stopped is refused (exit 4) once printed.
type checkAnswer struct{ apitype.CheckResult }

func (a checkAnswer) refused() error {
	switch {
	case a.Disruption:
		return refusedError{errors.New("the disruption guard holds: nothing was done (check --force --reason ... overrides it once)")}
	case a.Paused != nil:
		return refusedError{errors.New("the cluster is paused: nodes were marked, nothing was repaired (resume to repair)")}
	}
	return nil
}

func newCheckCmd() *cobra.Command {
	var f clientFlags
	var req apitype.CheckRequest
	c := &cobra.Command{
		Use:   "check",
		Short: "Run a CheckEngineHealth pass on the master now",
		Long: `Run a CheckEngineHealth pass on the master now: mark stale nodes, expire
claims, repair interrupted instances, apply on_failure policies and due
retries, judge failover grades.

When most nodes look dead at once the disruption guard holds and the pass
does nothing (exit 4, with the reason). An operator who knows those nodes
are really gone may run one pass through the guard with --force --reason;
it is recorded as a guard_override event. A paused cluster marks nodes
but repairs nothing (exit 4); resume it first.`,
		Example: `  enginehealth check
  enginehealth check --force --reason "rack 3 lost power; nodes n4-n9 are gone"`,
		Args: noArgs,
	}
	c = clientCmd(c, &f, longOp,
		func(ctx context.Context, cl *api.Client, _ []string) (checkAnswer, error) {
			if req.Force && strings.TrimSpace(req.Reason) == "" {
				return checkAnswer{}, usageError{errors.New("--force needs --reason: say why the nodes the guard counts are really gone")}
			}
			if !req.Force && req.Reason != "" {
				return checkAnswer{}, usageError{errors.New("--reason goes with --force (it is recorded in the guard_override event); without --force there is nothing to record")}
			}
			res, err := cl.Check(ctx, req)
			return checkAnswer{res}, err
		},
		func(w io.Writer, a checkAnswer) error {
			res, force := a.CheckResult, req.Force
			fmt.Fprintf(w, "run %d (%s)\n", res.RunID, res.Took.Round(time.Millisecond))
			if res.Disruption {
				_, err := fmt.Fprintf(w, "disruption guard holds: %s\nnodes that look unresponsive: %s\n",
					safe(res.DisruptionReason), safe(strings.Join(res.Stale, ", ")))
				return err
			}
			if res.Forced {
				fmt.Fprintf(w, "disruption guard overridden for this pass (recorded): %s\n", safe(res.DisruptionReason))
			} else if force {
				fmt.Fprintln(w, "the disruption guard did not hold: --force changed nothing and nothing was recorded of it")
			}
			if res.Paused != nil {
				fmt.Fprintf(w, "%s\nnodes marked, nothing repaired, expired or retried\n", safe(res.Paused.String()))
			}
			for _, ch := range append(append(res.NotResponding, res.Revived...), res.Forgotten...) {
				fmt.Fprintf(w, "node %s: %s -> %s\n", safe(ch.Name), safe(ch.From), safe(cmp.Or(ch.To, "(forgotten)")))
			}
			if res.Paused != nil {
				return nil
			}
			fmt.Fprintf(w, "claims expired: %d\n", res.Recovery.ClaimsExpired)
			if err := recoveryTable(w, res.Recovery.Tasks, false); err != nil {
				return err
			}
			if len(res.Failures) > 0 {
				fmt.Fprintln(w, "new failures (on_failure):")
				if err := recoveryTable(w, res.Failures, false); err != nil {
					return err
				}
			}
			_, err := fmt.Fprintf(w, "due retries: %d back to begin, %d cancelled\n", res.Retries.Retried, res.Retries.Cancelled)
			return err
		})
	c.Flags().BoolVar(&req.Force, "force", false, "run this one pass through the disruption guard (needs --reason)")
	c.Flags().StringVar(&req.Reason, "reason", "", "why the guard may be overridden; recorded in the guard_override event")
	return c
}

// newPauseCmd builds pause (paused true) or resume.
func newPauseCmd(paused bool) *cobra.Command {
	var f clientFlags
	var reason string
	c := &cobra.Command{
		Use:   "resume",
		Short: "Let automatic repair go on (token required)",
		Long: `Let the master repair, expire claims and retry again; its next pass sweeps
for everything left while paused. Refused (exit code 4) when not paused.`,
		Example: `  enginehealth resume --reason "migration done"`,
		Args:    noArgs,
	}
	if paused {
		c = &cobra.Command{
			Use:   "pause --reason TEXT",
			Short: "Stop automatic repair cluster-wide (token required)",
			Long: `Stop automatic repair until resume: the master keeps heartbeats, status
marking, grades and the audit trail, but repairs, expires claims and retries
nothing, and start-up recovery waits. Manual recover, retry and hold
decisions still work. The switch is stored in the database: a new master
stays paused. It waits for a running pass to end. Refused (exit code 4)
when paused already.`,
			Example: `  enginehealth pause --reason "engine schema migration, back at 14:00"
  enginehealth status`,
			Args: noArgs,
		}
	}
	c = clientCmd(c, &f, longOp,
		func(ctx context.Context, cl *api.Client, _ []string) (apitype.Pause, error) {
			if paused && strings.TrimSpace(reason) == "" {
				return apitype.Pause{}, usageError{errors.New("--reason is required: say why automatic repair stops")}
			}
			return cl.Pause(ctx, paused, reason)
		},
		func(w io.Writer, p apitype.Pause) error {
			if p.Paused {
				_, err := fmt.Fprintf(w, "%s\n", safe(p.String()))
				return err
			}
			_, err := fmt.Fprintf(w, "resumed by %s at %s: %s\n", safe(p.Actor), p.Since.UTC().Format(time.RFC3339), safe(p.Reason))
			return err
		})
	c.Flags().StringVar(&reason, "reason", "", "recorded in the event and shown in status")
	return c
}

func recoveryTable(w io.Writer, ts []apitype.TaskResult, plan bool) error {
	header := "WORKFLOW\tTASK\tFROM\tPLANNED\tHANDLED\tRETRIED\tWAITING\tHELD\tFAILED\tEXHAUSTED"
	if plan {
		header = "WORKFLOW\tTASK\tFROM\tINSTANCES\tWHAT HAPPENS"
	}
	return tabs(w, header, func(tw io.Writer) {
		for _, t := range ts {
			switch {
			case plan && len(t.Plan) == 0:
				fmt.Fprintf(tw, "%s\t%s\t%s\t0\t(none now; a first interruption: %s)\n", safe(t.Workflow), safe(t.Task), safe(t.From), safe(t.Effect))
			case plan:
				// One line per history: a retried instance is not
				// where a first interruption goes.
				for _, e := range t.Plan {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", safe(t.Workflow), safe(t.Task), safe(t.From), e.Instances, safe(e.Effect))
				}
			default:
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", safe(t.Workflow), safe(t.Task), safe(t.From), t.Planned, t.Done,
					t.Retried, t.Scheduled, t.Held, t.Failed, t.Exhausted)
			}
		}
	})
}

func newRecoverCmd() *cobra.Command {
	var f clientFlags
	var req apitype.RecoveryRequest
	var workflows []string
	c := clientCmd(&cobra.Command{
		Use:   "recover",
		Short: "Expire claims and repair interrupted instances now (through the master)",
		Long: `Run a recovery on the master now: delete expired claims, then decide every
unclaimed instance left in an interim state by its task's on_interrupt
policy. With --dry-run, print what would be done, changing nothing.`,
		Example: `  enginehealth recover --dry-run
  enginehealth recover --workflow orders
  enginehealth recover -o json`,
		Args: noArgs,
	}, &f, longOp,
		func(ctx context.Context, cl *api.Client, _ []string) (apitype.RecoveryAnswer, error) {
			r := req
			r.Workflows = nil
			// Each --workflow may list several, split at commas; an empty
			// one is refused, not dropped (--workflow orders --workflow ""
			// must not run a recovery as if the second were not there).
			for _, v := range workflows {
				for _, name := range strings.Split(v, ",") {
					if strings.TrimSpace(name) == "" {
						return apitype.RecoveryAnswer{}, usageError{fmt.Errorf("--workflow %q: an empty workflow name (omit the flag for every claimable workflow)", v)}
					}
					r.Workflows = append(r.Workflows, name)
				}
			}
			return cl.Recover(ctx, r)
		},
		func(w io.Writer, a apitype.RecoveryAnswer) error {
			if a.DryRun {
				fmt.Fprintln(w, "dry run: nothing was changed")
				var ts []apitype.TaskResult
				for _, p := range a.Plan {
					fmt.Fprintf(w, "workflow %s: %d expired claims to delete\n", safe(p.Workflow), p.ClaimsToExpire)
					ts = append(ts, p.Tasks...)
				}
				return recoveryTable(w, ts, true)
			}
			fmt.Fprintf(w, "run %d: claims expired %d, instances repaired %d\n", a.Result.RunID, a.Result.ClaimsExpired, a.Result.Done())
			return recoveryTable(w, a.Result.Tasks, false)
		})
	c.Flags().StringArrayVar(&workflows, "workflow", nil, "workflow to recover (repeatable, or comma-separated; default: every claimable workflow)")
	c.Flags().BoolVar(&req.DryRun, "dry-run", false, "print the plan and change nothing")
	return c
}
