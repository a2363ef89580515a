package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/app/metrics"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/backoff"
	"github.com/enginehealth/enginehealth/internal/infra/certexpiry"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/infra/tlsfiles"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
	"github.com/enginehealth/enginehealth/systemd"
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
// shuts down cleanly. A slow dependency is waited for, never crashed on.
// level is the logger's level, changed by a reload (nil: fixed, and a
// change of log.level needs a restart).
func runDaemon(ctx context.Context, cfg *configs.Config, log *slog.Logger, level *slog.LevelVar) error {
	// From the start: a SIGHUP (systemctl reload) while the daemon still
	// connects must not end it (Go's default), it is served once it runs.
	hup := notifyHUP(ctx)
	name, err := cfg.NodeName(os.Hostname)
	if err != nil {
		return usageError{err}
	}
	hostname, _ := os.Hostname()
	incarnation := uuid.NewString()
	log = log.With("node", name)
	build := buildInfo()
	log.InfoContext(ctx, "starting enginehealth", "version", version, "commit", build.Commit, "incarnation", incarnation,
		"database", cfg.Database.RedactedDSN(), "schema", cfg.Database.Schema, "etcd", cfg.Etcd.RedactedEndpoints())
	for _, w := range cfg.Warnings {
		log.WarnContext(ctx, "configuration: "+w.Msg, "key", w.Path, "line", w.Line)
	}
	// A certificate that expires soon is said at once (before a
	// connection it may break is tried), then once a day.
	certs := watchCertificates(cfg, certexpiry.Options{})
	certLog := log.With("component", "certificates")
	certs.Check(ctx, certLog)

	tokens, err := apiAuth(cfg.API.Operators)
	if err != nil {
		return usageError{err}
	}
	// Who may use the API: the operators' tokens, and with client CAs a
	// verified client certificate (role read, its CN the name).
	var auth api.Authenticator
	if tokens != nil {
		auth = tokens
	}
	if cfg.API.ClientCAs != nil {
		auth = api.Either(auth, api.ClientCerts{})
	}

	// The listener first: an address that cannot be bound fails the start
	// before anything touches the database or etcd.
	ln, err := net.Listen("tcp", cfg.API.Listen)
	if err != nil {
		return fmt.Errorf("api.listen: %w", err)
	}
	defer func() { _ = ln.Close() }() // the server closes it when it shuts down: this is for an early return
	advertise := cfg.API.AdvertiseURL(ln.Addr().String())

	// Both pools check each new connection's server: another PostgreSQL
	// cluster behind the address is refused (learnt once migrated).
	cluster := pgdb.NewCluster(cfg.Database.Schema, log.With("component", "database"))
	pool := cfg.Database.Pool("enginehealth/" + name)
	pool.Cluster = cluster
	db, err := pgdb.Open(pool)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }() // closing a pool after use: nothing to act on
	// The API's requests get a small pool of their own: a flood of reads
	// waits there (and is refused 503 busy), never for a connection the
	// heartbeat or the master's work needs.
	apiPool := cfg.Database.Pool("enginehealth/" + name + "/api")
	apiPool.MaxOpenConns = api.DefaultMaxDBRequests
	apiPool.Cluster = cluster
	apiDB, err := pgdb.Open(apiPool)
	if err != nil {
		return err
	}
	defer func() { _ = apiDB.Close() }() // closing a pool after use: nothing to act on
	// etcd before the schema is migrated: it witnesses which PostgreSQL
	// cluster the fleet uses, so that an empty server of another cluster
	// behind the database's address is refused before anything is
	// written to it (witnessCluster).
	etcd, err := connectEtcd(ctx, cfg, log)
	if err != nil {
		return stopped(ctx, log, err)
	}
	defer func() { _ = etcd.Close() }() // closing a client after use: nothing to act on
	witness := func(ctx context.Context, live int64) error { return witnessCluster(ctx, etcd, cfg, live, log) }
	// The configured engine tables must exist as named: a mismatch is a
	// configuration error, reported before the schema is migrated.
	if err := connectDatabase(ctx, cfg, db, cluster, witness, log); err != nil {
		return stopped(ctx, log, err)
	}
	etcdState := newEtcdCheck(etcd, cfg, log.With("component", "etcd"))

	// One event log, shared by every writer of the events table.
	events := audit.New(cfg.Database.Schema)
	events.SetLogger(log.With("component", "audit"))
	store, err := nodes.NewStore(nodes.StoreConfig{DB: db, Schema: cfg.Database.Schema, Events: events, Cluster: cluster})
	if err != nil {
		return err
	}
	reg := nodes.Registration{Name: name, Incarnation: incarnation, Hostname: hostname, Version: version, APIAddress: advertise,
		SchemaVersion:     build.SchemaVersion,
		RecoverAfterCrash: cfg.Node.OnUnexpectedShutdown == nodes.UnexpectedShutdownRecover}
	var node nodes.Node
	err = retry(ctx, log, "register node", cfg.Database.StatementTimeout, func(ctx context.Context) error {
		node, err = store.Register(ctx, reg)
		return err
	})
	if err != nil {
		return stopped(ctx, log, err)
	}
	switch {
	case node.Status == nodes.StatusUnexpectedShutdown:
		log.WarnContext(ctx, "the previous run of this node did not shut down cleanly; it stays out of service until an operator acknowledges it (enginehealth node ack "+name+")",
			"previous_incarnation", *node.PreviousIncarnation, "reason", node.StatusReason)
	case node.PreviousIncarnation != nil:
		log.WarnContext(ctx, "the previous run of this node did not shut down cleanly; recovering as configured (node.on_unexpected_shutdown: recover)",
			"previous_incarnation", *node.PreviousIncarnation)
	}
	log.InfoContext(ctx, "node registered", "status", node.Status, "api", advertise)

	notify := systemd.NewNotifier(log)
	// A beat may need a new connection: a connect timeout for each host
	// of the DSN, then the statement (a DSN with host=a,b whose first
	// host is frozen after a failover).
	var lastStatus nodes.Status
	hb, err := nodes.NewHeartbeater(nodes.HeartbeatConfig{Store: store, Name: name, Incarnation: incarnation,
		Interval: cfg.Node.HeartbeatInterval, Log: log, Registration: &reg, Registered: node,
		// A silent server: the API's connections lead there too.
		Reset:   func() { pgdb.Reset(db); pgdb.Reset(apiDB) },
		Timeout: time.Duration(pgdb.Hosts(pool.DSN))*cfg.Database.ConnectTimeout + cfg.Node.HeartbeatInterval,
		OnChange: func(status nodes.Status, grade string) {
			if status != lastStatus {
				log.InfoContext(ctx, "node status", "status", status)
				lastStatus = status
			}
			// READY=1 when the node is ready as /readyz says: Ready, and not
			// ERROR with failover.error_not_ready (sent again after a reset).
			rd := readiness(status, grade, cfg.Failover.ErrorNotReady, nil) // just after a beat
			if rd.Ready {
				notify.Ready()
			}
			text := "node " + name + ": " + string(status)
			if !rd.Ready && status == nodes.StatusReady {
				text += " (not ready: failover grade " + grade + ")"
			}
			notify.Status(text)
		}})
	if err != nil {
		return err
	}

	fence, err := leader.NewFence(leader.FenceConfig{DB: db, Schema: cfg.Database.Schema, Events: events,
		Cluster: cluster, // no master write commits on another cluster
		Log:     log})
	if err != nil {
		return err
	}
	elector, err := leader.New(leader.Config{
		Client:      etcd,
		Prefix:      cfg.Etcd.Prefix,
		TTL:         cfg.Etcd.LeaseTTL,
		TrustMargin: cfg.Etcd.TrustMargin,
		Candidate:   leader.Candidate{Name: name, Incarnation: incarnation, APIAddress: advertise},
		// Self-gating: no master write while our own heartbeat has failed
		// for longer than an interval.
		Gate:          hb.Gate,
		ResignTimeout: min(cfg.Node.ShutdownTimeout/4, 2*time.Second),
		Log:           log,
	})
	if err != nil {
		return err
	}
	workflows := cfg.RecoveryWorkflows()
	repairer, err := recovery.New(recovery.Config{
		DB: db, Fence: fence, Events: events, Schema: cfg.Database.Schema,
		Workflows: workflows, BatchSize: cfg.Recovery.BatchSize, Log: log,
		EventRetries: func(ctx context.Context) (bool, error) { return store.FleetKnows(ctx, recovery.EventRetriesSchema) },
	})
	if err != nil {
		return err
	}
	sched := cfg.Health.ParsedSchedule
	apiStore, err := nodes.NewStore(nodes.StoreConfig{DB: apiDB, Schema: cfg.Database.Schema, Events: events})
	if err != nil {
		return err
	}
	// Read only: the current term.
	apiFence, err := leader.NewFence(leader.FenceConfig{DB: apiDB, Schema: cfg.Database.Schema, Events: events, OnTerm: elector.ObserveTerm})
	if err != nil {
		return err
	}
	reads, err := recovery.New(recovery.Config{DB: apiDB, Fence: apiFence, Events: events, Schema: cfg.Database.Schema,
		Workflows: workflows, Log: log})
	if err != nil {
		return err
	}
	var checker *health.Checker
	var master *health.Master
	apiPauses := health.NewPauses(apiDB, cfg.Database.Schema, events)
	mx := metrics.New(metrics.Source{
		Paused: func(ctx context.Context) (bool, time.Time, error) {
			p, err := apiPauses.Current(ctx)
			return p.Paused, p.Since, err
		},
		EventsWritten: func(ctx context.Context) (int64, error) { return events.LastID(ctx, apiDB) },
		Nodes:         apiStore.List, HoldsOpen: reads.HoldsOpen, Period: sched.Period(), Tasks: metricTasks(workflows),
		Status: hb.Status, Grade: hb.Grade,
		Master: func() (bool, int64) {
			st := master.Status()
			return st.Acting, st.Term
		},
		Passes: func() health.PassStats {
			// Counted from taking office: a success of an earlier office
			// says nothing of this one (the alert on the last success's
			// age would fire at once on a node that led before).
			st := master.Status()
			p := st.Passes
			// Counted from when the office may act (it may wait out an
			// earlier master's window after taking office).
			if from := later(st.Since, st.ActingFrom); st.InOffice && p.LastSuccess.Before(from) {
				p.LastSuccess = from
			}
			return p
		},
		Disrupted:     func() bool { return checker.Disrupted() },
		Certificates:  certs.Expiries,
		EtcdReachable: func() bool { return etcdState.State().Reachable },
		Build:         buildLabels(build),
	})
	checker, err = health.NewChecker(health.CheckConfig{
		Fence: fence, Nodes: store, Recovery: repairer, Events: events,
		Interval:                sched.Period(),
		NotRespondingAfter:      cfg.Health.NotRespondingAfter,
		ForgetAfter:             cfg.Health.ForgetAfter,
		MaxUnresponsiveFraction: cfg.Health.MaxUnresponsiveFraction,
		SweepInterval:           cfg.Health.SweepInterval,
		Grades:                  new(cfg.Failover.Grades()),
		Pauses:                  health.NewPauses(db, cfg.Database.Schema, events),
		OnPass:                  mx.ObservePass,
		DatabaseBack: func() time.Time {
			if t := cluster.ServerChanged(); t.After(hb.Resumed()) {
				return t
			}
			return hb.Resumed()
		},
		Log: log,
	})
	if err != nil {
		return err
	}
	master, err = health.NewMaster(health.MasterConfig{
		Fence: fence, Nodes: store, Recovery: repairer, Checker: checker,
		Schedule: sched,
		Tick:     cfg.Node.HeartbeatInterval,
		Log:      log,
	})
	if err != nil {
		return err
	}
	self := apitype.Leader{Name: name, Incarnation: incarnation, APIAddress: advertise}

	srv := api.NewServer(
		api.NewHandler(api.Config{
			Self:  name,
			Nodes: apiStore,
			Acker: apiStore,
			Ready: func() apitype.Ready { return readiness(hb.Status(), hb.Grade(), cfg.Failover.ErrorNotReady, hb.Live()) },
			Local: func() (apitype.Leader, error) { return actingSelf(self, master.Status()) },
			Candidates: func(ctx context.Context) ([]leader.Candidate, error) {
				return leader.Candidates(ctx, etcd, apiFence, cfg.Etcd.Prefix, apiStore.AddressOf)
			},
			Auth:      auth,
			AuthReads: cfg.API.AuthReads,
			Forward:   peerClient(cfg.API.PeerTLS, cfg.API.PeerCAs),
			Ops: &health.Ops{Elector: elector, Checker: checker, Recovery: repairer, Reads: reads,
				Pauses: apiPauses},
			Metrics:  mx.Handler(),
			Requests: mx.ObserveRequest,
			Events: func(ctx context.Context, p audit.ListParams) ([]audit.Event, error) {
				return events.List(ctx, apiDB, p)
			},
			LastEventID: func(ctx context.Context) (int64, error) { return events.LastID(ctx, apiDB) },
			Live: []api.Check{
				{Name: "heartbeat", Check: hb.Live},
				{Name: "master", Check: master.Stuck},
			},
			MaxDBRequests: api.DefaultMaxDBRequests,
			Certificates:  certs.Expiries,
			Etcd:          etcdState.State,
			Build:         &build,
			// Nodes present their certificates when they forward (PeerTLS).
			VerifyForwarders: cfg.API.ClientCAs != nil,
			Log:              log,
		}),
		log, api.ServerOptions{})
	// Capped first, then TLS: a connection in its handshake counts
	// against the cap and is closed to make room like a slow header, and
	// the handshake has the read timeout.
	ln = api.NewListener(ln, log, api.ServerOptions{})
	if cfg.API.ServerTLS != nil {
		ln = tls.NewListener(ln, cfg.API.ServerTLS)
	}

	// Shutdown is bounded: every step has a share of node.shutdown_timeout,
	// and the process exits if they overrun it.
	defer hardStop(ctx, log, cfg.Node.ShutdownTimeout)()

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return hb.Run(gctx) })
	// SIGHUP (systemctl reload) and changed files: what can change while
	// the daemon runs is applied, the rest is logged as needing a restart.
	reload := newReloader(cfg, log, DefaultReloadPoll, hup, reloadParts(tokens, cfg, level, func() {
		// New etcd TLS material: connect again now, not after gRPC's
		// backoff (the ERROR it said while it waited was stale).
		etcd.ActiveConnection().ResetConnectBackoff()
		etcdState.CheckSoon()
		// The connections open go on with the old material: try the new
		// one on every member now, so that a file that will not work is
		// said at the reload, not at the next reconnection (hours later).
		go etcdState.TryMaterial(gctx)
	})...)
	g.Go(func() error { return reload.Run(gctx) })
	g.Go(func() error { return certs.Run(gctx, certLog) })
	g.Go(func() error { return etcdState.Run(gctx) })
	if *cfg.Etcd.AutoSyncInterval > 0 {
		members := newEtcdSync(etcd, cfg.Etcd, log.With("component", "etcd"))
		g.Go(func() error { return members.Run(gctx) })
	}
	g.Go(func() error {
		// Fed while the daemon's own loops run and the master is not
		// stuck; a database or etcd outage is waited out, not restarted.
		return notify.Watchdog(gctx, func() error {
			return errors.Join(hb.LoopAlive(), master.Stuck())
		})
	})
	g.Go(func() error {
		// A node in Unexpected shutdown runs no recovery and is not a
		// candidate for master until an operator acknowledges it: at
		// start, and whenever a beat finds it there again (its ack was
		// lost with the database in an asynchronous failover), when it
		// leaves the election, and the office if it holds it.
		unacked := func(s nodes.Status) bool { return s == nodes.StatusUnexpectedShutdown }
		for {
			if unacked(hb.Status()) || hb.Status() == "" && unacked(node.Status) {
				log.WarnContext(ctx, "not campaigning for master until this node is acknowledged (enginehealth node ack "+name+")")
			}
			if _, err := hb.WaitFor(gctx, func(s nodes.Status) bool { return !unacked(s) }); err != nil {
				return nil
			}
			cctx, leave := context.WithCancel(gctx)
			go func() {
				if _, err := hb.WaitFor(cctx, unacked); err == nil {
					log.WarnContext(ctx, "this node is in "+string(nodes.StatusUnexpectedShutdown)+" again (its acknowledgment was lost with the database?): leaving the election until an operator acknowledges it")
					leave()
				}
			}()
			err := elector.Run(cctx, master.Lead)
			leave()
			if err != nil || gctx.Err() != nil {
				return err
			}
		}
	})
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("api: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		notify.Stopping()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), cfg.Node.ShutdownTimeout/4)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			// Requests still running (a long forwarded run) are cut.
			log.WarnContext(ctx, "API requests still running at shutdown were closed", slog.Any("err", err))
			_ = srv.Close()
		}
		return nil
	})
	runErr := g.Wait()

	if runErr != nil {
		log.ErrorContext(ctx, "stopping on error", slog.Any("err", runErr))
	} else {
		log.InfoContext(ctx, "shutting down")
	}
	if !errors.Is(runErr, nodes.ErrNotRegistered) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Node.ShutdownTimeout/2)
		defer cancel()
		switch err := store.Deregister(sctx, name, incarnation, "clean shutdown"); {
		case errors.Is(err, nodes.ErrAwaitingAck):
			log.WarnContext(ctx, "node record kept: it awaits an operator ack", "status", nodes.StatusUnexpectedShutdown, "hint", "enginehealth node ack "+name)
		case err != nil:
			log.ErrorContext(ctx, "could not delete the node record; the next start will report an unexpected shutdown", slog.Any("err", err))
			runErr = errors.Join(runErr, err)
		}
	}
	if runErr == nil {
		log.InfoContext(ctx, "stopped")
	}
	return runErr
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

// stopped turns a startup error caused by shutdown into a clean exit.
func stopped(ctx context.Context, log *slog.Logger, err error) error {
	if ctx.Err() != nil {
		log.InfoContext(ctx, "stopped before start-up completed")
		return nil
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
