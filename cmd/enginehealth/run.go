package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/spf13/cobra"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/app/metrics"
	"github.com/enginehealth/enginehealth/internal/infra/backoff"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/infra/tlsfiles"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

func newRunCmd() *cobra.Command {
	var path string
	c := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon",
		Long: `Run the daemon: register this node, heartbeat it, take part in the master
election and, as master, run start-up recovery and the CheckEngineHealth
pass on its schedule; serve the HTTP API. Logs go to stderr (log.format
text or json). SIGTERM or SIGINT stops it cleanly (a second one at once).`,
		Example: `  enginehealth run --config /etc/enginehealth/enginehealth.yaml
  ExecStart=/usr/local/bin/enginehealth run --config /etc/enginehealth/enginehealth.yaml`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			// A SIGHUP (systemctl reload) before the daemon listens for it
			// must not end the process (Go's default); runDaemon serves
			// the ones after, and its poll sees a file changed meanwhile.
			signal.Ignore(syscall.SIGHUP)
			cfg, err := configs.Load(path)
			if err != nil {
				return err
			}
			log, level, err := newLogger(cfg.Log.Format, cfg.Log.Level, c.ErrOrStderr())
			if err != nil {
				return err
			}
			return runDaemon(c.Context(), cfg, log, level)
		},
	}
	configFlag(c, &path)
	return c
}

// connectBackoff paces retries of a dependency that is not up yet.
var connectBackoff = backoff.Backoff{Base: 250 * time.Millisecond, Max: 10 * time.Second}

// retry runs op until it succeeds, logging each failure. It returns the
// context's error when the daemon is told to stop first.
func retry(ctx context.Context, log *slog.Logger, what string, timeout time.Duration, op func(context.Context) error) error {
	return backoff.Retry(ctx, connectBackoff,
		func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			return op(ctx)
		},
		func(attempt int, err error, next time.Duration) {
			log.WarnContext(ctx, what+" failed, retrying", "attempt", attempt, "retry_in", next.Round(time.Millisecond), slog.Any("err", err))
		})
}

// runDaemon runs one node until ctx is cancelled (SIGTERM/SIGINT), then
// shuts it down cleanly: newDaemon starts it up and builds it, Run runs
// and stops it. A stop before the start-up completed is a clean exit.
// level is the logger's level, changed by a reload (nil: fixed, and a
// change of log.level needs a restart).
func runDaemon(ctx context.Context, cfg *configs.Config, log *slog.Logger, level *slog.LevelVar) error {
	d, err := newDaemon(ctx, cfg, log, level)
	if errors.Is(err, errStoppedEarly) {
		return nil
	}
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// hardStop arms, once ctx is done, a timer that ends the process when the
// shutdown overruns its budget: a stuck dependency must never keep a
// stopped daemon running. The returned function disarms it.
func hardStop(ctx context.Context, log *slog.Logger, budget time.Duration) func() {
	var (
		mu    sync.Mutex
		timer *time.Timer
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(budget+time.Second, func() {
			log.Error("shutdown did not finish within node.shutdown_timeout; exiting", "shutdown_timeout", budget)
			os.Exit(exitFailure)
		})
	})
	return func() {
		stop()
		mu.Lock()
		defer mu.Unlock()
		if timer != nil {
			timer.Stop()
		}
	}
}

// metricTasks names the configured tasks for the metrics.
func metricTasks(wfs []recovery.Workflow) []metrics.Task {
	var ts []metrics.Task
	for _, w := range wfs {
		for _, t := range w.Tasks {
			ts = append(ts, metrics.Task{Workflow: w.Name, Task: t.Name})
		}
	}
	return ts
}

// readiness answers /readyz from the node's status and failover grade as
// its last successful heartbeat saw them, and from the heartbeat itself
// (live: Heartbeater.Live's answer): a node whose heartbeats fail, such as
// one cut from PostgreSQL, is not ready, whatever its record said, since
// the master marks it Not responding and repairs its work once its record
// is stale.
func readiness(status nodes.Status, grade string, errorNotReady bool, live error) apitype.Ready {
	ready, reason := nodes.Readiness(status, grade, errorNotReady)
	if ready && live != nil {
		ready, reason = false, "heartbeat failing: "+live.Error()
	}
	return apitype.Ready{Ready: ready, Status: string(status), Grade: grade, Reason: reason}
}

// actingSelf is this node's answer to GET /v1/leader?local=true.
func actingSelf(self apitype.Leader, st health.Status) (apitype.Leader, error) {
	if !st.Acting {
		return apitype.Leader{}, errors.New(st.Reason)
	}
	self.Term, self.Since, self.TrustedUntil, self.Passes, self.Stuck = st.Term, st.Since, st.TrustedUntil, api.WirePassStats(st.Passes), st.Stuck
	return self, nil
}

// stopped turns a startup error caused by shutdown into errStoppedEarly
// (runDaemon's clean exit).
func stopped(ctx context.Context, log *slog.Logger, err error) error {
	if ctx.Err() != nil {
		log.InfoContext(ctx, errStoppedEarly.Error())
		return errStoppedEarly
	}
	return err
}

// connectDatabase waits for PostgreSQL, has witness (when set) judge the
// server's cluster and checks the engine tables the configuration names
// (checkCatalog) before anything is written, migrates the schema and
// learns the cluster it is on (cluster then refuses a server of another
// one). A configuration wrong for the database is refused before the
// schema is migrated: one node with a typo in a rollout does not move
// the fleet's schema on.
func connectDatabase(ctx context.Context, cfg *configs.Config, db *sqlx.DB, cluster *pgdb.Cluster, witness func(context.Context, int64) error, log *slog.Logger) error {
	var refused error
	if err := retry(ctx, log, "connect to PostgreSQL", cfg.Database.ConnectTimeout, func(ctx context.Context) error {
		err := pgdb.Ping(ctx, db, cfg.Database.ConnectTimeout)
		if r := pgdb.Refusal(err); r != nil {
			refused = r
			return nil // no retry can help: stop and say why
		}
		return err
	}); err != nil {
		return err
	}
	if refused != nil {
		return usageError{fmt.Errorf("database %s: %w", cfg.Database.Where(), refused)}
	}
	log.InfoContext(ctx, "connected to PostgreSQL")
	if witness != nil {
		var wrong *wrongWitnessError
		if err := retry(ctx, log, "compare the PostgreSQL cluster with etcd's record", cfg.Database.StatementTimeout, func(ctx context.Context) error {
			id, err := pgdb.LiveIdentifier(ctx, db)
			if err != nil {
				return err
			}
			err = witness(ctx, id)
			if errors.As(err, &wrong) {
				return nil // no retry can help: stop and say why
			}
			return err
		}); err != nil {
			return err
		}
		if wrong != nil {
			return usageError{wrong}
		}
	}
	if err := checkCatalog(ctx, cfg, db, log); err != nil {
		return err
	}
	var newer *pgdb.NewerSchemaError
	if err := retry(ctx, log, "migrate", cfg.Database.StatementTimeout, func(ctx context.Context) error {
		applied, err := pgdb.Migrate(ctx, db, cfg.Database.Schema)
		if errors.As(err, &newer) {
			return nil // a newer binary migrated it: no retry helps
		}
		if err != nil {
			return err
		}
		if len(applied) > 0 {
			log.InfoContext(ctx, "schema migrated", "schema", cfg.Database.Schema, "applied", applied)
		}
		if err := cluster.Learn(ctx, db); err != nil {
			return err
		}
		id, _ := cluster.Identifier()
		log.InfoContext(ctx, "PostgreSQL cluster", "system_identifier", id)
		return nil
	}); err != nil {
		return err
	}
	if newer != nil {
		// Exit 2, which the unit does not restart (RestartPreventExitStatus):
		// an older binary during a rollout, or a rollback below the
		// schema, is not started until it is upgraded.
		return usageError{fmt.Errorf("database %s: %w", cfg.Database.Where(), newer)}
	}
	return nil
}

func checkCatalog(ctx context.Context, cfg *configs.Config, db *sqlx.DB, log *slog.Logger) error {
	var catErr *recovery.CatalogError
	err := retry(ctx, log, "check engine tables", cfg.Database.StatementTimeout, func(ctx context.Context) error {
		err := recovery.CheckCatalog(ctx, db, cfg.RecoveryWorkflows())
		if errors.As(err, &catErr) {
			return nil // not transient: stop retrying
		}
		return err
	})
	if err != nil {
		return err
	}
	if catErr != nil {
		return usageError{catErr}
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// apiAuth is the API's authenticator of the configured operators; nil
// (mutations off) when there are none.
func apiAuth(ops []configs.Operator) (*api.Tokens, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	return api.NewTokens(apiOperators(ops))
}

func apiOperators(ops []configs.Operator) []api.Operator {
	set := make([]api.Operator, 0, len(ops))
	for _, o := range ops {
		set = append(set, api.Operator{Name: o.Name, SHA256: o.SHA256, Role: api.Role(o.Role)})
	}
	return set
}

// peerClient is the HTTP client between nodes (forwarding to the master,
// asking a node for its view): https with tc, verifying against the CAs
// cas holds at each dial (a reload applies at once); tc nil: plain HTTP
// only.
func peerClient(tc *tls.Config, cas *tlsfiles.CAs) *http.Client {
	c := &http.Client{Timeout: 10 * time.Minute}
	if tc != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialTLSContext = tlsfiles.DialFunc(tc, cas)
		c.Transport = tr
	}
	return c
}
