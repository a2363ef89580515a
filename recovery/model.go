package recovery

import (
	"slices"
	"time"

	"github.com/enginehealth/enginehealth/claims"
)

// Workflow is one instance table of the engine, as recovery sees it.
type Workflow struct {
	Name string
	// Table is the instance table, optionally schema-qualified.
	Table        string
	IDColumn     string
	StatusColumn string
	// ErrorColumn (optional) is matched by a policy's NonRetryable
	// patterns.
	ErrorColumn string
	// UpdatedColumn (optional): a timestamp the engine sets whenever it
	// changes an instance's state (on_failure policies find new failures
	// by it).
	UpdatedColumn string
	// Claims is the claims table of a claimable workflow (nil: not
	// claimable). Only claimable workflows are repaired by the periodic
	// check; the others by start-up recovery on a cold cluster only.
	Claims *claims.Table
	Tasks  []Task
}

// Claimable reports whether engines claim the workflow's instances.
func (w Workflow) Claimable() bool { return w.Claims != nil }

// ClaimTasks returns the tasks as the claim protocol sees them.
func (w Workflow) ClaimTasks() []claims.Task {
	ts := make([]claims.Task, 0, len(w.Tasks))
	for _, t := range w.Tasks {
		ts = append(ts, t.Task)
	}
	return ts
}

// Task is one state task of a workflow: Begin → Interim → one of Ends, or
// → Failed. It is the claim protocol's task (whose Timeout is the claim
// timeout) with what recovery decides by.
type Task struct {
	claims.Task
	// AtomicInternal means the task's whole effect is one transaction, so an
	// interrupted run can be reverted to Begin.
	AtomicInternal bool
	// OnInterrupt applies to an instance found interrupted in Interim,
	// OnFailure to one an engine moved to Failed.
	OnInterrupt Policy
	OnFailure   Policy
}

// Strategy is what a Policy does with an interrupted or failed instance.
type Strategy string

// Retry strategies of a Policy.
const (
	StrategyNone  Strategy = "none"
	StrategyRetry Strategy = "retry"
	StrategyHold  Strategy = "hold"
)

// Strategies are the strategies a Policy may have.
var Strategies = []Strategy{StrategyNone, StrategyRetry, StrategyHold}

// Valid reports whether s is one of Strategies.
func (s Strategy) Valid() bool { return slices.Contains(Strategies, s) }

// String returns the strategy as the configuration writes it.
func (s Strategy) String() string { return string(s) }

// Defaults of a Policy (applied by the configuration, which maps the file
// onto Policy; issue 11 gives them their semantics).
const (
	DefaultStrategy             = StrategyNone
	DefaultMaxAttempts          = 2
	DefaultBackoffKind          = BackoffExponential
	DefaultBackoffBase          = 30 * time.Second
	DefaultBackoffMaxDelay      = time.Hour
	DefaultRandomizedMultiplier = 2.0
	// DefaultJitter of the kinds that are not random by themselves:
	// fixed, linear, exponential and fibonacci (DefaultJitterOf).
	DefaultJitter = 0.2
	// DefaultAtomicMaxAttempts is how many times, at most, an atomic_internal
	// task whose on_interrupt is not configured is retried at once
	// (AtomicOnInterrupt); a poison instance is then failed.
	DefaultAtomicMaxAttempts = 10
)

// DefaultJitterOf returns the default jitter of a backoff kind: 0 for
// randomized_exponential and schedule.
func DefaultJitterOf(kind BackoffKind) float64 {
	if kind == BackoffRandomizedExponential || kind == BackoffSchedule {
		return 0
	}
	return DefaultJitter
}

// AtomicOnInterrupt is the on_interrupt policy of an atomic_internal task
// that configures none: back to begin at once, at most
// DefaultAtomicMaxAttempts times.
func AtomicOnInterrupt() Policy {
	return Policy{Strategy: StrategyRetry, MaxAttempts: DefaultAtomicMaxAttempts,
		Backoff: Backoff{Kind: BackoffFixed, MaxDelay: DefaultBackoffMaxDelay}}
}

// Policy is what happens to an interrupted or failed instance beyond the
// default of Decide.
type Policy struct {
	Strategy Strategy
	// MaxAttempts of a retry strategy.
	MaxAttempts int
	Backoff     Backoff
	// NonRetryable patterns (regular expressions) matched against the
	// workflow's error column; a match is final at once.
	NonRetryable []string
}

// BackoffKind is how a Backoff's delays grow from one retry to the next.
type BackoffKind string

// Backoff kinds.
const (
	BackoffFixed                 BackoffKind = "fixed"
	BackoffLinear                BackoffKind = "linear"
	BackoffExponential           BackoffKind = "exponential"
	BackoffFibonacci             BackoffKind = "fibonacci"
	BackoffRandomizedExponential BackoffKind = "randomized_exponential"
	BackoffSchedule              BackoffKind = "schedule"
)

// BackoffKinds are the kinds a Backoff may have.
var BackoffKinds = []BackoffKind{BackoffFixed, BackoffLinear, BackoffExponential, BackoffFibonacci, BackoffRandomizedExponential, BackoffSchedule}

// Valid reports whether k is one of BackoffKinds.
func (k BackoffKind) Valid() bool { return slices.Contains(BackoffKinds, k) }

// String returns the kind as the configuration writes it.
func (k BackoffKind) String() string { return string(k) }

// Backoff is the delay before a retry.
type Backoff struct {
	Kind BackoffKind
	// Base delay.
	Base time.Duration
	// MaxDelay caps every delay.
	MaxDelay time.Duration
	// Jitter as a fraction in [0, 1): each delay is scaled by 1 ± jitter.
	Jitter float64
	// Multiplier of exponential and randomized_exponential (default 2).
	Multiplier float64
	// Schedule lists explicit delays, for kind schedule.
	Schedule []time.Duration
}
