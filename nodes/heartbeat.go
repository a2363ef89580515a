package nodes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
)

// Heartbeat defaults and windows. A node judges its own heartbeat on its
// local clock, in heartbeat intervals.
const (
	// DefaultHeartbeatInterval between two beats.
	DefaultHeartbeatInterval = 5 * time.Second
	// GateBeats bounds the master's writes: it writes only while its own
	// last successful beat is at most this many intervals old (Gate).
	GateBeats = 2
	// LiveBeats bounds liveness: a node is unhealthy (Live, LoopAlive: /healthz, the
	// systemd watchdog) when its last successful beat, or its loop's last
	// attempt, is older than this many intervals. The master marks other
	// nodes Not responding no sooner than that.
	LiveBeats = 3
)

// Values of on_unexpected_shutdown: what a restart does when the previous
// run did not shut down cleanly (Registration.RecoverAfterCrash).
const (
	UnexpectedShutdownAck       = "ack"
	UnexpectedShutdownRecover   = "recover"
	DefaultOnUnexpectedShutdown = UnexpectedShutdownAck
)

// Heartbeater keeps this node's last_active fresh.
type Heartbeater struct {
	store       *Store
	name        string
	incarnation string
	interval    time.Duration
	timeout     time.Duration // of one beat
	log         *slog.Logger
	reg         *Registration
	registered  Node
	reset       func() // closes the connections to a silent server
	// inflight counts beats whose statement has not returned yet (one that
	// gave up waits for its connection to be closed).
	inflight atomic.Int32

	// now is the local clock, used only to tell how long ago the last
	// heartbeat succeeded (never written to the database).
	now func() time.Time

	// onChange, when set, is called after a beat that saw a new status
	// or failover grade (HeartbeatConfig.OnChange).
	onChange func(status Status, grade string)

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced when status changes
	lastTry  time.Time     // local time of the last attempt
	lastOK   time.Time     // local time of the last success
	lastDB   time.Time     // last_active as the database set it
	status   Status
	grade    string
	failures int
	resumed  time.Time // local time of the first success after failures
	lastErr  error     // of the last failed beat
}

// HeartbeatConfig of a Heartbeater.
type HeartbeatConfig struct {
	Store *Store
	// Name and Incarnation of this process's record.
	Name, Incarnation string
	// Interval between two beats; default DefaultHeartbeatInterval.
	Interval time.Duration
	// Timeout of one beat; default (and at least) Interval. It should
	// cover the making of a connection (the connect timeout, for each
	// host of a DSN's host list): the first beat after a failover needs
	// a new one.
	Timeout time.Duration
	// Registration and Registered (what Store.Register returned), when
	// set, let a beat that finds the record lost by the database restore
	// it (Store.Restore) instead of ending Run; a record a later process
	// took still ends it.
	Registration *Registration
	Registered   Node
	// Reset, when set, is called when a beat times out, in place of
	// closing the connections of the store's pool: it closes those of
	// every pool of the process that leads to the silent server (the
	// API's too, whose reads would wait for it as long).
	Reset func()
	// OnChange, when set, is called (from the heartbeat loop) each time a
	// beat sees the record in a different status, or the node with a
	// different failover grade, than the beat before.
	OnChange func(status Status, grade string)
	// Log is where the heartbeat reports failures and changes; none by
	// default.
	Log *slog.Logger
}

// NewHeartbeater returns a heartbeater for this incarnation's record. It
// fails without a store, a name or an incarnation, or with a negative
// interval or timeout.
func NewHeartbeater(cfg HeartbeatConfig) (*Heartbeater, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("nodes: a heartbeater needs a store (HeartbeatConfig.Store)")
	case cfg.Name == "" || cfg.Incarnation == "":
		return nil, fmt.Errorf("nodes: a heartbeater needs its record's name and incarnation, got %q and %q", cfg.Name, cfg.Incarnation)
	case cfg.Interval < 0 || cfg.Timeout < 0:
		return nil, fmt.Errorf("nodes: heartbeat interval %s and timeout %s may not be negative", cfg.Interval, cfg.Timeout)
	}
	interval := cmp.Or(cfg.Interval, DefaultHeartbeatInterval)
	log := cmp.Or(cfg.Log, slog.New(slog.DiscardHandler))
	return &Heartbeater{
		store: cfg.Store, name: cfg.Name, incarnation: cfg.Incarnation, interval: interval, timeout: max(cfg.Timeout, interval),
		reg: cfg.Registration, registered: cfg.Registered, reset: cfg.Reset, onChange: cfg.OnChange,
		log: log.With("component", "heartbeat"), now: time.Now, changed: make(chan struct{}),
	}, nil
}

// Run beats at once and then every interval until ctx is done (returning
// nil) or the record is lost (returning ErrNotRegistered: another process
// took the name; this process must not go on as if it were registered).
// A record the database lost (restore) is written again. A failed beat is
// logged and retried at the next tick.
func (h *Heartbeater) Run(ctx context.Context) error {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		if err := h.Beat(ctx); errors.Is(err, ErrNotRegistered) {
			if err := h.restore(ctx); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Beat sets last_active once, bounded by the beat's timeout: it returns
// then even when the driver goes on waiting for a server that stopped
// answering (a frozen primary), and it closes the pool's connections,
// which lead to that server, so that what waits on them fails now and
// the next beat dials anew (an address a failover moved, the next host
// of a host list). A one-row UPDATE that took longer than a connect
// timeout and an interval found no server worth waiting for.
func (h *Heartbeater) Beat(ctx context.Context) error {
	bctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	h.inflight.Add(1)
	b, err := pgdb.Await(bctx, func(ctx context.Context) (Beat, error) {
		defer h.inflight.Add(-1)
		return h.store.Heartbeat(ctx, h.name, h.incarnation)
	})
	if err != nil && bctx.Err() != nil && ctx.Err() == nil {
		if h.reset != nil {
			h.reset()
		} else {
			h.store.reset()
		}
	}
	h.mu.Lock()
	h.lastTry = h.now()
	changed := err == nil && b.Status != h.status
	regraded := err == nil && b.Grade != h.grade
	defer func() {
		h.mu.Unlock()
		if (changed || regraded) && h.onChange != nil {
			h.onChange(b.Status, b.Grade)
		}
	}()
	if err != nil {
		if ctx.Err() != nil {
			return nil // shutting down
		}
		h.failures++
		h.lastErr = err
		h.log.WarnContext(ctx, "heartbeat failed", "consecutive_failures", h.failures, slog.Any("err", err))
		return err
	}
	if h.failures > 0 {
		h.log.InfoContext(ctx, "heartbeat recovered", "after_failures", h.failures)
		h.resumed = h.now()
	}
	h.failures = 0
	h.lastOK = h.now()
	h.lastDB = b.LastActive
	h.status = b.Status
	if b.Grade != h.grade {
		if h.grade != "" {
			h.log.InfoContext(ctx, "failover grade changed", "from", h.grade, "to", b.Grade)
		}
		h.grade = b.Grade
	}
	if changed {
		close(h.changed)
		h.changed = make(chan struct{})
	}
	return nil
}

// restore writes the record again when the database lost it, and returns
// ErrNotRegistered when it cannot: no registration to restore, or a later
// process's record. Another failure (the database unavailable) is logged
// and the next beat tries again.
func (h *Heartbeater) restore(ctx context.Context) error {
	if h.reg == nil {
		return fmt.Errorf("heartbeat %s: %w", h.name, ErrNotRegistered)
	}
	h.mu.Lock()
	status := cmp.Or(h.status, h.registered.Status)
	h.mu.Unlock()
	bctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	n, err := pgdb.Await(bctx, func(ctx context.Context) (Node, error) {
		return h.store.Restore(ctx, *h.reg, h.registered, status)
	})
	switch {
	case errors.Is(err, ErrNotRegistered):
		return err
	case err != nil:
		if ctx.Err() == nil {
			h.log.WarnContext(ctx, "could not restore the registration the database lost; trying again at the next beat", slog.Any("err", err))
		}
		return nil
	}
	h.log.WarnContext(ctx, "the database had lost this node's registration (a failover to a replica that had not received it, or the master forgot the node); registered again",
		"status", n.Status)
	_ = h.Beat(ctx) // its status now; a failure is the next tick's
	return nil
}

// WaitFor waits until a successful beat saw a status for which ok returns
// true, and returns that status, or ctx's error.
func (h *Heartbeater) WaitFor(ctx context.Context, ok func(status Status) bool) (Status, error) {
	for {
		h.mu.Lock()
		status, ch := h.status, h.changed
		h.mu.Unlock()
		if status != "" && ok(status) {
			return status, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-ch:
		}
	}
}

// Alive returns nil when the heartbeat loop made an attempt (successful or
// not) within limit: the loop is alive, whatever the database does.
func (h *Heartbeater) Alive(limit time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lastTry.IsZero() {
		return errors.New("no heartbeat attempted yet")
	}
	if age := h.now().Sub(h.lastTry); age > limit {
		return fmt.Errorf("heartbeat loop stalled: last attempt %s ago (limit %s)", age.Round(time.Millisecond), limit)
	}
	return nil
}

// Status returns the record's status as the last successful beat saw it.
func (h *Heartbeater) Status() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.status
}

// Grade returns the node's failover grade as the last successful beat
// saw it ("" before the first).
func (h *Heartbeater) Grade() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.grade
}

// LastActive returns last_active as the database set it at the last
// successful beat.
func (h *Heartbeater) LastActive() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastDB
}

// Resumed returns when a beat last succeeded after failing (the database
// had been unavailable to this node: down, failing over, cut off), on
// the local clock; zero when no beat ever failed.
func (h *Heartbeater) Resumed() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.resumed
}

// Interval between two beats.
func (h *Heartbeater) Interval() time.Duration { return h.interval }

// Gate returns nil while the last beat succeeded within GateBeats
// intervals: the master's self-gate.
func (h *Heartbeater) Gate() error { return h.Healthy(GateBeats * h.interval) }

// Live returns nil while the last beat succeeded within LiveBeats
// intervals.
func (h *Heartbeater) Live() error { return h.Healthy(LiveBeats * h.interval) }

// LoopAlive returns nil while the heartbeat loop made an attempt within
// LiveBeats intervals, whatever the database does.
func (h *Heartbeater) LoopAlive() error { return h.Alive(LiveBeats * h.interval) }

// Healthy returns nil when the last beat succeeded within limit, measured on
// the local clock.
func (h *Heartbeater) Healthy(limit time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lastOK.IsZero() {
		return errors.New("no heartbeat has succeeded yet")
	}
	if age := h.now().Sub(h.lastOK); age > limit {
		err := fmt.Errorf("last successful heartbeat %s ago (limit %s), %d consecutive failures", age.Round(time.Millisecond), limit, h.failures)
		if h.failures > 0 && h.lastErr != nil {
			// The class of the last failure, fit for clients (the log
			// has the whole error).
			err = fmt.Errorf("%w, the last: %s", err, pgdb.Summary(h.lastErr))
		}
		return err
	}
	return nil
}

// Readiness says whether a node in status, with failover grade grade, may
// run engines (only Ready; not ERROR when errorNotReady) and, when not,
// why, for /readyz. An empty status: no heartbeat yet.
func Readiness(status Status, grade string, errorNotReady bool) (ready bool, reason string) {
	switch status {
	case StatusReady:
		if errorNotReady && grade == GradeError {
			return false, "failover grade is ERROR and failover.error_not_ready is set: work interrupted on this node twice or finished elsewhere; `enginehealth node reset-grade NAME` once it is fixed"
		}
		return true, ""
	case "":
		return false, "no heartbeat has succeeded yet"
	case StatusRecovering:
		return false, "waiting for the master's start-up recovery"
	case StatusUnexpectedShutdown:
		return false, "the previous run did not shut down cleanly: no recovery runs and this node does not campaign for master until an operator checks it and runs `enginehealth node ack NAME`"
	}
	return false, "node status is " + string(status)
}
