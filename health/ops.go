package health

import (
	"context"
	"errors"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/recovery"
)

// ErrNotMaster means the operation needs master-ship and this node is not the
// master (the API forwards it to the master).
var ErrNotMaster = errors.New("health: this node is not the master")

// Ops runs the operator's manual triggers with this node's office.
type Ops struct {
	Elector  *leader.Elector
	Checker  *Checker
	Recovery *recovery.Repairer
	// Reads, when set, serves the read-only operations (Plan, Runs): a
	// repairer over the API's own pool, so operator reads never take a
	// connection the master's work needs. Recovery when nil.
	Reads *recovery.Repairer
	// Pauses reads the pause switch (over the API's pool).
	Pauses *Pauses
}

func (p *Ops) reads() *recovery.Repairer {
	if p.Reads != nil {
		return p.Reads
	}
	return p.Recovery
}

// officeWait is how long an operator's command waits for this node's
// office to be trusted before it is refused (503, try again): a late
// heartbeat on a busy host, or an unanswered etcd keep-alive, passes
// within it (a fresh-clone test run saw a recover refused for a heartbeat
// 445 ms old against a limit of 400 ms).
const officeWait = 2 * time.Second

func (p *Ops) office(ctx context.Context) (*leader.Office, error) {
	o := p.Elector.Office()
	if o == nil {
		return nil, ErrNotMaster
	}
	if err := o.AwaitTrusted(ctx, officeWait); err != nil {
		return nil, err
	}
	return o, nil
}

// CheckRequest asks for a manual CheckEngineHealth pass.
type CheckRequest struct {
	// Force runs the pass through the disruption guard (once), recorded
	// with By and Reason (required with Force).
	Force  bool
	By     audit.By
	Reason string
}

// Check runs a CheckEngineHealth pass now (trigger manual).
func (p *Ops) Check(ctx context.Context, req CheckRequest) (CheckResult, error) {
	o, err := p.office(ctx)
	if err != nil {
		return CheckResult{}, err
	}
	if req.Force {
		return p.Checker.RunForced(ctx, o, Override{By: req.By, Reason: req.Reason})
	}
	return p.Checker.RunOnce(ctx, o, recovery.TriggerManual, nil)
}

// Pause stops automatic repair cluster-wide until Resume (see Pause);
// ErrPaused when paused already.
func (p *Ops) Pause(ctx context.Context, by audit.By, reason string) (Pause, error) {
	o, err := p.office(ctx)
	if err != nil {
		return Pause{}, err
	}
	return p.Checker.SetPause(ctx, o, true, by, reason)
}

// Resume lets automatic repair go on; the next pass catches up.
// ErrNotPaused when not paused.
func (p *Ops) Resume(ctx context.Context, by audit.By, reason string) (Pause, error) {
	o, err := p.office(ctx)
	if err != nil {
		return Pause{}, err
	}
	return p.Checker.SetPause(ctx, o, false, by, reason)
}

// PauseState reads the pause switch.
func (p *Ops) PauseState(ctx context.Context) (Pause, error) {
	return p.Pauses.Current(ctx)
}

// Recover runs a recovery run now (trigger manual) over scope.
func (p *Ops) Recover(ctx context.Context, sc recovery.Scope) (recovery.Result, error) {
	o, err := p.office(ctx)
	if err != nil {
		return recovery.Result{}, err
	}
	return p.Recovery.Recover(ctx, o, recovery.TriggerManual, sc, nil)
}

// Plan computes what Recover would do, changing nothing.
func (p *Ops) Plan(ctx context.Context, sc recovery.Scope) ([]recovery.WorkflowPlan, error) {
	return p.reads().Plan(ctx, sc)
}

// Runs lists the latest runs.
func (p *Ops) Runs(ctx context.Context, limit int) ([]recovery.RunRow, error) {
	return p.reads().ListRuns(ctx, limit)
}

// ActedRuns lists the latest runs that did something (recovery.ActedRuns).
func (p *Ops) ActedRuns(ctx context.Context, limit int) ([]recovery.RunRow, error) {
	return p.reads().ActedRuns(ctx, limit)
}

// Holds lists open holds (of workflow, when set).
func (p *Ops) Holds(ctx context.Context, workflow string, limit int) ([]recovery.Hold, error) {
	return p.reads().Holds(ctx, workflow, limit)
}

// Waiting lists the retries waiting for their time, soonest first (of
// workflow, when set).
func (p *Ops) Waiting(ctx context.Context, workflow string, limit int) ([]recovery.WaitingRetry, error) {
	return p.reads().Waiting(ctx, workflow, limit)
}

// DecideHolds applies an operator's decision to holds.
func (p *Ops) DecideHolds(ctx context.Context, d recovery.HoldDecision) (recovery.HoldResult, error) {
	o, err := p.office(ctx)
	if err != nil {
		return recovery.HoldResult{}, err
	}
	return p.Recovery.DecideHolds(ctx, o, d)
}

// Retry retries one instance now, by hand. A retry scheduled within one
// check interval is left to the check, unless the cluster is paused (the
// check runs no retry then).
func (p *Ops) Retry(ctx context.Context, m recovery.ManualRetry) (recovery.RetryResult, error) {
	o, err := p.office(ctx)
	if err != nil {
		return recovery.RetryResult{}, err
	}
	m.Soon = p.Checker.cfg.Interval
	pause, err := p.Checker.cfg.Pauses.Current(ctx)
	if err != nil {
		return recovery.RetryResult{}, err
	}
	m.Paused = pause.Paused
	return p.Recovery.Retry(ctx, o, m)
}

// Instance returns what the sidecar knows of one instance.
func (p *Ops) Instance(ctx context.Context, ref recovery.Ref, ip recovery.InstanceParams) (recovery.InstanceView, error) {
	return p.reads().Instance(ctx, ref, ip)
}

// Parked lists the held or waiting instances a filter selects, and
// counts them.
func (p *Ops) Parked(ctx context.Context, f recovery.ParkedFilter) ([]recovery.WaitingRetry, int64, error) {
	return p.reads().Parked(ctx, f)
}

// Violations returns the protocol violations found since a time,
// counted, and the latest perKind of each kind.
func (p *Ops) Violations(ctx context.Context, since time.Time, perKind int) ([]recovery.ViolationCount, []recovery.Violation, error) {
	return p.reads().Violations(ctx, since, perKind)
}

// Workflows returns the names of the configured workflows.
func (p *Ops) Workflows() []string { return p.reads().Workflows() }

// HoldsOpen counts the open holds and the oldest one's wait.
func (p *Ops) HoldsOpen(ctx context.Context) (int64, time.Duration, error) {
	return p.reads().HoldsOpen(ctx)
}

// Run returns one run with what it did per workflow task.
func (p *Ops) Run(ctx context.Context, id int64) (recovery.RunDetail, error) {
	return p.reads().Run(ctx, id)
}

// RetryStats returns the retry statistics by workflow and task.
func (p *Ops) RetryStats(ctx context.Context) ([]recovery.RetryStats, error) {
	return p.reads().RetryStats(ctx)
}
