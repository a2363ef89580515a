package health

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/faultinject"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// Defaults of CheckConfig.
const (
	DefaultNotRespondingAfter      = 30 * time.Second
	DefaultForgetAfter             = 24 * time.Hour
	DefaultMaxUnresponsiveFraction = 0.55
)

// CheckConfig configures CheckEngineHealth.
type CheckConfig struct {
	Fence    *leader.Fence
	Nodes    *nodes.Store
	Recovery *recovery.Repairer
	// Events is the event log (disruption events).
	Events *audit.Log
	// Interval between scheduled passes; a gap longer than this since the
	// last pass widens the staleness threshold by the excess.
	Interval                time.Duration
	NotRespondingAfter      time.Duration
	ForgetAfter             time.Duration
	MaxUnresponsiveFraction float64
	// SweepInterval is how often a pass looks for every interrupted
	// instance, not only those whose claims it expired (recovery.Repair);
	// default DefaultSweepInterval (health.sweep_interval). The scheduled
	// pass nearest to it sweeps: the first that starts at least
	// SweepInterval − Interval/2 after the last sweep began, so with
	// SweepInterval = Interval every pass sweeps. The first pass of an
	// office, a manual pass, the pass after a failed one or one that left
	// locked rows, and the pass after a resume always sweep.
	SweepInterval time.Duration
	// Grades says how node failover grades are judged after each pass that is
	// not in disruption mode; nil: the defaults.
	Grades *nodes.GradeConfig
	// Pauses is the pause switch (NewPauses, on the checker's schema),
	// read at the start of every pass and by Ops.Retry; required.
	Pauses *Pauses
	// OnPass, when set, is told of each pass that ran (metrics); passes
	// refused because the office may not act, or cut by shutdown, are
	// not passes.
	OnPass func(res CheckResult, err error)
	// DatabaseBack, when set, returns when the database became usable
	// again to this node after it was not (its heartbeats resumed after
	// failing, or its new connections found another server behind the
	// address: a failover or a restart the heartbeat may not have seen
	// fail; zero: never). For NotRespondingAfter from then, passes mark
	// no node Not responding: every node's heartbeats stopped with the
	// database, or were lost with an asynchronous replica's lag, and
	// resume as each one reconnects (a database failover is not the
	// nodes' fault).
	DatabaseBack func() time.Time
	Log          *slog.Logger
}

// DefaultSweepInterval of CheckConfig.
const DefaultSweepInterval = 10 * time.Minute

// Checker runs CheckEngineHealth passes: nodes, then claims, then repairs.
type Checker struct {
	cfg    CheckConfig
	log    *slog.Logger
	events *audit.Log
	now    func() time.Time

	mu       sync.Mutex // one pass at a time
	lastPass time.Time  // local time of the last pass that judged the nodes (or of taking office)
	graced   string     // why the last pass judged no node ("" when it did)
	// gracedSince is when the passes began to find a reason to judge no
	// node for the database's sake, in a row (zero: the last one found
	// none); graceOverridden: they judge all the same since (maxGraceRun).
	gracedSince     time.Time
	graceOverridden bool
	lastSweep       time.Time // local time of the last complete sweep of this office; zero: the next pass sweeps
	// disrupted reports whether the last pass was in disruption mode. Atomic:
	// read (metrics, status) while a pass holds mu, which can be as long
	// as the database takes to answer.
	disrupted atomic.Bool

	statsMu sync.Mutex
	stats   PassStats
	sweeps  sweepClock // what NextSweep is told from (under statsMu)
}

// sweepClock is what Stats tells the next sweep from: a copy of the
// pass's own state, readable while a pass holds mu.
type sweepClock struct {
	began bool // an office began on this checker
	// from is the start of this office's last complete sweep; zero: the
	// next pass sweeps.
	from time.Time
	// scheduled is the start of the last scheduled pass (or of the office):
	// scheduled passes follow about one Interval apart from it.
	scheduled time.Time
	// paused reports whether the last pass found the cluster paused (no sweep until a
	// resume).
	paused bool
}

// PassStats tells whether the check passes of this node succeed.
type PassStats struct {
	// LastSuccess is the end of the last pass that succeeded.
	LastSuccess time.Time
	// LastFailure is the end of the last pass that failed.
	LastFailure time.Time
	// ConsecutiveFailures since the last success.
	ConsecutiveFailures int
	// LastError of the last failed pass.
	LastError string
	// Disruption says why the last pass that succeeded did nothing: the
	// disruption guard held ("" when it did not).
	Disruption string
	// LastSweep is when the last sweep of this office began (a pass that
	// looked for every interrupted instance, not only those whose claims
	// it expired); zero before the first.
	LastSweep time.Time
	// NextSweep is when the next sweep is expected: the scheduled pass
	// nearest to LastSweep + SweepInterval (scheduled passes are taken
	// to follow one period apart from the last one), or the next pass
	// when that one sweeps anyway (the first of an office, after a
	// failed pass, a pass that left locked rows, a resume). Zero when no
	// pass is expected to sweep: before this node took office, without
	// a periodic schedule, or while the last pass found the cluster
	// paused.
	NextSweep time.Time
}

// Stats returns the pass statistics. It does not wait for a running pass.
func (c *Checker) Stats() PassStats {
	c.statsMu.Lock()
	s, sw := c.stats, c.sweeps
	c.statsMu.Unlock()
	s.NextSweep = c.nextSweep(sw, c.now())
	return s
}

// nextSweep is when the next sweep is expected (PassStats.NextSweep):
// the scheduled pass that will sweep, or zero when none is expected.
func (c *Checker) nextSweep(sw sweepClock, now time.Time) time.Time {
	period := c.cfg.Interval
	if !sw.began || sw.paused || period <= 0 {
		return time.Time{}
	}
	// The first scheduled pass at or after t (one period on at least).
	pass := func(t time.Time) time.Time {
		k := max((t.Sub(sw.scheduled)+period-1)/period, 1)
		return sw.scheduled.Add(k * period)
	}
	if sw.from.IsZero() {
		return pass(now)
	}
	return pass(later(now, sw.from.Add(c.sweepAfter())))
}

// sweepAfter returns how long after the last sweep began a scheduled pass
// sweeps: SweepInterval less half a period, so that the pass
// nearest to SweepInterval sweeps whatever the few milliseconds between
// a pass's firing and its start.
func (c *Checker) sweepAfter() time.Duration {
	return max(c.cfg.SweepInterval-c.cfg.Interval/2, 0)
}

// setSweeps updates the state NextSweep is told from.
func (c *Checker) setSweeps(f func(s *PassStats, sw *sweepClock)) {
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	f(&c.stats, &c.sweeps)
}

// notAPass reports whether err ends no pass and no failure of the work: a
// pass refused because the office may not act (suspended, ended) or cut
// by shutdown is neither.
func notAPass(ctx context.Context, err error) bool {
	return err != nil && (ctx.Err() != nil || errors.Is(err, leader.ErrNotTrusted))
}

// record counts a pass outcome (not one that is notAPass).
func (c *Checker) record(ctx context.Context, res CheckResult, err error) {
	if notAPass(ctx, err) {
		return
	}
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	if err == nil {
		c.stats.LastSuccess = c.now()
		c.stats.ConsecutiveFailures = 0
		c.stats.Disruption = ""
		if res.Disruption {
			c.stats.Disruption = res.DisruptionReason
		}
		return
	}
	c.stats.LastFailure = c.now()
	c.stats.ConsecutiveFailures++
	c.stats.LastError = pgdb.Summary(err) // shown to clients; the log has the whole error
}

// NewChecker returns a checker. It fails without the fence, the node
// store, the repairer, the event log or the pause switch, with a negative
// duration, with a MaxUnresponsiveFraction outside (0, 1] (0: the
// default; NaN refused: the guard compares with it), or with Grades that
// do not validate.
func NewChecker(cfg CheckConfig) (*Checker, error) {
	f := cfg.MaxUnresponsiveFraction
	switch {
	case cfg.Fence == nil || cfg.Nodes == nil || cfg.Recovery == nil || cfg.Events == nil || cfg.Pauses == nil:
		return nil, errors.New("health: a checker needs the fence, the node store, the repairer, the event log and the pause switch (CheckConfig.Fence, Nodes, Recovery, Events, Pauses)")
	case cfg.Interval < 0 || cfg.NotRespondingAfter < 0 || cfg.ForgetAfter < 0 || cfg.SweepInterval < 0:
		return nil, fmt.Errorf("health: check durations may not be negative: interval %s, not responding after %s, forget after %s, sweep interval %s",
			cfg.Interval, cfg.NotRespondingAfter, cfg.ForgetAfter, cfg.SweepInterval)
	case f != 0 && !(f > 0 && f <= 1):
		return nil, fmt.Errorf("health: the unresponsive fraction must be in (0, 1] (0: the default), got %v", f)
	}
	if cfg.Grades != nil {
		if err := cfg.Grades.Validate(); err != nil {
			return nil, fmt.Errorf("health: %w", err)
		}
	}
	cfg.NotRespondingAfter = cmp.Or(cfg.NotRespondingAfter, DefaultNotRespondingAfter)
	cfg.ForgetAfter = cmp.Or(cfg.ForgetAfter, DefaultForgetAfter)
	cfg.SweepInterval = cmp.Or(cfg.SweepInterval, DefaultSweepInterval)
	cfg.MaxUnresponsiveFraction = cmp.Or(cfg.MaxUnresponsiveFraction, DefaultMaxUnresponsiveFraction)
	cfg.Grades = cmp.Or(cfg.Grades, &nodes.GradeConfig{Window: nodes.DefaultGradeWindow, QuietPeriod: nodes.DefaultQuietPeriod,
		MaxErrorFraction: nodes.DefaultMaxErrorFraction})
	cfg.Log = cmp.Or(cfg.Log, slog.New(slog.DiscardHandler))
	return &Checker{cfg: cfg, log: cfg.Log.With("component", "check"), events: cfg.Events, now: time.Now}, nil
}

// CheckResult is what one pass did.
type CheckResult struct {
	RunID int64
	// Disruption means too many nodes looked dead at once; nothing was done.
	Disruption bool
	// DisruptionReason says why the guard held (or would have held, when
	// Forced).
	DisruptionReason string
	// Forced means an operator's check --force ran this pass through a guard
	// that would have held.
	Forced bool
	// Paused, when set: the cluster is paused; the pass marked nodes and
	// judged grades but repaired, expired and retried nothing (nil when
	// not paused).
	Paused *Pause
	// Threshold used for staleness, widened after the master's own gap.
	Threshold     time.Duration
	NotResponding []nodes.Change
	Revived       []nodes.Change
	Forgotten     []nodes.Change
	Recovery      recovery.Result
	// Failures says what the on_failure policies did with instances engines
	// failed since the last pass (tasks with any).
	Failures []recovery.TaskResult
	// Retries holds the due retries of the pass.
	Retries recovery.DueResult
	// Settled holds the retries whose outcome the pass found (tasks with any).
	Settled []recovery.SettleCounts
	// Grades holds the failover grades the pass changed.
	Grades []nodes.GradeChange
	// Violations counts the protocol violations the pass found (new
	// ones only: a lasting one is counted once), by kind, workflow and
	// node.
	Violations []recovery.ViolationCount
	// Stale lists the nodes that looked unresponsive (nil when none).
	Stale []string
	Took  time.Duration
}

// begin marks the start of an office: the first pass measures its gap from
// here.
func (c *Checker) begin() {
	c.mu.Lock()
	c.lastPass = c.now()
	c.lastSweep = time.Time{}
	c.disrupted.Store(false)
	c.setSweeps(func(s *PassStats, sw *sweepClock) {
		s.LastSweep = time.Time{}
		*sw = sweepClock{began: true, scheduled: c.lastPass}
	})
	c.mu.Unlock()
}

// threshold returns not_responding_after widened by the time the master
// itself was away beyond one interval (as Quartz does): a master that
// missed passes (paused, cut off from the database) does not condemn nodes
// for its own hiccup.
func (c *Checker) threshold() time.Duration {
	t := c.cfg.NotRespondingAfter
	if c.lastPass.IsZero() {
		return t
	}
	if gap := c.now().Sub(c.lastPass) - c.cfg.Interval; gap > 0 {
		t += gap
	}
	return t
}

// maxGraceRun bounds the grace: the passes judge no node for the
// database's sake (grace) for at most this many not_responding_after in a
// row.
const maxGraceRun = 3

// grace says why the nodes in stale must not be judged now ("" when they
// may be): the database's record condemns this master too (its own
// heartbeats are missing: the database lost them, as an asynchronous
// failover does, or missed them), or the database was unavailable to
// this node less than NotRespondingAfter ago, so the others may not have
// reconnected yet.
func (c *Checker) grace(o *leader.Office, stale []string) string {
	if len(stale) == 0 {
		return ""
	}
	if slices.Contains(stale, o.Candidate.Name) {
		return "the database's record of this master's own heartbeats is stale too: it lost or missed them (a database failover?)"
	}
	if c.cfg.DatabaseBack != nil {
		if back := c.cfg.DatabaseBack(); !back.IsZero() && c.now().Sub(back) < c.cfg.NotRespondingAfter {
			return fmt.Sprintf("the database was unavailable to this node, or another server took its address, until %s ago; the nodes get not_responding_after (%s) to reconnect",
				c.now().Sub(back).Round(time.Millisecond), c.cfg.NotRespondingAfter)
		}
	}
	return ""
}

// Override is an operator's override of the disruption guard for one
// pass (check --force).
type Override struct {
	By     audit.By
	Reason string
}

// RunOnce runs one pass under office o as a run with the given trigger.
func (c *Checker) RunOnce(ctx context.Context, o *leader.Office, trigger recovery.Trigger, resumedFrom *int64) (res CheckResult, err error) {
	return c.run(ctx, o, trigger, resumedFrom, nil)
}

// RunForced runs one manual pass that marks and repairs as if the
// disruption guard were off, recorded as a guard_override event when the
// guard would have held. It does not override a pause.
func (c *Checker) RunForced(ctx context.Context, o *leader.Office, ov Override) (CheckResult, error) {
	return c.run(ctx, o, recovery.TriggerManual, nil, &ov)
}

func (c *Checker) run(ctx context.Context, o *leader.Office, trigger recovery.Trigger, resumedFrom *int64, force *Override) (res CheckResult, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() {
		c.record(ctx, res, err)
		if c.cfg.OnPass != nil && !notAPass(ctx, err) {
			c.cfg.OnPass(res, err)
		}
	}()
	start := c.now()
	res = CheckResult{Threshold: c.threshold()}
	wfs, err := c.cfg.Recovery.Claimable(recovery.Scope{})
	if err != nil {
		return res, err
	}
	spec := recovery.RunSpec{Kind: recovery.KindCheck, Trigger: trigger, Scope: recovery.ScopeOf(wfs), ResumedFrom: resumedFrom}
	sweep := trigger == recovery.TriggerManual || c.lastSweep.IsZero() || start.Sub(c.lastSweep) >= c.sweepAfter()
	res.RunID, err = c.cfg.Recovery.InRun(ctx, o, spec, func(run int64) error {
		return c.pass(ctx, o, passParams{run: run, workflows: wfs, resumed: resumedFrom != nil, sweep: sweep, force: force}, &res)
	})
	run := res.RunID
	res.Took = c.now().Sub(start)
	switch {
	case err != nil || res.Recovery.SkippedLocked || res.Paused != nil:
		c.lastSweep = time.Time{} // something may be left: sweep next time
	case res.Recovery.Sweep:
		c.lastSweep = start
	}
	c.setSweeps(func(s *PassStats, sw *sweepClock) {
		if c.lastSweep.Equal(start) {
			s.LastSweep = start
		}
		sw.from = c.lastSweep
		if err == nil {
			sw.paused = res.Paused != nil
		}
		if trigger == recovery.TriggerPeriodic && resumedFrom == nil && !notAPass(ctx, err) {
			sw.scheduled = start
		}
	})
	if err != nil {
		return res, err
	}
	if len(res.NotResponding)+len(res.Revived)+len(res.Forgotten) > 0 || res.Recovery.ClaimsExpired > 0 || res.Recovery.Done() > 0 ||
		res.Retries.Retried+res.Retries.Cancelled > 0 || len(res.Settled) > 0 || len(res.Grades) > 0 {
		c.log.InfoContext(ctx, "check pass", "run", run, "trigger", trigger,
			"not_responding", changed(res.NotResponding), "revived", changed(res.Revived), "forgotten", changed(res.Forgotten),
			"claims_expired", res.Recovery.ClaimsExpired, "repaired", res.Recovery.Done(),
			"retried", res.Retries.Retried, "retries_cancelled", res.Retries.Cancelled, "retries_settled", settled(res.Settled),
			"grade_changes", len(res.Grades),
			"took", res.Took.Round(time.Millisecond))
	}
	// Status and grade changes are logged with their events (audit.Log).
	return res, nil
}

// passParams says what one pass of the check covers.
type passParams struct {
	// run is the pass's run.
	run int64
	// workflows are the claimable workflows it repairs.
	workflows []recovery.Workflow
	// resumed means the run resumes one a previous master left
	// unfinished.
	resumed bool
	// sweep means every interrupted instance is looked for, not only
	// those whose claims the pass expired.
	sweep bool
	// force is an operator's override of the disruption guard (nil:
	// none).
	force *Override
}

// pass runs one pass of the check in its run: the nodes (with the
// disruption guard) and the pause switch, then, unless paused, the
// repairs, the due retries and the settles, filling res.
func (c *Checker) pass(ctx context.Context, o *leader.Office, params passParams, res *CheckResult) error {
	run, wfs, resumed, sweep, force := params.run, params.workflows, params.resumed, params.sweep, params.force
	m := nodes.MasterEvent{Actor: o.Candidate.Name, Term: o.Term, RunID: run}
	// 1. Nodes, with the disruption guard; the pause switch.
	err := c.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
		res.Paused = nil
		p, err := c.cfg.Pauses.Read(ctx, tx)
		if err != nil {
			return err
		}
		if p.Paused {
			res.Paused = &p
		}
		stale, total, err := c.cfg.Nodes.Stale(ctx, tx, res.Threshold)
		if err != nil {
			return err
		}
		res.Stale = stale
		why := c.grace(o, stale)
		switch {
		case why == "":
			c.gracedSince, c.graceOverridden = time.Time{}, false
		case c.gracedSince.IsZero():
			c.gracedSince = c.now()
		case c.now().Sub(c.gracedSince) >= maxGraceRun*c.cfg.NotRespondingAfter:
			// A database that keeps failing over or restarting would
			// hide a dead node for ever: its record stays old while the
			// live nodes' land between the outages.
			if !c.graceOverridden {
				c.log.WarnContext(ctx, fmt.Sprintf("judging stale nodes although %s: the passes have spared them for %s, %d times not_responding_after",
					why, c.now().Sub(c.gracedSince).Round(time.Millisecond), maxGraceRun), "stale", strings.Join(stale, ","))
				c.graceOverridden = true
			}
			why = ""
		}
		if why != "" {
			if why != c.graced {
				c.log.InfoContext(ctx, "marking no node Not responding for now: "+why, "stale", strings.Join(stale, ","))
			}
			c.graced, stale = why, nil
		} else {
			c.graced = ""
		}
		if total > 2 && len(stale) > 0 && float64(len(stale)) >= c.cfg.MaxUnresponsiveFraction*float64(total)-1e-9 && !faultinject.Off(faultinject.Guard) {
			term := o.Term
			res.DisruptionReason = fmt.Sprintf("%d of %d nodes look unresponsive at once (%s; at least %.0f%%): assuming this master is cut off",
				len(stale), total, strings.Join(stale, ", "), 100*c.cfg.MaxUnresponsiveFraction)
			if force != nil {
				res.Forced = true
				res.DisruptionReason += "; overridden for this pass by an operator"
				if err := c.events.Write(ctx, tx, audit.Event{Kind: audit.KindGuardOverride, Actor: force.By.Actor, Via: audit.Str(force.By.Via), Term: &term, RunID: &run,
					Reason: fmt.Sprintf("disruption guard overridden for one pass: %s; %d of %d nodes looked unresponsive (%s)",
						force.Reason, len(stale), total, strings.Join(stale, ", "))}); err != nil {
					return err
				}
			} else {
				res.Disruption = true
				res.DisruptionReason += "; no node marked, no claim expired, nothing repaired until it passes"
				if !c.disrupted.Load() {
					return c.events.Write(ctx, tx, audit.Event{Kind: audit.KindDisruption, Actor: m.Actor, Term: &term, RunID: &run, Reason: res.DisruptionReason})
				}
				return nil
			}
		}
		if res.NotResponding, err = c.cfg.Nodes.MarkNotResponding(ctx, tx, stale, res.Threshold, m); err != nil {
			return err
		}
		if res.Revived, err = c.cfg.Nodes.Revive(ctx, tx, c.cfg.NotRespondingAfter, m); err != nil {
			return err
		}
		res.Forgotten, err = c.cfg.Nodes.Forget(ctx, tx, c.cfg.ForgetAfter, m)
		return err
	})
	if err != nil {
		return fmt.Errorf("check nodes: %w", err)
	}
	// The master saw the registry: it was not away, whatever the later
	// steps do. (Counting only whole successful passes would widen the
	// threshold without end while a later step fails, and no dead node
	// would ever be marked.)
	c.lastPass = c.now()
	if res.Disruption {
		if !c.disrupted.Load() {
			c.log.WarnContext(ctx, "entering disruption mode: too many nodes look unresponsive at once; doing nothing",
				"stale", strings.Join(res.Stale, ","))
		}
		c.disrupted.Store(true)
		return nil
	}
	switch {
	case res.Forced:
		c.log.WarnContext(ctx, "disruption guard overridden by an operator for one pass", append(force.By.Args(), "reason", force.Reason,
			"stale", strings.Join(res.Stale, ","))...)
		c.disrupted.Store(false)
	case c.disrupted.Load():
		c.log.InfoContext(ctx, "left disruption mode")
		c.disrupted.Store(false)
	}
	if res.Paused == nil {
		if err := c.repair(ctx, o, run, wfs, resumed, sweep, res); err != nil {
			return err
		}
	}
	// 5b. How retries ended: bookkeeping that moves no instance, so a
	// pause does not stop it.
	if res.Settled, err = c.cfg.Recovery.Settle(ctx, o, run, sweep); err != nil {
		return err
	}
	// 5c. The protocol doctor: what engines did against the claim
	// protocol, in this pass's run and in their claims now.
	if res.Violations, err = c.cfg.Recovery.Doctor(ctx, o, run, append(slices.Clone(res.Recovery.Tasks), res.Failures...)); err != nil {
		return err
	}
	// 6. Failover grades, from the interruptions of this pass and the
	// passes before (never in disruption mode: returned above).
	locate := func(ctx context.Context, tx *leader.Tx, s nodes.Signature) (nodes.Whereabouts, error) {
		w, err := c.cfg.Recovery.Whereabouts(ctx, tx, s.Workflow, s.Task, s.Instance)
		return nodes.Whereabouts{Claimant: w.Claimant, State: w.State, Ended: w.Ended, Left: w.Left}, err
	}
	return c.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
		var err error
		res.Grades, err = c.cfg.Nodes.Grade(ctx, tx, *c.cfg.Grades, m, locate)
		return err
	})
}

// repair runs steps 2 to 5 of a pass, the automatic repairs a pause
// stops.
func (c *Checker) repair(ctx context.Context, o *leader.Office, run int64, wfs []recovery.Workflow, resumed, sweep bool, res *CheckResult) error {
	var err error
	// 2 and 3. Claims, then interrupted instances.
	if res.Recovery, err = c.cfg.Recovery.Repair(ctx, o, run, wfs, resumed, sweep); err != nil {
		return err
	}
	// 4. New failures, under on_failure policies.
	if res.Failures, err = c.cfg.Recovery.Failures(ctx, o, run); err != nil {
		return err
	}
	// 5. Retries whose time has come.
	res.Retries, err = c.cfg.Recovery.Due(ctx, o, run)
	return err
}

// SetPause turns the pause switch in a fenced transaction of office o,
// with an event. It waits for a running pass, so once it returns no pass
// of this office repairs anything until Resume. ErrPaused, ErrNotPaused
// when the switch is there already.
func (c *Checker) SetPause(ctx context.Context, o *leader.Office, paused bool, by audit.By, reason string) (Pause, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var p Pause
	err := c.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
		var err error
		p, err = c.cfg.Pauses.set(ctx, tx, paused, by, reason)
		return err
	})
	if err == nil {
		if !paused {
			c.lastSweep = time.Time{} // catch up: the next pass sweeps
		}
		c.setSweeps(func(_ *PassStats, sw *sweepClock) { sw.from, sw.paused = c.lastSweep, paused })
	}
	return p, err
}

// Disrupted reports whether the last pass was in disruption mode.
func (c *Checker) Disrupted() bool {
	return c.disrupted.Load()
}

func changed(cs []nodes.Change) string {
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(c.Name)
	}
	return b.String()
}

// settled counts the retries a pass settled.
func settled(sc []recovery.SettleCounts) int64 {
	var n int64
	for _, c := range sc {
		n += c.Succeeded + c.Failed + c.Cancelled + c.HoldsCancelled
	}
	return n
}
