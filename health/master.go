// Package health holds the master's duties: taking office, finishing runs
// a previous master left unfinished, start-up recovery on a cold cluster,
// bringing nodes to Ready, and the periodic CheckEngineHealth task.
//
// Master.Lead is the leader function given to leader.Elector.Run: it runs
// under the leader-scoped context and returns when the office is lost.
//
// Start-up recovery repairs non-claimable workflows, where nothing tells a
// live engine's instance from an interrupted one. It therefore runs only on
// a cold cluster: no node Ready and active within not_responding_after
// (engines run only on Ready nodes), the master itself included (a master
// that is Ready already, re-elected or taking over, has its engine
// running). After it (or its
// skip), every node in Recovering becomes Ready, and later joiners are
// promoted on each tick.
//
// CheckEngineHealth (Checker.RunOnce) runs on a robfig/cron schedule with
// SkipIfStillRunning, and on demand (Ops.Check): nodes, then claims, then
// interrupted instances; see check.go.
package health

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/enginehealth/enginehealth/internal/infra/backoff"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// MasterConfig wires the master's duties.
type MasterConfig struct {
	Fence    *leader.Fence
	Nodes    *nodes.Store
	Recovery *recovery.Repairer
	Checker  *Checker
	// Schedule of CheckEngineHealth (ParseSchedule); the zero Schedule: no
	// periodic check.
	Schedule Schedule
	// Tick is how often the master promotes newly registered nodes;
	// default nodes.DefaultHeartbeatInterval.
	Tick time.Duration
	// StuckAfter is how long an acting master's check passes may go without
	// success before it is stuck (Stuck returns an error, /healthz fails);
	// default Schedule.StuckAfter(); off without a periodic check.
	StuckAfter time.Duration
	Log        *slog.Logger
}

// Master runs the duties of the master node.
type Master struct {
	cfg MasterConfig
	log *slog.Logger
	now func() time.Time

	mu     sync.Mutex
	office *leader.Office // in office (TakeOffice done), or nil
	since  time.Time      // when it took office
	// suspensions of the office (end zero while one lasts): the time
	// without a successful pass counts only while the master can act.
	suspensions []interval
	// acted reports whether the office has acted (it may wait first:
	// ActingFrom).
	acted bool
}

type interval struct{ start, end time.Time }

// NewMaster returns the master's duty runner. It fails without the fence,
// the node store or the repairer, or with a negative Tick or StuckAfter.
func NewMaster(cfg MasterConfig) (*Master, error) {
	switch {
	case cfg.Fence == nil || cfg.Nodes == nil || cfg.Recovery == nil:
		return nil, errors.New("health: the master's duties need the fence, the node store and the repairer (MasterConfig.Fence, Nodes, Recovery)")
	case cfg.Tick < 0 || cfg.StuckAfter < 0:
		return nil, fmt.Errorf("health: tick %s and stuck-after %s may not be negative", cfg.Tick, cfg.StuckAfter)
	}
	cfg.Tick = cmp.Or(cfg.Tick, nodes.DefaultHeartbeatInterval)
	if cfg.Schedule.Period() > 0 {
		cfg.StuckAfter = cmp.Or(cfg.StuckAfter, cfg.Schedule.StuckAfter())
	}
	cfg.Log = cmp.Or(cfg.Log, slog.New(slog.DiscardHandler))
	return &Master{cfg: cfg, log: cfg.Log.With("component", "master"), now: time.Now}, nil
}

// Status is what the master knows of its own office.
type Status struct {
	// InOffice reports whether this node took office (it may be suspended:
	// see Acting).
	InOffice bool
	Term     int64
	Acting   bool
	Reason   string
	// Since is when this node took office.
	Since time.Time
	// TrustedUntil is the end of the current trust window.
	TrustedUntil time.Time
	// ActingFrom is when the office may start to act (it waits out earlier
	// masters' windows; zero: at once).
	ActingFrom time.Time
	Passes     PassStats
	// Stuck explains why the master counts as stuck; empty if it is not.
	Stuck string
}

// Status returns the office state. It never waits on etcd, the database or
// a running pass.
func (m *Master) Status() Status {
	m.mu.Lock()
	o, since := m.office, m.since
	m.mu.Unlock()
	st := Status{}
	if m.cfg.Checker != nil {
		st.Passes = m.cfg.Checker.Stats()
	}
	if o == nil {
		st.Reason = "not in office"
		return st
	}
	st.InOffice, st.Term, st.Since, st.TrustedUntil, st.ActingFrom = true, o.Term, since, o.TrustedUntil(), o.ActingFrom()
	if err := o.Trusted(); err != nil {
		select {
		case <-o.Done():
			st.Reason = fmt.Sprintf("term %d ended: %v", o.Term, o.Err())
		default:
			if errors.Is(err, leader.ErrNotYet) {
				st.Reason = fmt.Sprintf("in office since %s (term %d), acting from %s: an earlier master may still trust its own window",
					since.UTC().Format(time.RFC3339Nano), o.Term, st.ActingFrom.UTC().Format(time.RFC3339Nano))
			} else {
				st.Reason = "suspended: " + err.Error()
			}
		}
		return st
	}
	st.Acting = true
	if err := m.Stuck(); err != nil {
		st.Stuck = err.Error()
	}
	return st
}

// Stuck returns an error when this node acts as master but has acted
// for StuckAfter without a successful check pass (since it took office or
// since its last success, whichever is later; time suspended does not
// count, and a short suspension does not start the count again): a stuck
// master, to be replaced.
func (m *Master) Stuck() error {
	if m.cfg.StuckAfter <= 0 || m.cfg.Checker == nil {
		return nil
	}
	ps := m.cfg.Checker.Stats()
	now := m.now()
	m.mu.Lock()
	o := m.office
	from := m.since
	if ps.LastSuccess.After(from) {
		from = ps.LastSuccess
	}
	acted := now.Sub(from)
	kept := m.suspensions[:0]
	for _, iv := range m.suspensions {
		end := iv.end
		if end.IsZero() {
			end = now
		}
		if end.Before(from) {
			continue // before the window: forgotten
		}
		kept = append(kept, iv)
		acted -= end.Sub(later(iv.start, from))
	}
	m.suspensions = kept
	m.mu.Unlock()
	if o == nil || o.Trusted() != nil {
		return nil
	}
	if acted > m.cfg.StuckAfter {
		msg := fmt.Sprintf("acting for %s without a successful check pass (limit %s), %d consecutive failures",
			acted.Round(time.Second), m.cfg.StuckAfter, ps.ConsecutiveFailures)
		if ps.LastError != "" {
			msg += "; last error: " + ps.LastError
		}
		return errors.New("no check pass succeeded: " + msg)
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (m *Master) setOffice(o *leader.Office) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.office = o
	m.suspensions = nil
	m.acted = false
	if o != nil {
		m.since = m.now()
	}
}

// trusted checks the office at a tick and logs when acting is suspended
// and resumed.
func (m *Master) trusted(ctx context.Context, o *leader.Office, log *slog.Logger, suspended *bool) bool {
	err := o.Trusted()
	switch {
	case err != nil && !*suspended:
		*suspended = true
		m.mu.Lock()
		m.suspensions = append(m.suspensions, interval{start: m.now()})
		m.mu.Unlock()
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, leader.ErrNotYet):
			log.InfoContext(ctx, "in office, not acting yet: an earlier master may still trust its window", slog.Any("err", err))
		default:
			log.WarnContext(ctx, "master office suspended: not acting until trust returns", slog.Any("err", err))
		}
	case err == nil && *suspended:
		*suspended = false
		m.mu.Lock()
		if n := len(m.suspensions); n > 0 && m.suspensions[n-1].end.IsZero() {
			m.suspensions[n-1].end = m.now()
		}
		acted := m.acted
		m.mu.Unlock()
		if acted {
			log.InfoContext(ctx, "master office trusted again: acting")
		} else {
			log.InfoContext(ctx, "master office acting")
		}
	}
	if err == nil {
		m.mu.Lock()
		m.acted = true
		m.mu.Unlock()
	}
	return err == nil
}

// Lead takes office, finishes the runs a previous master left unfinished,
// runs start-up recovery when the cluster is cold, promotes Recovering
// nodes to Ready, and schedules CheckEngineHealth, until ctx is done. It
// returns an error only when the office cannot be taken (the elector then
// resigns and campaigns again).
func (m *Master) Lead(ctx context.Context, o *leader.Office) error {
	log := m.log.With("term", o.Term)
	bo := backoff.Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second}
	for {
		err := m.cfg.Fence.TakeOffice(ctx, o, func(tx *leader.Tx) error {
			return m.cfg.Nodes.SetMaster(ctx, tx, o.Candidate.Name, o.Candidate.Incarnation)
		})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, leader.ErrDeposed) || bo.Attempts() >= 5 {
			return err
		}
		log.WarnContext(ctx, "take office failed, retrying", slog.Any("err", err))
		if backoff.Sleep(ctx, bo.Next()) != nil {
			return nil
		}
	}
	if from := o.ActingFrom(); from.After(m.now()) {
		log.InfoContext(ctx, "took office; acting once no earlier master can still trust its own window",
			"acting_from", from.Format(time.RFC3339Nano), "wait", from.Sub(m.now()).Round(time.Millisecond))
	} else {
		log.InfoContext(ctx, "took office")
	}
	m.setOffice(o)
	defer m.setOffice(nil)
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		clearFlag := func(tx *pgdb.Tx) (bool, error) {
			return m.cfg.Nodes.ClearMaster(sctx, tx, o.Candidate.Name, o.Candidate.Incarnation)
		}
		if err := m.cfg.Fence.StepDown(sctx, o, "left office: "+causeOf(ctx), clearFlag); err != nil {
			log.DebugContext(ctx, "clear master flag", slog.Any("err", err))
		}
	}()
	if m.cfg.Checker != nil {
		m.cfg.Checker.begin()
	}

	// Runs a previous master left unfinished are resumed in the
	// background: however long that takes (a lock wait, a slow table), it
	// never stands between a joining node and Ready. One resumption at a
	// time; one that did not get through is tried again on a later tick.
	resumed := false
	resuming := make(chan bool, 1)
	inFlight := false
	defer func() {
		if inFlight {
			<-resuming
		}
	}()
	startupDone, pauseLogged := false, false
	var stopCron func()
	defer func() {
		if stopCron != nil {
			stopCron()
		}
	}()
	t := time.NewTicker(m.cfg.Tick)
	defer t.Stop()
	suspended := false
	for {
		if inFlight {
			select {
			case resumed = <-resuming:
				inFlight = false
			default:
			}
		}
		if !m.trusted(ctx, o, log, &suspended) {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
			continue
		}
		if !resumed && !inFlight {
			inFlight = true
			go func() { resuming <- m.resume(ctx, o, log) }()
		}
		paused := false
		if !startupDone {
			startupDone, paused = m.startup(ctx, o, log, &pauseLogged)
		}
		if startupDone {
			m.promote(ctx, o, log)
		}
		// While start-up recovery waits for a resume, the check still
		// marks nodes (and repairs nothing: paused).
		if (startupDone || paused) && stopCron == nil && m.cfg.Checker != nil && !m.cfg.Schedule.IsZero() {
			stopCron = m.schedule(ctx, o, log)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// resume finishes the runs of earlier terms still marked running: each is
// closed as interrupted and its work done again by a new run that points
// at it. It reports whether every one was handled.
func (m *Master) resume(ctx context.Context, o *leader.Office, log *slog.Logger) bool {
	runs, err := m.cfg.Recovery.Unfinished(ctx, o)
	if err != nil {
		log.WarnContext(ctx, "list unfinished runs", slog.Any("err", err))
		return false
	}
	for _, old := range runs {
		id := old.ID
		var note string
		switch old.Trigger {
		case recovery.TriggerStartup:
			// This master decides again whether start-up recovery may run.
			note = "superseded by the start-up recovery decision of term " + fmt.Sprint(o.Term)
		default:
			var run int64
			var err error
			if old.Kind == recovery.KindCheck && m.cfg.Checker != nil {
				var res CheckResult
				res, err = m.cfg.Checker.RunOnce(ctx, o, old.Trigger, &id)
				run = res.RunID
			} else {
				sc, serr := old.ScopeOf()
				if serr != nil {
					sc = recovery.Scope{}
				}
				var res recovery.Result
				res, err = m.cfg.Recovery.Recover(ctx, o, old.Trigger, sc, &id)
				run = res.RunID
			}
			switch {
			case err == nil:
				note = fmt.Sprintf("resumed by run %d", run)
			case run == 0 || ctx.Err() != nil || errors.Is(err, leader.ErrNotTrusted):
				// Not even begun, or the office cannot act: try again.
				log.WarnContext(ctx, "resume interrupted run", "run", old.ID, slog.Any("err", err))
				return false
			default:
				// The resuming run began and failed (its row says why). Its
				// work is the periodic check's work too, so the old run is
				// closed and the master goes on with its other duties; a
				// failed resumption must not hold them up, nor be retried
				// every tick.
				log.WarnContext(ctx, "resuming an interrupted run failed; the periodic check covers its work",
					"run", old.ID, "resumed_by", run, slog.Any("err", err))
				note = fmt.Sprintf("resumption by run %d failed (%s); the periodic check covers its work", run, pgdb.Summary(err))
			}
		}
		if err := m.cfg.Recovery.Interrupt(ctx, o, old, note); err != nil {
			log.WarnContext(ctx, "close interrupted run", "run", old.ID, slog.Any("err", err))
			return false
		}
		log.InfoContext(ctx, "closed a run cut short by a previous master", "run", old.ID, "run_term", old.Term, "note", note)
	}
	return true
}

// schedule starts the periodic CheckEngineHealth and returns its stop
// function, which waits for a running pass.
func (m *Master) schedule(ctx context.Context, o *leader.Office, log *slog.Logger) func() {
	cl := cronLogger{log: log}
	c := cron.New(
		cron.WithChain(cron.Recover(cl), cron.SkipIfStillRunning(cl)),
		cron.WithLogger(cl),
	)
	c.Schedule(m.cfg.Schedule.cron, cron.FuncJob(func() {
		if o.Trusted() != nil {
			return // suspended: the tick loop logs it
		}
		_, err := m.cfg.Checker.RunOnce(ctx, o, recovery.TriggerPeriodic, nil)
		switch {
		case err == nil, ctx.Err() != nil:
		case errors.Is(err, leader.ErrNotTrusted):
			log.DebugContext(ctx, "check pass stopped: office not trusted", slog.Any("err", err))
		default:
			log.WarnContext(ctx, "check pass failed", "consecutive_failures", m.cfg.Checker.Stats().ConsecutiveFailures, slog.Any("err", err))
		}
	}))
	c.Start()
	return func() { <-c.Stop().Done() }
}

// cronLogger adapts slog to cron's logger: its info lines are debug here.
type cronLogger struct{ log *slog.Logger }

func (l cronLogger) Info(msg string, kv ...any) { l.log.Debug("cron: "+msg, kv...) }

func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error("cron: "+msg, append(kv, slog.Any("err", err))...)
}

// startup runs start-up recovery if the cluster is cold and reports whether
// it is done (run or rightly skipped), or waits because the cluster is
// paused (nodes stay Recovering until a resume; logged once).
func (m *Master) startup(ctx context.Context, o *leader.Office, log *slog.Logger, pauseLogged *bool) (done, paused bool) {
	live, err := m.cfg.Nodes.ActiveReady(ctx, m.notRespondingAfter())
	if err != nil {
		log.WarnContext(ctx, "start-up recovery: cannot tell whether the cluster is cold", slog.Any("err", err))
		return false, false
	}
	if len(live) > 0 {
		log.InfoContext(ctx, "start-up recovery skipped: warm cluster, engines may be running",
			"ready_nodes", strings.Join(live, ","))
		return true, false
	}
	if m.cfg.Checker != nil {
		var p Pause
		err := m.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
			var err error
			p, err = m.cfg.Checker.cfg.Pauses.Read(ctx, tx)
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				log.WarnContext(ctx, "start-up recovery: cannot read the pause switch", slog.Any("err", err))
			}
			return false, false
		}
		if p.Paused {
			if !*pauseLogged {
				log.WarnContext(ctx, "start-up recovery waits for a resume: the cluster is paused; nodes stay Recovering",
					"paused_by", p.Actor, "reason", p.Reason)
				*pauseLogged = true
			}
			return false, true
		}
	}
	res, err := m.cfg.Recovery.Startup(ctx, o, nil)
	if err != nil {
		switch {
		case ctx.Err() != nil:
		case pgdb.Unavailable(err):
			// A database failing over or restarting: its state, not a fault.
			log.WarnContext(ctx, "start-up recovery failed: database unavailable; retrying next tick", slog.Any("err", err))
		default:
			log.ErrorContext(ctx, "start-up recovery failed; retrying next tick", slog.Any("err", err))
		}
		return false, false
	}
	log.InfoContext(ctx, "start-up recovery done", "run", res.RunID, "repaired", res.Done())
	return true, false
}

func (m *Master) promote(ctx context.Context, o *leader.Office, log *slog.Logger) {
	var names []string
	err := m.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
		var err error
		names, err = m.cfg.Nodes.PromoteRecovering(ctx, tx, o.Candidate.Name, o.Term, "recovery done by master")
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			log.WarnContext(ctx, "promote recovering nodes", slog.Any("err", err))
		}
		return
	}
	if len(names) > 0 {
		log.InfoContext(ctx, "nodes ready", "nodes", strings.Join(names, ","))
	}
}

func causeOf(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil {
		return c.Error()
	}
	return "shutdown"
}

// notRespondingAfter returns the check's setting: a node active within it
// counts as live.
func (m *Master) notRespondingAfter() time.Duration {
	if m.cfg.Checker == nil {
		return DefaultNotRespondingAfter
	}
	return m.cfg.Checker.cfg.NotRespondingAfter
}
