package apitype

import (
	"fmt"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/jsonx"
)

// CheckRequest is the optional body of POST /v1/check.
type CheckRequest struct {
	// Force runs the pass through the disruption guard, once; Reason is
	// then required and recorded in a guard_override event.
	Force  bool   `json:"force"`
	Reason string `json:"reason"`
}

// CheckResult is the answer of POST /v1/check: what one pass did.
type CheckResult struct {
	RunID int64 `json:"run_id"`
	// Disruption means too many nodes looked dead at once; nothing was done.
	Disruption bool `json:"disruption"`
	// DisruptionReason says why the guard held (or would have held, when
	// Forced).
	DisruptionReason string `json:"disruption_reason" null:"zero"`
	// Forced means an operator's check --force ran this pass through a guard
	// that would have held.
	Forced bool `json:"forced"`
	// Paused, when set: the cluster is paused; the pass marked nodes and
	// judged grades but repaired, expired and retried nothing (null when
	// not paused).
	Paused *Pause `json:"paused"`
	// Threshold used for staleness, widened after the master's own gap.
	Threshold     time.Duration  `json:"threshold_ns"`
	NotResponding []NodeChange   `json:"not_responding"`
	Revived       []NodeChange   `json:"revived"`
	Forgotten     []NodeChange   `json:"forgotten"`
	Recovery      RecoveryResult `json:"recovery"`
	// Failures says what the on_failure policies did with instances engines
	// failed since the last pass (tasks with any).
	Failures []TaskResult `json:"failures"`
	// Retries holds the due retries of the pass.
	Retries DueResult `json:"retries"`
	// Settled holds the retries whose outcome the pass found (tasks with any).
	Settled []SettleCounts `json:"settled"`
	// Grades holds the failover grades the pass changed.
	Grades []GradeChange `json:"grades"`
	// Stale lists the nodes that looked unresponsive (null when none).
	Stale []string      `json:"stale"`
	Took  time.Duration `json:"took_ns"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (r CheckResult) MarshalJSON() ([]byte, error) { return jsonx.Marshal(r) }

// Pause is the pause switch: the answer of POST /v1/pause and
// /v1/resume, and part of the status. While paused, the master repairs,
// expires and retries nothing.
type Pause struct {
	Paused bool `json:"paused"`
	// Since is when it was paused (or resumed, when not paused).
	Since time.Time `json:"since"`
	// Actor and Reason of the last pause or resume (null when none: never
	// paused, a resume without a reason).
	Actor  string `json:"actor" null:"zero"`
	Reason string `json:"reason" null:"zero"`
	// Term of the master that recorded it (null when never paused).
	Term *int64 `json:"term"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (p Pause) MarshalJSON() ([]byte, error) { return jsonx.Marshal(p) }

// String says who paused, when and why ("" when not paused).
func (p Pause) String() string {
	if !p.Paused {
		return ""
	}
	return fmt.Sprintf("paused by %s at %s: %s", p.Actor, p.Since.UTC().Format(time.RFC3339), p.Reason)
}

// RecoveryRequest is the body of POST /v1/recovery.
type RecoveryRequest struct {
	// Workflows in scope; all claimable ones when empty.
	Workflows []string `json:"workflows"`
	// DryRun computes the plan and changes nothing.
	DryRun bool `json:"dry_run"`
}

// RecoveryAnswer is the answer of POST /v1/recovery: a plan (dry run) or
// a result.
type RecoveryAnswer struct {
	DryRun bool `json:"dry_run"`
	// Plan of a dry run, Result of a run: the other is null.
	Plan   []WorkflowPlan  `json:"plan"`
	Result *RecoveryResult `json:"result"`
}

// RecoveryResult is what a recovery run (or a check pass's repairs) did.
type RecoveryResult struct {
	RunID         int64 `json:"run_id"`
	ClaimsExpired int64 `json:"claims_expired"`
	// Sweep means every interrupted instance was looked for, not only those
	// whose claims the run expired.
	Sweep bool         `json:"sweep"`
	Tasks []TaskResult `json:"tasks"`
	// SkippedLocked means a row to repair was locked and left for a later
	// pass (which should sweep).
	SkippedLocked bool `json:"skipped_locked"`
}

// Done counts the instances the run handled, over its tasks.
func (r RecoveryResult) Done() int64 {
	var n int64
	for _, t := range r.Tasks {
		n += t.Done
	}
	return n
}

// TaskResult counts the repairs of one task.
type TaskResult struct {
	Workflow string `json:"workflow"`
	Task     string `json:"task"`
	From     string `json:"from"`
	// To is where a first interruption goes (the task's begin or failed
	// state; null when it waits or is held), and Effect says it in words
	// (e.g. "→ Created, retry 1 of 10 at once").
	To      string `json:"to" null:"zero"`
	Effect  string `json:"effect"`
	Planned int64  `json:"planned"`
	// Plan (a dry run): what happens to the planned instances, by what
	// their history makes of them; null when not a dry run.
	Plan []PlannedEffect `json:"plan"`
	// Done counts instances handled, of which Retried went back to begin,
	// Scheduled wait for a retry, Held wait for an operator and Failed
	// went to the failed state.
	Done      int64 `json:"done"`
	Retried   int64 `json:"retried"`
	Scheduled int64 `json:"scheduled"`
	Held      int64 `json:"held"`
	Failed    int64 `json:"failed"`
	// Exhausted counts, of Failed, those failed for good after the policy's
	// last retry.
	Exhausted int64 `json:"exhausted"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (t TaskResult) MarshalJSON() ([]byte, error) { return jsonx.Marshal(t) }

// WorkflowPlan is what a recovery run would do to one workflow.
type WorkflowPlan struct {
	Workflow       string       `json:"workflow"`
	ClaimsToExpire int64        `json:"claims_to_expire"`
	Tasks          []TaskResult `json:"tasks"`
}

// PlannedEffect is what a recovery run would do to some of a task's
// interrupted instances: those with the same history.
type PlannedEffect struct {
	Instances int64 `json:"instances"`
	// To is the state they go to now; null when they wait or are held.
	To     string `json:"to" null:"zero"`
	Effect string `json:"effect"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (e PlannedEffect) MarshalJSON() ([]byte, error) { return jsonx.Marshal(e) }

// DueResult counts what a due-retry pass did.
type DueResult struct {
	// Retried counts instances moved back to their task's begin state.
	Retried int64 `json:"retried"`
	// Cancelled counts retries whose instance was no longer where it was left.
	Cancelled int64 `json:"cancelled"`
}

// SettleCounts is what a check pass found of one task's retries.
type SettleCounts struct {
	Workflow string `json:"workflow"`
	Task     string `json:"task"`
	// Succeeded counts instances that reached one of the task's end states, or
	// went on past the task. Failed: the engine failed it and the task
	// has no on_failure policy to decide. Cancelled: the instance row is
	// gone.
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Cancelled int64 `json:"cancelled"`
	// HoldsCancelled counts holds whose instance is no longer where it was
	// left (it reached an end state, someone else moved it, or it is
	// gone).
	HoldsCancelled int64 `json:"holds_cancelled"`
}
