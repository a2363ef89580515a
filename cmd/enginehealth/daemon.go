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
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/app/metrics"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/certexpiry"
	"github.com/enginehealth/enginehealth/internal/infra/leasefile"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
	"github.com/enginehealth/enginehealth/systemd"
)

// daemon is one node: newDaemon starts it up (binds the API's address,
// waits for etcd and PostgreSQL, migrates, registers the node) and builds
// its parts, Run runs their loops until its context ends, and shutdown
// stops them and releases what newDaemon opened, in one order.
type daemon struct {
	cfg   *configs.Config
	log   *slog.Logger
	level *slog.LevelVar // the logger's level, changed by a reload; nil: fixed
	hup   <-chan os.Signal

	name, incarnation string
	advertise         string // the API's address as the other nodes reach it
	build             apitype.Build
	certs             *certexpiry.Watch
	certLog           *slog.Logger
	tokens            *api.Tokens // the operators' tokens; nil: mutations off
	// stateDir holds the lease file (recordLease), written by this
	// process (self); "": none is kept.
	stateDir string
	self     leasefile.Process

	// Opened by newDaemon and closed by shutdown (close); nil until
	// opened.
	ln        net.Listener // the API's, as bound
	db, apiDB *sqlx.DB
	etcd      *clientv3.Client
	cluster   *pgdb.Cluster // the PostgreSQL cluster both pools check
	events    *audit.Log
	store     *nodes.Store
	reg       nodes.Registration
	// registered: the node's record is this incarnation's, as node says
	// it was at registration; shutdown deletes it.
	registered bool
	node       nodes.Node

	etcdState *etcdCheck
	notify    *systemd.Notifier
	hb        *nodes.Heartbeater
	fence     *leader.Fence
	elector   *leader.Elector
	repairer  *recovery.Repairer
	checker   *health.Checker
	master    *health.Master
	// metrics is built after the checker, whose passes it counts
	// (observePass): the checker runs no pass before Run.
	metrics *metrics.Metrics
	srv     *http.Server
	apiLn   net.Listener // ln, capped, then TLS: what srv serves
}

// errStoppedEarly is newDaemon's error when its context ended before the
// start-up completed: a clean exit, not a failure.
var errStoppedEarly = errors.New("stopped before start-up completed")

// newDaemon starts one node up and builds its parts: the API's listener
// first (an address that cannot be bound fails the start before anything
// touches the database or etcd), the pools, etcd, the database (waited
// for, checked, migrated), the node's record, then the heartbeat, the
// elector, the repairer, the checker, the master's duties, the metrics
// and the API server, each constructor checking its configuration. A
// slow dependency is waited for, never crashed on; when ctx ends first it
// returns errStoppedEarly. When it fails, what it opened is closed and
// the record it wrote is deleted (shutdown). level is the logger's level,
// changed by a reload (nil: fixed, and a change of log.level needs a
// restart).
func newDaemon(ctx context.Context, cfg *configs.Config, log *slog.Logger, level *slog.LevelVar) (_ *daemon, err error) {
	// From the start: a SIGHUP (systemctl reload) while the daemon still
	// connects must not end it (Go's default), it is served once it runs.
	d := &daemon{cfg: cfg, level: level, hup: notifyHUP(ctx), incarnation: uuid.NewString(), build: buildInfo()}
	if d.name, err = cfg.NodeName(os.Hostname); err != nil {
		return nil, usageError{err}
	}
	d.log = log.With("node", d.name)
	d.log.InfoContext(ctx, "starting enginehealth", "version", version, "commit", d.build.Commit, "incarnation", d.incarnation,
		"database", cfg.Database.RedactedDSN(), "schema", cfg.Database.Schema, "etcd", cfg.Etcd.RedactedEndpoints())
	for _, w := range cfg.Warnings {
		d.log.WarnContext(ctx, "configuration: "+w.Msg, "key", w.Path, "line", w.Line)
	}
	// A certificate that expires soon is said at once (before a
	// connection it may break is tried), then once a day.
	d.certs = watchCertificates(cfg, certexpiry.Options{})
	d.certLog = d.log.With("component", "certificates")
	d.certs.Check(ctx, d.certLog)
	if d.tokens, err = apiAuth(cfg.API.Operators); err != nil {
		return nil, usageError{err}
	}
	if dir := cfg.Node.StateDirectory; dir != "" {
		// Without its own start time, release-lease could not tell this
		// process from a later one with the same pid: no lease file then.
		if d.self, err = leasefile.Self(); err != nil {
			d.log.WarnContext(ctx, "no lease file: this process's start time cannot be read; a master that crashes is replaced after its lease's TTL",
				"state_directory", dir, slog.Any("err", err))
		} else {
			d.stateDir = dir
		}
	}

	defer func() {
		if err == nil {
			return
		}
		if serr := d.shutdown(ctx, nil); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	if err := d.connect(ctx); err != nil {
		return nil, err
	}
	if err := d.register(ctx); err != nil {
		return nil, err
	}
	if err := d.buildMaster(ctx); err != nil {
		return nil, err
	}
	if err := d.buildAPI(); err != nil {
		return nil, err
	}
	return d, nil
}

// connect binds the API's address, opens the pools, connects to etcd and
// waits for the database (connectDatabase).
func (d *daemon) connect(ctx context.Context) error {
	cfg := d.cfg
	ln, err := net.Listen("tcp", cfg.API.Listen)
	if err != nil {
		return fmt.Errorf("api.listen: %w", err)
	}
	d.ln = ln
	d.advertise = cfg.API.AdvertiseURL(ln.Addr().String())

	// Both pools check each new connection's server: another PostgreSQL
	// cluster behind the address is refused (learnt once migrated).
	d.cluster = pgdb.NewCluster(cfg.Database.Schema, d.log.With("component", "database"))
	pool := cfg.Database.Pool("enginehealth/" + d.name)
	pool.Cluster = d.cluster
	if d.db, err = pgdb.Open(pool); err != nil {
		return err
	}
	// The API's requests get a small pool of their own: a flood of reads
	// waits there (and is refused 503 busy), never for a connection the
	// heartbeat or the master's work needs.
	apiPool := cfg.Database.Pool("enginehealth/" + d.name + "/api")
	apiPool.MaxOpenConns = api.DefaultMaxDBRequests
	apiPool.Cluster = d.cluster
	if d.apiDB, err = pgdb.Open(apiPool); err != nil {
		return err
	}
	// etcd before the schema is migrated: it witnesses which PostgreSQL
	// cluster the fleet uses, so that an empty server of another cluster
	// behind the database's address is refused before anything is
	// written to it (witnessCluster).
	if d.etcd, err = connectEtcd(ctx, cfg, d.log); err != nil {
		return stopped(ctx, d.log, err)
	}
	witness := func(ctx context.Context, live int64) error { return witnessCluster(ctx, d.etcd, cfg, live, d.log) }
	// The configured engine tables must exist as named: a mismatch is a
	// configuration error, reported before the schema is migrated.
	if err := connectDatabase(ctx, cfg, d.db, d.cluster, witness, d.log); err != nil {
		return stopped(ctx, d.log, err)
	}
	d.etcdState = newEtcdCheck(d.etcd, cfg, d.log.With("component", "etcd"))
	return nil
}

// register writes the node's record, retrying until the database takes
// it, and says when the previous run did not shut down cleanly.
func (d *daemon) register(ctx context.Context) error {
	// One event log, shared by every writer of the events table.
	d.events = audit.NewLogged(d.cfg.Database.Schema, d.log.With("component", "audit"))
	var err error
	if d.store, err = nodes.NewStore(nodes.StoreConfig{DB: d.db, Schema: d.cfg.Database.Schema, Events: d.events, Cluster: d.cluster}); err != nil {
		return err
	}
	hostname, _ := os.Hostname()
	d.reg = nodes.Registration{Name: d.name, Incarnation: d.incarnation, Hostname: hostname, Version: version, APIAddress: d.advertise,
		SchemaVersion:     d.build.SchemaVersion,
		RecoverAfterCrash: d.cfg.Node.OnUnexpectedShutdown == nodes.UnexpectedShutdownRecover}
	err = retry(ctx, d.log, "register node", d.cfg.Database.StatementTimeout, func(ctx context.Context) error {
		n, err := d.store.Register(ctx, d.reg)
		if err == nil {
			d.node, d.registered = n, true
		}
		return err
	})
	if err != nil {
		return stopped(ctx, d.log, err)
	}
	switch n := d.node; {
	case n.Status == nodes.StatusUnexpectedShutdown:
		d.log.WarnContext(ctx, "the previous run of this node did not shut down cleanly; it stays out of service until an operator acknowledges it (enginehealth node ack "+d.name+")",
			"previous_incarnation", *n.PreviousIncarnation, "reason", n.StatusReason)
	case n.PreviousIncarnation != nil:
		d.log.WarnContext(ctx, "the previous run of this node did not shut down cleanly; recovering as configured (node.on_unexpected_shutdown: recover)",
			"previous_incarnation", *n.PreviousIncarnation)
	}
	d.log.InfoContext(ctx, "node registered", "status", d.node.Status, "api", d.advertise)
	return nil
}

// buildMaster builds the heartbeat and what the master runs: the fence,
// the elector, the repairer, the checker and the master's duties.
func (d *daemon) buildMaster(ctx context.Context) error {
	cfg, log := d.cfg, d.log
	d.notify = systemd.NewNotifier(log)
	var lastStatus nodes.Status
	var err error
	// A beat may need a new connection: a connect timeout for each host
	// of the DSN, then the statement (a DSN with host=a,b whose first
	// host is frozen after a failover).
	d.hb, err = nodes.NewHeartbeater(nodes.HeartbeatConfig{Store: d.store, Name: d.name, Incarnation: d.incarnation,
		Interval: cfg.Node.HeartbeatInterval, Log: log, Registration: &d.reg, Registered: d.node,
		// A silent server: the API's connections lead there too.
		Reset:   func() { pgdb.Reset(d.db); pgdb.Reset(d.apiDB) },
		Timeout: time.Duration(pgdb.Hosts(cfg.Database.DSN))*cfg.Database.ConnectTimeout + cfg.Node.HeartbeatInterval,
		OnChange: func(status nodes.Status, grade string) {
			if status != lastStatus {
				log.InfoContext(ctx, "node status", "status", status)
				lastStatus = status
			}
			// READY=1 when the node is ready as /readyz says: Ready, and not
			// ERROR with failover.error_not_ready (sent again after a reset).
			rd := readiness(status, grade, cfg.Failover.ErrorNotReady, nil) // just after a beat
			if rd.Ready {
				d.notify.Ready()
			}
			text := "node " + d.name + ": " + string(status)
			if !rd.Ready && status == nodes.StatusReady {
				text += " (not ready: failover grade " + grade + ")"
			}
			d.notify.Status(text)
		}})
	if err != nil {
		return err
	}
	d.fence, err = leader.NewFence(leader.FenceConfig{DB: d.db, Schema: cfg.Database.Schema, Events: d.events,
		Cluster: d.cluster, // no master write commits on another cluster
		Log:     log})
	if err != nil {
		return err
	}
	d.elector, err = leader.New(leader.Config{
		Client:      d.etcd,
		Prefix:      cfg.Etcd.Prefix,
		TTL:         cfg.Etcd.LeaseTTL,
		TrustMargin: cfg.Etcd.TrustMargin,
		Candidate:   leader.Candidate{Name: d.name, Incarnation: d.incarnation, APIAddress: d.advertise},
		// Self-gating: no master write while our own heartbeat has failed
		// for longer than an interval.
		Gate:          d.hb.Gate,
		ResignTimeout: min(cfg.Node.ShutdownTimeout/4, 2*time.Second),
		Log:           log,
		OnLease:       d.recordLease,
	})
	if err != nil {
		return err
	}
	d.repairer, err = recovery.New(recovery.Config{
		DB: d.db, Fence: d.fence, Events: d.events, Schema: cfg.Database.Schema,
		Workflows: cfg.RecoveryWorkflows(), BatchSize: cfg.Recovery.BatchSize, Log: log,
		EventRetries: func(ctx context.Context) (bool, error) { return d.store.FleetKnows(ctx, recovery.EventRetriesSchema) },
	})
	if err != nil {
		return err
	}
	pauses, err := health.NewPauses(health.PausesConfig{DB: d.db, Schema: cfg.Database.Schema, Events: d.events})
	if err != nil {
		return err
	}
	d.checker, err = health.NewChecker(health.CheckConfig{
		Fence: d.fence, Nodes: d.store, Recovery: d.repairer, Events: d.events,
		Interval:                cfg.Health.ParsedSchedule.Period(),
		NotRespondingAfter:      cfg.Health.NotRespondingAfter,
		ForgetAfter:             cfg.Health.ForgetAfter,
		MaxUnresponsiveFraction: cfg.Health.MaxUnresponsiveFraction,
		SweepInterval:           cfg.Health.SweepInterval,
		Grades:                  new(cfg.Failover.Grades()),
		Pauses:                  pauses,
		OnPass:                  d.observePass,
		DatabaseBack: func() time.Time {
			if t := d.cluster.ServerChanged(); t.After(d.hb.Resumed()) {
				return t
			}
			return d.hb.Resumed()
		},
		Log: log,
	})
	if err != nil {
		return err
	}
	d.master, err = health.NewMaster(health.MasterConfig{
		Fence: d.fence, Nodes: d.store, Recovery: d.repairer, Checker: d.checker,
		Schedule: cfg.Health.ParsedSchedule,
		Tick:     cfg.Node.HeartbeatInterval,
		Log:      log,
	})
	return err
}

// recordLease writes the lease the elector was granted into the state
// file (the elector's OnLease), for enginehealth release-lease, which the
// unit runs once this process is gone: it revokes the lease, so that the
// next master takes office without waiting for its TTL. A write that
// fails is logged: the lease then expires after its TTL, as without the
// file.
func (d *daemon) recordLease(id clientv3.LeaseID) {
	if d.stateDir == "" {
		return
	}
	r := leasefile.Record{Lease: leasefile.LeaseID(id), Prefix: d.cfg.Etcd.Prefix, Endpoints: d.etcd.Endpoints(),
		Node: d.name, Incarnation: d.incarnation, Process: d.self, WrittenAt: time.Now()}
	if err := leasefile.Write(d.stateDir, r); err != nil {
		d.log.Warn("could not record the etcd lease in the state directory; if this process crashes, its lease expires after its TTL",
			"path", leasefile.Path(d.stateDir), "lease", r.Lease.String(), slog.Any("err", err))
		return
	}
	d.log.Debug("recorded the etcd lease", "path", leasefile.Path(d.stateDir), "lease", r.Lease.String())
}

// forgetLease removes the lease file this process wrote: on a clean
// shutdown the elector resigned, revoking its lease.
func (d *daemon) forgetLease(ctx context.Context) {
	if d.stateDir == "" {
		return
	}
	if _, err := leasefile.RemoveFor(d.stateDir, d.self); err != nil {
		d.log.WarnContext(ctx, "could not remove the lease file", "path", leasefile.Path(d.stateDir), slog.Any("err", err))
	}
}

// observePass counts a check pass in the metrics (the checker's OnPass).
func (d *daemon) observePass(res health.CheckResult, err error) { d.metrics.ObservePass(res, err) }

// buildAPI builds what serves the API, on its own pool: the reads, the
// metrics, the handler and the server, and the listener it serves.
func (d *daemon) buildAPI() error {
	cfg, log := d.cfg, d.log
	apiStore, err := nodes.NewStore(nodes.StoreConfig{DB: d.apiDB, Schema: cfg.Database.Schema, Events: d.events})
	if err != nil {
		return err
	}
	// Read only: the current term.
	apiFence, err := leader.NewFence(leader.FenceConfig{DB: d.apiDB, Schema: cfg.Database.Schema, Events: d.events, OnTerm: d.elector.ObserveTerm})
	if err != nil {
		return err
	}
	workflows := cfg.RecoveryWorkflows()
	reads, err := recovery.New(recovery.Config{DB: d.apiDB, Fence: apiFence, Events: d.events, Schema: cfg.Database.Schema,
		Workflows: workflows, Log: log})
	if err != nil {
		return err
	}
	apiPauses, err := health.NewPauses(health.PausesConfig{DB: d.apiDB, Schema: cfg.Database.Schema, Events: d.events})
	if err != nil {
		return err
	}
	d.metrics = metrics.New(metrics.Source{
		Paused: func(ctx context.Context) (bool, time.Time, error) {
			p, err := apiPauses.Current(ctx)
			return p.Paused, p.Since, err
		},
		EventsWritten: func(ctx context.Context) (int64, error) { return d.events.LastID(ctx, d.apiDB) },
		Nodes:         apiStore.List, HoldsOpen: reads.HoldsOpen, Period: cfg.Health.ParsedSchedule.Period(), Tasks: metricTasks(workflows),
		Status: d.hb.Status, Grade: d.hb.Grade,
		Master: func() (bool, int64) {
			st := d.master.Status()
			return st.Acting, st.Term
		},
		Passes: func() health.PassStats {
			// Counted from taking office: a success of an earlier office
			// says nothing of this one (the alert on the last success's
			// age would fire at once on a node that led before).
			st := d.master.Status()
			p := st.Passes
			// Counted from when the office may act (it may wait out an
			// earlier master's window after taking office).
			if from := later(st.Since, st.ActingFrom); st.InOffice && p.LastSuccess.Before(from) {
				p.LastSuccess = from
			}
			return p
		},
		Disrupted:     d.checker.Disrupted,
		Certificates:  d.certs.Expiries,
		EtcdReachable: func() bool { return d.etcdState.State().Reachable },
		Build:         buildLabels(d.build),
	})

	// Who may use the API: the operators' tokens, and with client CAs a
	// verified client certificate (role read, its CN the name).
	var auth api.Authenticator
	if d.tokens != nil {
		auth = d.tokens
	}
	if cfg.API.ClientCAs != nil {
		auth = api.Either(auth, api.ClientCerts{})
	}
	self := apitype.Leader{Name: d.name, Incarnation: d.incarnation, APIAddress: d.advertise}
	d.srv = api.NewServer(
		api.NewHandler(api.Config{
			Self:  d.name,
			Nodes: apiStore,
			Acker: apiStore,
			Ready: func() apitype.Ready {
				return readiness(d.hb.Status(), d.hb.Grade(), cfg.Failover.ErrorNotReady, d.hb.Live())
			},
			Local: func() (apitype.Leader, error) { return actingSelf(self, d.master.Status()) },
			Candidates: func(ctx context.Context) ([]leader.Candidate, error) {
				return leader.Candidates(ctx, d.etcd, apiFence, cfg.Etcd.Prefix, apiStore.AddressOf)
			},
			Auth:       auth,
			AuthReads:  cfg.API.AuthReads,
			SessionTTL: cfg.API.SessionTTL,
			Forward:    peerClient(cfg.API.PeerTLS, cfg.API.PeerCAs),
			Ops: &health.Ops{Elector: d.elector, Checker: d.checker, Recovery: d.repairer, Reads: reads,
				Pauses: apiPauses},
			Metrics:  d.metrics.Handler(),
			Requests: d.metrics.ObserveRequest,
			Events: func(ctx context.Context, p audit.ListParams) ([]audit.Event, error) {
				// An instance of a workflow as the events name it
				// ("007" is 7), as the instance view reads it.
				if p.Workflow != "" && p.Instance != "" {
					c, err := reads.CanonicalInstance(ctx, p.Workflow, p.Instance)
					if err != nil {
						return nil, err
					}
					p.Instance = c
				}
				return d.events.List(ctx, d.apiDB, p)
			},
			LastEventID: func(ctx context.Context) (int64, error) { return d.events.LastID(ctx, d.apiDB) },
			Changes: func(ctx context.Context, since time.Time, limit int) ([]audit.Event, error) {
				return d.events.Changes(ctx, d.apiDB, since, limit)
			},
			PerMinute: func(ctx context.Context, since time.Time) ([]audit.MinuteCount, error) {
				return d.events.PerMinute(ctx, d.apiDB, since)
			},
			Live: []api.Check{
				{Name: "heartbeat", Check: d.hb.Live},
				{Name: "master", Check: d.master.Stuck},
			},
			MaxDBRequests: api.DefaultMaxDBRequests,
			Certificates:  d.certs.Expiries,
			Etcd:          d.etcdState.State,
			Build:         &d.build,
			// Nodes present their certificates when they forward (PeerTLS).
			VerifyForwarders: cfg.API.ClientCAs != nil,
			Log:              log,
		}),
		log, api.ServerOptions{})
	// Capped first, then TLS: a connection in its handshake counts
	// against the cap and is closed to make room like a slow header, and
	// the handshake has the read timeout.
	d.apiLn = api.NewListener(d.ln, log, api.ServerOptions{})
	if cfg.API.ServerTLS != nil {
		d.apiLn = tls.NewListener(d.apiLn, cfg.API.ServerTLS)
	}
	return nil
}

// Run runs the daemon's loops until ctx ends (SIGTERM, SIGINT) or one of
// them fails, then shuts the daemon down (shutdown) and returns why its
// loops ended (nil: told to stop). Call it once, on a daemon from
// newDaemon: it owns what that opened.
func (d *daemon) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	// Shutdown is bounded: every step has a share of node.shutdown_timeout,
	// and the process exits if they overrun it, counted from when the
	// loops are told to stop: a signal (ctx), or one of them failing
	// (gctx; the heartbeat's record taken by another process, say).
	defer hardStop(gctx, d.log, d.cfg.Node.ShutdownTimeout)()
	g.Go(func() error { return d.hb.Run(gctx) })
	reload := d.reloader(gctx)
	g.Go(func() error { return reload.Run(gctx) })
	g.Go(func() error { return d.certs.Run(gctx, d.certLog) })
	g.Go(func() error { return d.etcdState.Run(gctx) })
	if *d.cfg.Etcd.AutoSyncInterval > 0 {
		members := newEtcdSync(d.etcd, d.cfg.Etcd, d.log.With("component", "etcd"))
		g.Go(func() error { return members.Run(gctx) })
	}
	g.Go(func() error {
		// Fed while the daemon's own loops run and the master is not
		// stuck; a database or etcd outage is waited out, not restarted.
		return d.notify.Watchdog(gctx, func() error {
			return errors.Join(d.hb.LoopAlive(), d.master.Stuck())
		})
	})
	g.Go(func() error { return d.campaign(gctx) })
	g.Go(func() error {
		if err := d.srv.Serve(d.apiLn); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("api: %w", err)
		}
		return nil
	})
	<-gctx.Done()
	return d.shutdown(ctx, g)
}

// reloader applies what a SIGHUP (systemctl reload) or a changed file
// changes while the daemon runs, and logs the rest as needing a restart.
func (d *daemon) reloader(ctx context.Context) *reloader {
	return newReloader(d.cfg, d.log, DefaultReloadPoll, d.hup, reloadParts(d.tokens, d.cfg, d.level, func() {
		// New etcd TLS material: connect again now, not after gRPC's
		// backoff (the ERROR it said while it waited was stale).
		d.etcd.ActiveConnection().ResetConnectBackoff()
		d.etcdState.CheckSoon()
		// The connections open go on with the old material: try the new
		// one on every member now, so that a file that will not work is
		// said at the reload, not at the next reconnection (hours later).
		go d.etcdState.TryMaterial(ctx)
	})...)
}

// campaign runs the election, with the master's duties as the leader
// function, until ctx ends. A node in Unexpected shutdown runs no
// recovery and is not a candidate for master until an operator
// acknowledges it: at start, and whenever a beat finds it there again
// (its ack was lost with the database in an asynchronous failover), when
// it leaves the election, and the office if it holds it.
func (d *daemon) campaign(ctx context.Context) error {
	unacked := func(s nodes.Status) bool { return s == nodes.StatusUnexpectedShutdown }
	for {
		if unacked(d.hb.Status()) || d.hb.Status() == "" && unacked(d.node.Status) {
			d.log.WarnContext(ctx, "not campaigning for master until this node is acknowledged (enginehealth node ack "+d.name+")")
		}
		if _, err := d.hb.WaitFor(ctx, func(s nodes.Status) bool { return !unacked(s) }); err != nil {
			return nil
		}
		cctx, leave := context.WithCancel(ctx)
		go func() {
			if _, err := d.hb.WaitFor(cctx, unacked); err == nil {
				d.log.WarnContext(ctx, "this node is in "+string(nodes.StatusUnexpectedShutdown)+" again (its acknowledgment was lost with the database?): leaving the election until an operator acknowledges it")
				leave()
			}
		}()
		err := d.elector.Run(cctx, d.master.Lead)
		leave()
		if err != nil || ctx.Err() != nil {
			return err
		}
	}
}

// shutdown stops the daemon and releases what newDaemon opened, in this
// order, each step bounded by its share of node.shutdown_timeout:
//
//  1. systemd is told STOPPING=1;
//  2. the API server takes no new request and lets those running finish
//     (a quarter), then closes them;
//  3. the loops end (loops.Wait): the election resigns (its lease
//     revoked, so that the next master need not wait out a TTL), the
//     master's duties leave office, the heartbeat stops; the lease file
//     (node.state_dir) is removed: nothing is left for release-lease;
//  4. the node's record is deleted (a half), once no beat can write it
//     again: kept when it awaits an operator's ack, left alone when the
//     loops ended because another process took it (ErrNotRegistered);
//  5. the etcd client, the pools and the listener are closed.
//
// loops is nil when Run never started them (newDaemon failed part way):
// only 4 and 5 then, for what was done. It returns why the loops ended,
// joined with a failure to delete the record.
func (d *daemon) shutdown(ctx context.Context, loops *errgroup.Group) error {
	budget := d.cfg.Node.ShutdownTimeout
	var runErr error
	reason := "start-up failed"
	if loops != nil {
		d.notify.Stopping()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget/4)
		if err := d.srv.Shutdown(sctx); err != nil {
			// Requests still running (a long forwarded run) are cut.
			d.log.WarnContext(ctx, "API requests still running at shutdown were closed", slog.Any("err", err))
			_ = d.srv.Close()
		}
		cancel()
		runErr = loops.Wait()
		d.forgetLease(ctx) // the election resigned with the loops
		if runErr != nil {
			d.log.ErrorContext(ctx, "stopping on error", slog.Any("err", runErr))
		} else {
			d.log.InfoContext(ctx, "shutting down")
		}
		reason = "clean shutdown"
	}
	if d.registered && !errors.Is(runErr, nodes.ErrNotRegistered) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget/2)
		switch err := d.store.Deregister(sctx, d.name, d.incarnation, reason); {
		case errors.Is(err, nodes.ErrAwaitingAck):
			d.log.WarnContext(ctx, "node record kept: it awaits an operator ack", "status", nodes.StatusUnexpectedShutdown, "hint", "enginehealth node ack "+d.name)
		case err != nil:
			d.log.ErrorContext(ctx, "could not delete the node record; the next start will report an unexpected shutdown", slog.Any("err", err))
			runErr = errors.Join(runErr, err)
		}
		cancel()
	}
	d.close()
	if loops != nil && runErr == nil {
		d.log.InfoContext(ctx, "stopped")
	}
	return runErr
}

// close closes the etcd client, the pools and the listener, those that
// were opened. Closing them after use has nothing to act on; the server
// closed the listener already when it served.
func (d *daemon) close() {
	if d.etcd != nil {
		_ = d.etcd.Close()
	}
	if d.apiDB != nil {
		_ = d.apiDB.Close()
	}
	if d.db != nil {
		_ = d.db.Close()
	}
	if d.ln != nil {
		_ = d.ln.Close()
	}
}
