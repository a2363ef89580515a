package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
	"github.com/spf13/cobra"
)

// longOp bounds manual runs, which can repair many instances.
const longOp = 10 * time.Minute

// clientCmd builds a command that asks the daemon with call and prints the
// answer as JSON (-o json) or with table.
func clientCmd[T any](c *cobra.Command, f *clientFlags, timeout time.Duration,
	call func(ctx context.Context, cl *api.Client, args []string) (T, error),
	table func(w io.Writer, v T) error,
) *cobra.Command {
	c.RunE = func(c *cobra.Command, args []string) error {
		cl, err := f.client()
		if err != nil {
			return err
		}
		cl.HTTP.Timeout = timeout
		v, err := call(c.Context(), cl, args)
		if err != nil {
			return err
		}
		if f.output == "json" {
			err = writeJSON(c.OutOrStdout(), v)
		} else if err = table(c.OutOrStdout(), v); err == nil && cl.DoneBy != "" {
			_, err = fmt.Fprintf(c.OutOrStdout(), "done by %s\n", safe(cl.DoneBy))
		}
		if r, ok := any(v).(refuser); ok && err == nil {
			err = r.refused()
		}
		return err
	}
	f.register(c)
	return c
}

// refuser is an answer that may say the daemon did not do what was asked
// (printed all the same; the command then exits 4).
type refuser interface{ refused() error }

// refusedError: the daemon answered but refused the operation (exit 4).
type refusedError struct{ error }

// safe escapes the control characters (and invalid UTF-8) of text that
// came from the daemon, so that stored text cannot drive the operator's
// terminal or break a table's rows and columns. Every text field printed
// outside -o json goes through it.
func safe(s string) string { return api.TerminalSafe(s) }

// tabs prints a table: the header, then the rows, in aligned columns,
// without the blanks that pad an empty last cell.
func tabs(w io.Writer, header string, rows func(tw io.Writer)) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	rows(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(buf.String()) {
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

func newNodesCmd() *cobra.Command {
	var f clientFlags
	c := &cobra.Command{Use: "nodes [NAME]", Short: "List the engine nodes (or show one, with its grade's cause)",
		Long: `List the engine nodes as the registry records them. MASTER marks the node that
acts as master now (asked of the cluster, GET /v1/leader); while none acts
(an etcd outage, an election), "(*)" marks the node that took office last,
as its record says, and a line below says why none acts.`,
		Example: "  enginehealth nodes\n  enginehealth nodes n2\n  enginehealth nodes -o json",
		Args:    nodeArgs(cobra.MaximumNArgs(1))}
	return clientCmd(c, &f, 30*time.Second,
		func(ctx context.Context, cl *api.Client, args []string) (nodeList, error) {
			var l nodeList
			if len(args) == 1 {
				n, err := cl.Node(ctx, args[0])
				l.nodes, l.one = []nodes.Node{n}, true
				if err != nil {
					return l, err
				}
			} else {
				ns, err := cl.Nodes(ctx)
				if err != nil {
					return l, err
				}
				l.nodes = ns
			}
			// Who acts: known (an answer), none (the daemon says no node
			// acts), or unknown (any other error): then the records'
			// is_master is shown as it is.
			m, err := cl.Leader(ctx)
			var se *api.StatusError
			switch {
			case err == nil:
				l.acting = m.Name
			case errors.As(err, &se) && se.Code == http.StatusServiceUnavailable && se.Msg == api.ErrNoActingMaster.Error():
				l.none = cmp.Or(se.Detail, se.Msg)
			default:
				l.unknown = true
			}
			return l, nil
		},
		func(w io.Writer, l nodeList) error {
			took := false
			err := tabs(w, "NAME\tSTATUS\tMASTER\tLAST ACTIVE\tGRADE\tVERSION\tAPI\tREASON", func(tw io.Writer) {
				for _, n := range l.nodes {
					master := ""
					switch {
					case l.unknown && n.IsMaster, l.acting != "" && n.Name == l.acting:
						master = "*"
					case l.none != "" && n.IsMaster:
						master, took = "(*)", true
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%.1fs ago\t%s\t%s\t%s\t%s\n", safe(n.Name), safe(n.Status), master,
						n.SecondsSinceActive, safe(n.FailoverGrade), safe(n.Version), safe(n.APIAddress), safe(n.StatusReason))
				}
			})
			if err == nil && l.none != "" && (!l.one || took) {
				line := "\nno node acts as master: " + safe(l.none)
				if took {
					line += "; (*) took office last"
				}
				_, err = fmt.Fprintln(w, line)
			}
			if l.one && l.nodes[0].GradeChangedAt != nil && err == nil {
				n := l.nodes[0]
				_, err = fmt.Fprintf(w, "\ngrade %s since %s (%s): %s\n", safe(n.FailoverGrade),
					n.GradeChangedAt.UTC().Format(time.RFC3339), safe(cmp.Or(n.GradeSignature, "no signature")), safe(n.GradeReason))
			}
			return err
		})
}

// nodeList is what nodes shows: the records (one, for nodes NAME) and
// who acts as master now, since a record's is_master only says who took
// office last. -o json prints the records alone, as the API answers them.
type nodeList struct {
	nodes []nodes.Node
	one   bool
	// acting: the acting master's name; none, when no node acts, why;
	// unknown: the daemon did not say (the records' is_master is shown).
	acting, none string
	unknown      bool
}

func (l nodeList) MarshalJSON() ([]byte, error) {
	if l.one {
		return json.Marshal(l.nodes[0])
	}
	return json.Marshal(l.nodes)
}

func newNodeCmd() *cobra.Command {
	c := group("node", "Act on one node")
	var f clientFlags
	var reason string
	ack := clientCmd(&cobra.Command{
		Use:   "ack NAME",
		Short: "Acknowledge a node's unexpected shutdown: it goes to Recovering, then Ready (token required)",
		Long: `Acknowledge that a node in Unexpected shutdown was looked at: it goes to
Recovering, with a node_ack event naming the reason, and the master makes
it Ready after start-up recovery (then its engine may start: wait ready).
Needs the API token. Refused (exit code 4) when the node is not in
Unexpected shutdown.`,
		Example: `  enginehealth node ack n2 --reason "kernel panic, host replaced"`,
		Args:    nodeArgs(cobra.ExactArgs(1)),
	}, &f, 30*time.Second,
		func(ctx context.Context, cl *api.Client, args []string) (nodes.Node, error) {
			return cl.Ack(ctx, args[0], reason)
		},
		func(w io.Writer, n nodes.Node) error {
			_, err := fmt.Fprintf(w, "node %s acknowledged: %s\n", safe(n.Name), safe(n.Status))
			return err
		})
	ack.Flags().StringVar(&reason, "reason", "", "recorded in the event (default: acknowledged by an operator)")
	var gf clientFlags
	var greason string
	reset := clientCmd(&cobra.Command{
		Use:   "reset-grade NAME",
		Short: "Reset a node's failover grade to NORMAL (token required)",
		Long: `Reset a node's failover grade (WARNING or ERROR) to NORMAL at once, with an
event naming the operator's reason; without it the grade goes back to NORMAL
after failover.quiet_period without interruptions. Refused (exit code 4)
when the grade is NORMAL already.`,
		Example: `  enginehealth node reset-grade n2 --reason "disk replaced"`,
		Args:    nodeArgs(cobra.ExactArgs(1)),
	}, &gf, 30*time.Second,
		func(ctx context.Context, cl *api.Client, args []string) (nodes.GradeChange, error) {
			return cl.ResetGrade(ctx, args[0], greason)
		},
		func(w io.Writer, g nodes.GradeChange) error {
			_, err := fmt.Fprintf(w, "node %s: failover grade %s -> %s\n", safe(g.Name), safe(g.From), safe(g.To))
			return err
		})
	reset.Flags().StringVar(&greason, "reason", "", "recorded in the event (default: reset by an operator)")
	c.AddCommand(ack, reset)
	return c
}

// checkAnswer is the answer of check: a pass that the disruption guard
// or a pause stopped is refused (exit 4) once printed.
type checkAnswer struct{ health.CheckResult }

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
	var req api.CheckRequest
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
		func(ctx context.Context, cl *api.Client, _ []string) (health.Pause, error) {
			if paused && strings.TrimSpace(reason) == "" {
				return health.Pause{}, usageError{errors.New("--reason is required: say why automatic repair stops")}
			}
			return cl.Pause(ctx, paused, reason)
		},
		func(w io.Writer, p health.Pause) error {
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

func recoveryTable(w io.Writer, ts []recovery.TaskResult, plan bool) error {
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
	var req api.RecoveryRequest
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
		func(ctx context.Context, cl *api.Client, _ []string) (api.RecoveryAnswer, error) {
			r := req
			r.Workflows = nil
			// Each --workflow may list several, split at commas; an empty
			// one is refused, not dropped (--workflow orders --workflow ""
			// must not run a recovery as if the second were not there).
			for _, v := range workflows {
				for _, name := range strings.Split(v, ",") {
					if strings.TrimSpace(name) == "" {
						return api.RecoveryAnswer{}, usageError{fmt.Errorf("--workflow %q: an empty workflow name (omit the flag for every claimable workflow)", v)}
					}
					r.Workflows = append(r.Workflows, name)
				}
			}
			return cl.Recover(ctx, r)
		},
		func(w io.Writer, a api.RecoveryAnswer) error {
			if a.DryRun {
				fmt.Fprintln(w, "dry run: nothing was changed")
				var ts []recovery.TaskResult
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
			if d, ok := v.(recovery.RunDetail); ok {
				return runTable(w, d)
			}
			return tabs(w, "ID\tKIND\tTRIGGER\tTERM\tMASTER\tSTATUS\tCLAIMS EXPIRED\tINSTANCES PLANNED\tREPAIRED\tSTARTED\tNOTE", func(tw io.Writer) {
				for _, r := range v.([]recovery.RunRow) {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", r.ID, safe(r.Kind), safe(r.Trigger), r.Term, safe(r.Master), safe(r.Status),
						r.ClaimsExpired, r.Planned, r.Done, r.StartedAt.Format(time.RFC3339), safe(r.Error))
				}
			})
		})
	c.Flags().IntVar(&limit, "limit", api.DefaultRunsLimit, fmt.Sprintf("how many runs (at most %d)", api.MaxLimit))
	return c
}

// runTable prints one run and its counts per workflow task.
func runTable(w io.Writer, d recovery.RunDetail) error {
	fmt.Fprintf(w, "run %d: %s (%s) by %s in term %d, %s after %s\n", d.ID, safe(d.Kind), safe(d.Trigger), safe(d.Master), d.Term,
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
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", safe(c.Workflow), safe(c.Task), safe(c.Kind), safe(c.To), c.Count)
		}
	})
}

func newEventsCmd() *cobra.Command {
	var f clientFlags
	var p audit.ListParams
	var instance, since, until string
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
			if iv, ok := v.(recovery.InstanceView); ok {
				return instanceTable(w, iv)
			}
			return eventsTable(w, v.([]audit.Event))
		})
	c.Flags().Int64Var(&p.AfterID, "after", 0, "only events with a larger id (the cursor: the last id of the previous page)")
	c.Flags().IntVar(&p.Limit, "limit", api.DefaultEventsLimit, fmt.Sprintf("how many events (at most %d; page on with --after)", api.MaxLimit))
	c.Flags().StringVar(&p.Node, "node", "", "only events about this node")
	c.Flags().StringVar(&p.Workflow, "workflow", "", "only events about this workflow")
	c.Flags().StringVar(&p.Kind, "kind", "", "only events of this kind (e.g. instance_repaired, node_status, paused)")
	c.Flags().Int64Var(&p.RunID, "run", 0, "only events of this run")
	c.Flags().StringVar(&since, "since", "", "only events at or after this time (RFC 3339, or a duration back from now: 1h)")
	c.Flags().StringVar(&until, "until", "", "only events before this time (RFC 3339, or a duration back from now)")
	c.Flags().StringVar(&instance, "instance", "", "WORKFLOW/ID (or ID with --workflow): the instance's state, claim, attempts and whole timeline")
	return c
}

// checkLimit refuses a --limit the daemon would refuse, as a usage error.
func checkLimit(n int) error {
	if n < 1 || n > api.MaxLimit {
		return usageError{fmt.Errorf("--limit %d: want 1 to %d", n, api.MaxLimit)}
	}
	return nil
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

func opt(p *string) string {
	if p == nil {
		return ""
	}
	return safe(*p)
}

// actor is an event's actor, with the node that took the request when
// it was an operator's.
func actor(e audit.Event) string {
	if e.Via == nil {
		return safe(e.Actor)
	}
	return safe(e.Actor) + " via " + safe(*e.Via)
}

func eventsTable(w io.Writer, es []audit.Event) error {
	return tabs(w, "ID\tAT\tKIND\tACTOR\tTERM\tNODE\tWORKFLOW\tINSTANCE\tTASK\tFROM\tTO\tREASON", func(tw io.Writer) {
		for _, e := range es {
			term := ""
			if e.Term != nil {
				term = fmt.Sprint(*e.Term)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.At.Format(time.RFC3339), safe(e.Kind), actor(e), term,
				opt(e.Node), opt(e.Workflow), opt(e.Instance), opt(e.Task), opt(e.FromState), opt(e.ToState), safe(e.Reason))
		}
	})
}

// instanceTable prints an instance's state, claim and attempts rows, then
// its timeline: one line per event, with the attempt it belongs to.
func instanceTable(w io.Writer, v recovery.InstanceView) error {
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
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.At.Format(time.RFC3339Nano), attempt, safe(e.Kind), opt(e.Node), actor(e),
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
func allEvents(ctx context.Context, cl *api.Client, p audit.ListParams) ([]audit.Event, error) {
	all := []audit.Event{}
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
