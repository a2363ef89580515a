package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/api"
	"github.com/enginehealth/enginehealth/internal/audit"
	"github.com/enginehealth/enginehealth/internal/pgdb"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
	"github.com/spf13/cobra"
)

// clientFlags are the flags of every command that talks to a daemon.
type clientFlags struct {
	addr      string
	output    string
	tokenFile string
}

func (f *clientFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.addr, "api", "", "daemon API address (default $ENGINEHEALTH_API, else "+configs.DefaultListen+")")
	c.Flags().StringVarP(&f.output, "output", "o", "table", "output format: table or json")
	c.Flags().StringVar(&f.tokenFile, "token-file", "", "file holding the API token for mutations (default $ENGINEHEALTH_TOKEN)")
}

func (f *clientFlags) client() (*api.Client, error) {
	if f.output != "table" && f.output != "json" {
		return nil, usageError{fmt.Errorf("--output %q: want table or json", f.output)}
	}
	addr := cmp.Or(f.addr, os.Getenv("ENGINEHEALTH_API"), configs.DefaultListen)
	token := os.Getenv("ENGINEHEALTH_TOKEN")
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, usageError{fmt.Errorf("--token-file: %w", err)}
		}
		token = strings.TrimSpace(string(b))
	}
	return api.NewClient(addr, token), nil
}

func newNodeCmd() *cobra.Command {
	c := &cobra.Command{Use: "node", Short: "Act on one node"}
	var f clientFlags
	var reason string
	ack := &cobra.Command{
		Use:   "ack NAME",
		Short: "Acknowledge a node's unexpected shutdown: it becomes Ready",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
			defer cancel()
			n, err := cl.Ack(ctx, args[0], reason)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return writeJSON(c.OutOrStdout(), n)
			}
			fmt.Fprintf(c.OutOrStdout(), "node %s acknowledged: %s\n", n.Name, n.Status)
			return nil
		},
	}
	f.register(ack)
	ack.Flags().StringVar(&reason, "reason", "", "recorded in the event (default: acknowledged by an operator)")
	c.AddCommand(ack)
	return c
}

// statusReport is the output of `enginehealth status`.
type statusReport struct {
	Health api.Health  `json:"health"`
	Ready  api.Ready   `json:"ready"`
	Leader *api.Leader `json:"leader"`
	// LeaderError explains a missing leader.
	LeaderError string `json:"leader_error,omitempty"`
}

func newStatusCmd() *cobra.Command {
	var f clientFlags
	c := &cobra.Command{
		Use:   "status",
		Short: "Show this node's health, readiness and the master; exit 0 only when Ready",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
			defer cancel()
			var rep statusReport
			if rep.Health, err = cl.Health(ctx); err != nil && !isStatus(err) {
				return err
			}
			if rep.Ready, err = cl.Ready(ctx); err != nil && !isStatus(err) {
				return err
			}
			if l, err := cl.Leader(ctx); err == nil {
				rep.Leader = &l
			} else if isStatus(err) {
				rep.LeaderError = err.Error()
			} else {
				return err
			}
			if f.output == "json" {
				if err := writeJSON(c.OutOrStdout(), rep); err != nil {
					return err
				}
			} else {
				w := c.OutOrStdout()
				fmt.Fprintf(w, "health   %s\n", rep.Health.Status)
				for name, res := range rep.Health.Checks {
					fmt.Fprintf(w, "  %-7s %s\n", name, res)
				}
				fmt.Fprintf(w, "node     %s", rep.Ready.Status)
				if rep.Ready.Reason != "" {
					fmt.Fprintf(w, " (%s)", rep.Ready.Reason)
				}
				fmt.Fprintln(w)
				if rep.Leader != nil {
					fmt.Fprintf(w, "master   %s at %s, term %d, since %s\n", rep.Leader.Name, rep.Leader.APIAddress,
						rep.Leader.Term, rep.Leader.Since.Format(time.RFC3339))
				} else {
					fmt.Fprintf(w, "master   none: %s\n", rep.LeaderError)
				}
			}
			if !rep.Ready.Ready {
				return errNotReady
			}
			return nil
		},
	}
	f.register(c)
	return c
}

var errNotReady = errors.New("node not ready")

func isStatus(err error) bool {
	var se *api.StatusError
	return errors.As(err, &se)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newNodesCmd() *cobra.Command {
	var f clientFlags
	c := &cobra.Command{
		Use:   "nodes [NAME]",
		Short: "List the engine nodes (or show one)",
		Args:  usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
			defer cancel()
			var ns []nodes.Node
			if len(args) == 1 {
				n, err := cl.Node(ctx, args[0])
				if err != nil {
					return err
				}
				ns = []nodes.Node{n}
			} else if ns, err = cl.Nodes(ctx); err != nil {
				return err
			}
			if f.output == "json" {
				if len(args) == 1 {
					return writeJSON(c.OutOrStdout(), ns[0])
				}
				return writeJSON(c.OutOrStdout(), ns)
			}
			return nodeTable(c.OutOrStdout(), ns)
		},
	}
	f.register(c)
	return c
}

func nodeTable(w io.Writer, ns []nodes.Node) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tMASTER\tLAST ACTIVE\tGRADE\tVERSION\tAPI\tREASON")
	for _, n := range ns {
		master := ""
		if n.IsMaster {
			master = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1fs ago\t%s\t%s\t%s\t%s\n", n.Name, n.Status, master,
			n.SecondsSinceActive, n.FailoverGrade, n.Version, n.APIAddress, n.StatusReason)
	}
	return tw.Flush()
}

func newConfigCmd() *cobra.Command {
	c := &cobra.Command{Use: "config", Short: "Configuration commands"}
	var path string
	var withDB bool
	check := &cobra.Command{
		Use:   "check",
		Short: "Validate a configuration file and print a summary (touches no database unless --database)",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := configs.Load(path)
			if err != nil {
				return err
			}
			if err := configSummary(c.OutOrStdout(), cfg); err != nil {
				return err
			}
			if !withDB {
				return nil
			}
			db, err := pgdb.Open(pgdb.Config{DSN: cfg.Database.DSN, ApplicationName: "enginehealth config check",
				StatementTimeout: cfg.Database.StatementTimeout, ConnectTimeout: cfg.Database.ConnectTimeout})
			if err != nil {
				return err
			}
			defer db.Close()
			ctx, cancel := context.WithTimeout(c.Context(), cfg.Database.StatementTimeout)
			defer cancel()
			if err := recovery.CheckCatalog(ctx, db, cfg.Workflows); err != nil {
				var ce *recovery.CatalogError
				if errors.As(err, &ce) {
					return usageError{err}
				}
				return fmt.Errorf("%w (database %s)", err, cfg.Database.RedactedDSN())
			}
			fmt.Fprintln(c.OutOrStdout(), "database   every workflow table and column exists")
			return nil
		},
	}
	configFlag(check, &path)
	check.Flags().BoolVar(&withDB, "database", false, "also check the workflow tables and columns against the database")
	c.AddCommand(check)
	return c
}

func configSummary(w io.Writer, cfg *configs.Config) error {
	name, err := cfg.NodeName(os.Hostname)
	if err != nil {
		return usageError{err}
	}
	fmt.Fprintf(w, "%s: valid\n", cfg.Path)
	fmt.Fprintf(w, "node       %s (heartbeat every %s)\n", name, cfg.Node.HeartbeatInterval)
	fmt.Fprintf(w, "database   %s, schema %s\n", cfg.Database.RedactedDSN(), cfg.Database.Schema)
	fmt.Fprintf(w, "etcd       %s, prefix %s, lease TTL %s\n", strings.Join(cfg.Etcd.Endpoints, ","), cfg.Etcd.Prefix, cfg.Etcd.LeaseTTL)
	fmt.Fprintf(w, "health     %s, not responding after %s, forget after %s\n", cfg.Health.Schedule, cfg.Health.NotRespondingAfter, cfg.Health.ForgetAfter)
	token := "off (no token)"
	if cfg.API.Token != "" {
		token = "on"
	}
	fmt.Fprintf(w, "api        %s, mutations %s\n", cfg.API.Listen, token)
	for _, wf := range cfg.Workflows {
		kind := "not claimable"
		if wf.Claimable {
			kind = "claimable, claims in " + wf.Claims.Table
		}
		fmt.Fprintf(w, "workflow   %s: %s (%s), %d tasks\n", wf.Name, wf.Table, kind, len(wf.Tasks))
		for _, t := range wf.Tasks {
			interrupted := "on_interrupt " + t.OnInterrupt.Strategy
			if t.AtomicInternal {
				interrupted = "reverted to " + t.Begin + " (atomic)"
			}
			fmt.Fprintf(w, "  task     %s: %s -> %s -> %s | %s; interrupted: %s\n",
				t.Name, t.Begin, t.Interim, strings.Join(t.EndStates(), "/"), t.Failed, interrupted)
		}
	}
	return nil
}

func newMigrateCmd() *cobra.Command {
	var path string
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the sidecar's schema migrations (the daemon also does at start)",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := configs.Load(path)
			if err != nil {
				return err
			}
			db, err := pgdb.Open(pgdb.Config{DSN: cfg.Database.DSN, ApplicationName: "enginehealth migrate",
				StatementTimeout: cfg.Database.StatementTimeout, ConnectTimeout: cfg.Database.ConnectTimeout})
			if err != nil {
				return err
			}
			defer db.Close()
			ctx, cancel := context.WithTimeout(c.Context(), cfg.Database.StatementTimeout)
			defer cancel()
			applied, err := pgdb.Migrate(ctx, db, cfg.Database.Schema)
			if err != nil {
				return fmt.Errorf("%w (database %s)", err, cfg.Database.RedactedDSN())
			}
			if len(applied) == 0 {
				fmt.Fprintf(c.OutOrStdout(), "schema %s is up to date\n", cfg.Database.Schema)
				return nil
			}
			fmt.Fprintf(c.OutOrStdout(), "schema %s: applied migrations %v\n", cfg.Database.Schema, applied)
			return nil
		},
	}
	configFlag(c, &path)
	return c
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintf(c.OutOrStdout(), "enginehealth %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

// longOp bounds manual runs, which can repair many instances.
const longOp = 10 * time.Minute

func newCheckCmd() *cobra.Command {
	var f clientFlags
	c := &cobra.Command{
		Use:   "check",
		Short: "Run a CheckEngineHealth pass on the master now",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			cl.HTTP.Timeout = longOp
			res, err := cl.Check(c.Context())
			if err != nil {
				return err
			}
			if f.output == "json" {
				return writeJSON(c.OutOrStdout(), res)
			}
			w := c.OutOrStdout()
			fmt.Fprintf(w, "run %d (%s)\n", res.RunID, res.Took.Round(time.Millisecond))
			if res.Disruption {
				fmt.Fprintf(w, "disruption mode: %d nodes look unresponsive at once (%s); nothing was done\n", len(res.Stale), strings.Join(res.Stale, ","))
				return nil
			}
			for _, ch := range append(append(res.NotResponding, res.Revived...), res.Forgotten...) {
				to := ch.To
				if to == "" {
					to = "(forgotten)"
				}
				fmt.Fprintf(w, "node %s: %s -> %s\n", ch.Name, ch.From, to)
			}
			fmt.Fprintf(w, "claims expired: %d\n", res.Recovery.ClaimsExpired)
			return recoveryTable(w, res.Recovery.Tasks, false)
		},
	}
	f.register(c)
	return c
}

func recoveryTable(w io.Writer, ts []recovery.TaskResult, plan bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if plan {
		fmt.Fprintln(tw, "WORKFLOW\tTASK\tFROM\tTO\tINSTANCES")
	} else {
		fmt.Fprintln(tw, "WORKFLOW\tTASK\tFROM\tTO\tPLANNED\tREPAIRED")
	}
	for _, t := range ts {
		if plan {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", t.Workflow, t.Task, t.From, t.To, t.Planned)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", t.Workflow, t.Task, t.From, t.To, t.Planned, t.Done)
		}
	}
	return tw.Flush()
}

func newRecoverCmd() *cobra.Command {
	var f clientFlags
	var req api.RecoveryRequest
	c := &cobra.Command{
		Use:   "recover",
		Short: "Expire claims and repair interrupted instances now (through the master)",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			cl.HTTP.Timeout = longOp
			a, err := cl.Recover(c.Context(), req)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return writeJSON(c.OutOrStdout(), a)
			}
			w := c.OutOrStdout()
			if a.DryRun {
				fmt.Fprintln(w, "dry run: nothing was changed")
				var ts []recovery.TaskResult
				for _, p := range a.Plan {
					fmt.Fprintf(w, "workflow %s: %d expired claims to delete\n", p.Workflow, p.ClaimsToExpire)
					ts = append(ts, p.Tasks...)
				}
				return recoveryTable(w, ts, true)
			}
			fmt.Fprintf(w, "run %d: claims expired %d, instances repaired %d\n", a.Result.RunID, a.Result.ClaimsExpired, a.Result.Done())
			return recoveryTable(w, a.Result.Tasks, false)
		},
	}
	f.register(c)
	c.Flags().StringSliceVar(&req.Workflows, "workflow", nil, "workflow to recover (repeatable; default: every claimable workflow)")
	c.Flags().BoolVar(&req.DryRun, "dry-run", false, "print the plan and change nothing")
	return c
}

func newRunsCmd() *cobra.Command {
	var f clientFlags
	var limit int
	c := &cobra.Command{
		Use:   "runs",
		Short: "List the latest check and recovery runs",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			rs, err := cl.Runs(c.Context(), limit)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return writeJSON(c.OutOrStdout(), rs)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tKIND\tTRIGGER\tTERM\tMASTER\tSTATUS\tPLANNED\tDONE\tSTARTED\tNOTE")
			for _, r := range rs {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\t%s\n", r.ID, r.Kind, r.Trigger, r.Term, r.Master, r.Status,
					r.Planned, r.Done, r.StartedAt.Format(time.RFC3339), r.Error)
			}
			return tw.Flush()
		},
	}
	f.register(c)
	c.Flags().IntVar(&limit, "limit", 20, "how many runs")
	return c
}

func newEventsCmd() *cobra.Command {
	var f clientFlags
	var p audit.ListParams
	c := &cobra.Command{
		Use:   "events",
		Short: "List the audit trail (oldest first)",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			es, err := cl.Events(c.Context(), p)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return writeJSON(c.OutOrStdout(), es)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tAT\tKIND\tACTOR\tTERM\tNODE\tWORKFLOW\tINSTANCE\tTASK\tFROM\tTO\tREASON")
			s := func(p *string) string {
				if p == nil {
					return ""
				}
				return *p
			}
			for _, e := range es {
				term := ""
				if e.Term != nil {
					term = fmt.Sprint(*e.Term)
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.At.Format(time.RFC3339), e.Kind, e.Actor, term,
					s(e.Node), s(e.Workflow), s(e.Instance), s(e.Task), s(e.FromState), s(e.ToState), e.Reason)
			}
			return tw.Flush()
		},
	}
	f.register(c)
	c.Flags().Int64Var(&p.AfterID, "after", 0, "only events with a larger id")
	c.Flags().IntVar(&p.Limit, "limit", 100, "how many events")
	c.Flags().StringVar(&p.Node, "node", "", "only events about this node")
	return c
}
