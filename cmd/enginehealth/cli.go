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
	"time"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
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
	c.Flags().StringVar(&f.tokenFile, "token-file", "", "file holding the API token for mutations (default: the token itself from $ENGINEHEALTH_TOKEN)")
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
				fmt.Fprintf(w, "health   %s\n", safe(rep.Health.Status))
				for name, res := range rep.Health.Checks {
					fmt.Fprintf(w, "  %-7s %s\n", safe(name), safe(res))
				}
				fmt.Fprintf(w, "node     %s", safe(rep.Ready.Status))
				if rep.Ready.Reason != "" {
					fmt.Fprintf(w, " (%s)", safe(rep.Ready.Reason))
				}
				fmt.Fprintln(w)
				if l := rep.Leader; l != nil {
					fmt.Fprintf(w, "master   %s at %s, term %d, in office since %s\n", safe(l.Name), safe(l.APIAddress),
						l.Term, l.Since.Format(time.RFC3339))
					fmt.Fprintf(w, "checks   %s\n", safe(passSummary(l.Passes, time.Now())))
					if l.Stuck != "" {
						fmt.Fprintf(w, "  STUCK  %s\n", safe(l.Stuck))
					}
				} else {
					fmt.Fprintf(w, "master   none acting: %s\n", safe(rep.LeaderError))
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

// passSummary says how the master's check passes go.
func passSummary(p health.PassStats, now time.Time) string {
	last := "no pass succeeded yet"
	if !p.LastSuccess.IsZero() {
		last = fmt.Sprintf("last pass succeeded %s ago", now.Sub(p.LastSuccess).Round(time.Second))
	}
	if p.ConsecutiveFailures == 0 {
		return last
	}
	return fmt.Sprintf("%s; %d consecutive failures, last: %s", last, p.ConsecutiveFailures, p.LastError)
}

func isStatus(err error) bool {
	var se *api.StatusError
	return errors.As(err, &se)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
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
			db, err := pgdb.Open(cfg.Database.Pool("enginehealth config check"))
			if err != nil {
				return err
			}
			defer db.Close()
			ctx, cancel := context.WithTimeout(c.Context(), cfg.Database.StatementTimeout)
			defer cancel()
			if err := recovery.CheckCatalog(ctx, db, cfg.RecoveryWorkflows()); err != nil {
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
	for _, warning := range cfg.Warnings {
		fmt.Fprintf(w, "warning    %s\n", warning)
	}
	fmt.Fprintf(w, "node       %s (heartbeat every %s)\n", name, cfg.Node.HeartbeatInterval)
	fmt.Fprintf(w, "database   %s, schema %s\n", cfg.Database.RedactedDSN(), cfg.Database.Schema)
	fmt.Fprintf(w, "etcd       %s, prefix %s, lease TTL %s, trust margin %s\n", strings.Join(cfg.Etcd.RedactedEndpoints(), ","), cfg.Etcd.Prefix, cfg.Etcd.LeaseTTL, cfg.Etcd.TrustMargin)
	fmt.Fprintf(w, "health     %s, not responding after %s, forget after %s\n", cfg.Health.Schedule, cfg.Health.NotRespondingAfter, cfg.Health.ForgetAfter)
	token := "off (no token)"
	if cfg.API.Token != "" {
		token = "on"
	}
	fmt.Fprintf(w, "api        %s, mutations %s\n", cfg.API.Listen, token)
	models := cfg.RecoveryWorkflows()
	for i, wf := range cfg.Workflows {
		kind := "not claimable"
		if wf.Claimable {
			kind = "claimable, claims in " + wf.Claims.Table
		}
		fmt.Fprintf(w, "workflow   %s: %s (%s), %d tasks\n", wf.Name, wf.Table, kind, len(wf.Tasks))
		for j, t := range wf.Tasks {
			atomic := ""
			if t.AtomicInternal {
				atomic = " (atomic)"
			}
			fmt.Fprintf(w, "  task     %s%s: %s -> %s -> %s | %s\n", t.Name, atomic, t.Begin, t.Interim, strings.Join(t.EndStates(), "/"), t.Failed)
			// What each policy will do, retry after retry.
			m := models[i].Tasks[j]
			fmt.Fprintf(w, "    interrupted (%s):\n", t.Interim)
			for _, e := range recovery.Effects(m, recovery.CauseInterrupt) {
				fmt.Fprintf(w, "      %s\n", e)
			}
			if m.FailurePolicy().Strategy != recovery.StrategyNone {
				fmt.Fprintf(w, "    failed by the engine (%s), from when the policy is first applied:\n", t.Failed)
				for _, e := range recovery.Effects(m, recovery.CauseFailure) {
					fmt.Fprintf(w, "      %s\n", e)
				}
			}
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
			db, err := pgdb.Open(cfg.Database.Pool("enginehealth migrate"))
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
