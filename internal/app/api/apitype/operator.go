package apitype

import (
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/jsonx"
	"github.com/enginehealth/enginehealth/recovery"
)

// Ref names an instance.
type Ref struct {
	Workflow string `json:"workflow"`
	Instance string `json:"instance"`
}

// HoldsRequest is the body of POST /v1/holds/retry and /v1/holds/fail:
// the named instances, or all open holds (of workflow, when set).
type HoldsRequest struct {
	Instances []Ref  `json:"instances"`
	All       bool   `json:"all"`
	Workflow  string `json:"workflow,omitempty"` // empty: every workflow (with all)
	Reason    string `json:"reason"`
}

// RetryRequest is the body of POST /v1/retry.
type RetryRequest struct {
	Workflow string `json:"workflow"`
	Instance string `json:"instance"`
	// Task, when set, names the task (needed only when the instance's
	// state is the failed state of several tasks).
	Task   string `json:"task"`
	Reason string `json:"reason"`
}

// Hold is an instance held for an operator's decision: the items of GET
// /v1/holds.
type Hold struct {
	Workflow string `json:"workflow"`
	Instance string `json:"instance"`
	Task     string `json:"task"`
	// State the instance waits in (interim, or failed).
	State string         `json:"state"`
	Cause recovery.Cause `json:"cause"`
	Since time.Time      `json:"since"`
	// Attempts counts retries made by the policy; Manual: by operators.
	Attempts  int      `json:"attempts"`
	Manual    int      `json:"manual"`
	LastNode  *string  `json:"last_node"`
	Nodes     []string `json:"nodes"`
	LastError *string  `json:"last_error"`
	Reason    string   `json:"reason"`
}

// WaitingRetry is an instance whose retry waits for its time (the status
// page lists them).
type WaitingRetry struct {
	// Hold's fields say where it waits, why (Cause, Reason), since when,
	// the retries made (Attempts: this one is retry Attempts+1) and on
	// which nodes it was interrupted.
	Hold
	// Due is when the retry runs; DueInSeconds: how long until then on the
	// database clock (≤ 0: the next pass runs it).
	Due          time.Time `json:"due"`
	DueInSeconds float64   `json:"due_in_seconds"`
	// MaxAttempts is the number of retries the task's policy for Cause
	// allows (0 when the task is no longer configured).
	MaxAttempts int `json:"max_attempts"`
}

// HoldResult is the answer of POST /v1/holds/retry and /v1/holds/fail:
// what a decision did.
type HoldResult struct {
	Action string `json:"action"`
	// Decided counts holds whose decision was applied.
	Decided int64 `json:"decided"`
	// Cancelled lists holds closed because the instance was no longer where it
	// was left (moved by someone else, gone, claimed), with the reason.
	Cancelled []HoldOutcome `json:"cancelled"`
	// NotHeld lists named instances with no open hold (never held, already
	// decided, or being decided by another request).
	NotHeld []Ref `json:"not_held"`
}

// HoldOutcome is a hold that was closed without its decision applied.
type HoldOutcome struct {
	Ref
	Task   string `json:"task"`
	Reason string `json:"reason"`
}

// RetryResult is the answer of POST /v1/retry: what a manual retry did.
type RetryResult struct {
	Ref
	Task string `json:"task"`
	From string `json:"from"`
	To   string `json:"to"`
	// Manual counts the operators' retries of the instance's task so far, this
	// one included; Attempts: the policy's (unchanged).
	Manual   int `json:"manual"`
	Attempts int `json:"attempts"`
	// Replaced says what the retry replaced: a scheduled retry or a
	// hold; null when nothing.
	Replaced string `json:"replaced" null:"zero"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (r RetryResult) MarshalJSON() ([]byte, error) { return jsonx.Marshal(r) }

// InstanceView is the body of GET /v1/instances: what the daemon knows
// of one instance, its state and claim now, its attempts rows and its
// events.
type InstanceView struct {
	Workflow string `json:"workflow"`
	Instance string `json:"instance"`
	// State now; null when the instance table has no such row (any more).
	State *string `json:"state"`
	// Claim on it now, if any (null when none).
	Claim *Claim `json:"claim"`
	// Attempts holds one per task a policy or an operator acted on.
	Attempts []Attempt `json:"attempts"`
	// Events about the instance, oldest first; Truncated: more than
	// the limit exist (page on with events after the last id).
	Events    []Event `json:"events"`
	Truncated bool    `json:"truncated"`
}

// Claim is an engine's claim on an instance, as the claims table holds it.
type Claim struct {
	Node      string    `json:"node"`
	Token     string    `json:"token"`
	ClaimedAt time.Time `json:"claimed_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Expired reports whether its expiry has passed (database clock); the
	// master deletes it on its next pass.
	Expired bool `json:"expired"`
}

// Attempt is an instance's attempts row for one task: the retries a
// policy or an operator made.
type Attempt struct {
	Task string `json:"task"`
	// AttemptCount counts retries made by the policy; Manual: by operators.
	AttemptCount int    `json:"attempt_count"`
	Manual       int    `json:"manual"`
	State        string `json:"state"`
	// InRetry means a retry is scheduled (NextAttemptTime).
	InRetry         bool           `json:"in_retry"`
	Cause           recovery.Cause `json:"cause"`
	LeftIn          string         `json:"left_in"`
	Since           time.Time      `json:"since"`
	LastAttemptTime *time.Time     `json:"last_attempt_time"`
	NextAttemptTime *time.Time     `json:"next_attempt_time"`
	LastNode        *string        `json:"last_node"`
	Nodes           []string       `json:"nodes"`
	LastReason      string         `json:"last_reason"`
	LastError       *string        `json:"last_error"`
}

// RetryStats sums up the attempts rows of one workflow and task: the
// items of GET /v1/retries/stats.
type RetryStats struct {
	Workflow string `json:"workflow"`
	Task     string `json:"task"`
	// Instances counts attempts rows (instances a policy or an operator acted
	// on); Retried: those retried at least once.
	Instances int64 `json:"instances"`
	Retried   int64 `json:"retried"`
	// Scheduled counts retries made or scheduled by the policies (each
	// counted once); Manual: retries made by operators.
	Scheduled int64 `json:"scheduled"`
	Manual    int64 `json:"manual"`
	// Waiting counts retries scheduled and not yet due or run.
	Waiting int64 `json:"waiting"`
	// Succeeded counts instances whose last retry ran and then succeeded
	// (settled by the check: the instance reached one of the task's end
	// states or went on past the task, or it is in one of the end states
	// now).
	Succeeded int64 `json:"succeeded"`
	// Exhausted counts those failed for good after max_attempts; Failed: failed for
	// good otherwise (non_retryable, an operator's holds fail); HoldsOpen:
	// held now.
	Exhausted int64 `json:"exhausted"`
	Failed    int64 `json:"failed"`
	// Cancelled counts instances whose retry or hold was cancelled without
	// running: someone else finished the instance (it reached an end
	// state) or moved it meanwhile, it is gone, or the policy no longer
	// allows the retry. Not a success, and not in SuccessRate.
	Cancelled int64 `json:"cancelled"`
	HoldsOpen int64 `json:"holds_open"`
	// SuccessRate is, of the instances whose retry ran and whose outcome is
	// known, those that succeeded: Succeeded / (Succeeded + the Exhausted
	// and Failed after at least one retry); null before any.
	SuccessRate *float64 `json:"success_rate"`
}
