package recovery

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Cause says which policy of a task applies to an instance.
type Cause string

const (
	// CauseInterrupt applies to an instance found unclaimed in the task's
	// interim state.
	CauseInterrupt Cause = "interrupt"
	// CauseFailure applies to an instance moved to the task's failed state by
	// an engine.
	CauseFailure Cause = "failure"
)

// Causes are the causes Decide knows.
var Causes = []Cause{CauseInterrupt, CauseFailure}

// Valid reports whether c is one of Causes.
func (c Cause) Valid() bool { return slices.Contains(Causes, c) }

// String returns the cause as events and the API write it.
func (c Cause) String() string { return string(c) }

// Kinds of an Action.
const (
	// ActRetry moves the instance back to the task's begin state now.
	ActRetry = "retry"
	// ActWait leaves the instance where it is until Action.Delay has
	// passed, then moves it back to begin (the due-retry pass).
	ActWait = "wait"
	// ActHold parks the instance until an operator decides.
	ActHold = "hold"
	// ActFail fails the instance for good.
	ActFail = "fail"
)

// States of an attempts row.
const (
	AttemptWaiting   = "waiting"
	AttemptHeld      = "held"
	AttemptExhausted = "exhausted"
	AttemptRetried   = "retried"
	AttemptSucceeded = "succeeded"
	AttemptCancelled = "cancelled"
	// AttemptFailed marks an instance failed for good short of exhaustion
	// (strategy none after earlier retries, a non_retryable error, or an operator's
	// holds fail).
	AttemptFailed = "failed"
)

// History is what Decide knows of an instance's earlier attempts.
type History struct {
	// Retries made by the policy so far (the original run is attempt 0;
	// operators' retries are not counted).
	Retries int
	// Known reports whether the instance has an attempts row.
	Known bool
	// Nodes the instance was interrupted on, this interruption included.
	Nodes []string
}

// Action is what happens to an interrupted or failed instance.
type Action struct {
	// Kind is ActRetry, ActWait, ActHold or ActFail.
	Kind string
	// To is the state the instance moves to now; empty: it stays where
	// it is (waiting, held, or already failed).
	To string
	// Attempt is the retry this action makes (ActRetry) or schedules
	// (ActWait); otherwise the retries made so far.
	Attempt int
	// Delay before the scheduled retry (ActWait).
	Delay time.Duration
	// State of the instance's attempts row after the action; empty: no
	// row is written (a first failure under strategy none).
	State string
	// Reason is recorded in the event and the attempts row.
	Reason string
}

// InterruptPolicy is the policy for an interrupted instance of t: its
// OnInterrupt, or when that names no strategy the default (an
// atomic_internal task: AtomicOnInterrupt; any other: none).
func (t Task) InterruptPolicy() Policy {
	if t.OnInterrupt.Strategy != "" {
		return t.OnInterrupt
	}
	if t.AtomicInternal {
		return AtomicOnInterrupt()
	}
	return Policy{Strategy: StrategyNone}
}

// FailurePolicy is the policy for an instance an engine failed: its
// OnFailure, none when it names no strategy.
func (t Task) FailurePolicy() Policy {
	if t.OnFailure.Strategy != "" {
		return t.OnFailure
	}
	return Policy{Strategy: StrategyNone}
}

// Policy returns the policy of t for cause.
func (t Task) Policy(c Cause) Policy {
	if c == CauseFailure {
		return t.FailurePolicy()
	}
	return t.InterruptPolicy()
}

// from is the state an instance of t is repaired from for cause c: the
// task's interim state for an interruption, its failed state for a
// failure.
func (t Task) from(c Cause) string {
	if c == CauseFailure {
		return t.Failed
	}
	return t.Interim
}

// NonRetryableMatch returns the first of p's non_retryable patterns that
// matches errText, or "". Patterns are checked by the configuration; one
// that does not compile never matches.
func (p Policy) NonRetryableMatch(errText string) string {
	if errText == "" {
		return ""
	}
	for _, pat := range p.NonRetryable {
		// Go's syntax here; the repair statement matches in PostgreSQL
		// (CheckCatalog makes sure it can).
		if re, err := regexp.Compile(pat); err == nil && re.MatchString(errText) {
			return pat
		}
	}
	return ""
}

// Decide returns what becomes of an instance of task t found interrupted
// (CauseInterrupt) or failed by an engine (CauseFailure), given its
// attempt history h and its error text (from the workflow's error column;
// empty when there is none). rnd draws the jitter and randomized delays
// (uniform in [0, 1)).
//
//   - An error matching a non_retryable pattern fails the instance at once.
//   - none: failed.
//   - hold: parked where it is until an operator decides.
//   - retry: retry k = h.Retries+1, if k ≤ max_attempts and the backoff
//     has a delay for it: at once (delay 0) or after the delay; otherwise
//     failed for good as exhausted.
func Decide(t Task, c Cause, h History, errText string, rnd func() float64) Action {
	a := decide(t, c, h, t.Policy(c).NonRetryableMatch(errText))
	switch {
	case a.Kind == ActWait:
		a.Delay, _ = t.Policy(c).Backoff.Delay(a.Attempt, rnd)
		a.Reason += waitSuffix(a.Delay)
	case a.State == AttemptExhausted && len(h.Nodes) > 0:
		a.Reason += nodesSuffix + strings.Join(h.Nodes, ", ")
	}
	return a
}

// nodesSuffix introduces, in an exhausted instance's reason, the nodes it
// was interrupted on.
const nodesSuffix = "; interrupted on "

// waitSuffix ends the reason of a scheduled retry: its delay d (not
// negative) in seconds to the millisecond, half a millisecond rounded
// up, as batchSlots.Seconds writes it in SQL (policy_batch.sql) and as
// config check's Duration.Round rounds it.
func waitSuffix(d time.Duration) string {
	ms := d / time.Millisecond
	if d%time.Millisecond >= time.Millisecond/2 {
		ms++
	}
	return fmt.Sprintf(" in %d.%03ds", ms/1000, ms%1000)
}

// decide is Decide without the draw of a scheduled retry's delay (Delay
// zero, whose kind says only that it is not zero) and without the nodes
// of an exhausted instance: what a whole batch shares, given whether and
// which non_retryable pattern matched.
func decide(t Task, c Cause, h History, matched string) Action {
	p := t.Policy(c)
	fail := Action{Kind: ActFail, Attempt: h.Retries}
	if c == CauseInterrupt {
		fail.To = t.Failed
	}
	if h.Known {
		fail.State = AttemptFailed
	}
	if matched != "" {
		fail.State = AttemptFailed
		fail.Reason = fmt.Sprintf("error matches non_retryable %q: failed at once", matched)
		return fail
	}
	switch p.Strategy {
	case StrategyHold:
		return Action{Kind: ActHold, Attempt: h.Retries, State: AttemptHeld,
			Reason: fmt.Sprintf("%s: held for an operator (holds retry or holds fail)", what(c))}
	case StrategyRetry:
		k := h.Retries + 1
		_, hi, ok := p.Backoff.interval(k)
		if k > p.MaxAttempts || !ok {
			fail.State = AttemptExhausted
			fail.Reason = fmt.Sprintf("%s: exhausted after %d %s", what(c), h.Retries, plural(h.Retries, "retry", "retries"))
			return fail
		}
		if hi <= 0 || p.Backoff.limit() <= 0 {
			return Action{Kind: ActRetry, To: t.Begin, Attempt: k, State: AttemptRetried,
				Reason: fmt.Sprintf("%s: retry %d of %d, at once", what(c), k, p.MaxAttempts)}
		}
		return Action{Kind: ActWait, Attempt: k, State: AttemptWaiting,
			Reason: fmt.Sprintf("%s: retry %d of %d", what(c), k, p.MaxAttempts)}
	}
	if c == CauseInterrupt {
		fail.Reason = "interrupted non-atomic task failed: it may have left external effects"
		if t.AtomicInternal {
			fail.Reason = "interrupted task failed (on_interrupt: none)"
		}
	} else {
		fail.Reason = "failed by the engine (on_failure: none)"
	}
	return fail
}

func what(c Cause) string {
	if c == CauseFailure {
		return "failed by the engine"
	}
	return "interrupted"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// FirstEffect says what becomes of an instance of t on its first
// interruption (CauseInterrupt) or engine failure (CauseFailure): the
// state it moves to at once ("" when it stays where it is) and the effect
// in words, e.g. "→ Created, retry 1 of 10 at once",
// "stays in Shipping, retry 1 of 3 in 1m0s±12s", "→ ShipFailed".
func FirstEffect(t Task, c Cause) (to, effect string) {
	to, effect = effect1(t, c, 0)
	if n := nonRetryable(t, c); n != "" {
		effect += "; " + n
	}
	return to, effect
}

// nonRetryable describes what the non_retryable patterns of t's policy
// for c do, or "" when they change nothing.
func nonRetryable(t Task, c Cause) string {
	p := t.Policy(c)
	if len(p.NonRetryable) == 0 || p.Strategy == StrategyNone {
		return ""
	}
	return fmt.Sprintf("an error matching non_retryable %s → %s at once", strings.Join(p.NonRetryable, " | "), t.Failed)
}

// Effects lists what the policy of t for cause does, retry after retry,
// ending with the final outcome: what `config check` and
// `recover --dry-run` print. Retries described alike in a row are
// collapsed ("retries 1–10 of 10 at once").
func Effects(t Task, c Cause) []string {
	p := t.Policy(c)
	if p.Strategy != StrategyRetry {
		_, e := effect1(t, c, 0)
		if n := nonRetryable(t, c); n != "" {
			return []string{e, n}
		}
		return []string{e}
	}
	// each[k-1]: the action after k-1 retries (the last one: exhausted).
	each := make([]string, p.MaxAttempts+1)
	for k := range each {
		_, each[k] = effect1(t, c, k)
	}
	var out []string
	first := 1
	for k := 1; k <= p.MaxAttempts+1; k++ {
		e := each[k-1]
		if k <= p.MaxAttempts && strings.Replace(each[k], fmt.Sprintf("retry %d of", k+1), fmt.Sprintf("retry %d of", k), 1) == e {
			continue // the same as the next one but for its number
		}
		if first < k {
			e = strings.Replace(e, fmt.Sprintf("retry %d of", k), fmt.Sprintf("retries %d–%d of", first, k), 1)
		}
		out = append(out, e)
		first = k + 1
	}
	if len(out) > 8 {
		out = append(append(out[:5:5], "…"), out[len(out)-2:]...)
	}
	if n := nonRetryable(t, c); n != "" {
		out = append(out, n)
	}
	return out
}

// effect1 describes the action on an instance with retries made so far.
func effect1(t Task, c Cause, retries int) (to, effect string) {
	return effectOf(t, c, retries, "")
}

// effectOf describes the action on an instance with retries made so far
// whose error text matched the non_retryable pattern matched ("": none).
func effectOf(t Task, c Cause, retries int, matched string) (to, effect string) {
	from := t.from(c)
	a := Decide(t, c, History{Retries: retries, Known: retries > 0}, "", func() float64 { return 0.5 })
	if matched != "" && t.Policy(c).Strategy != StrategyNone {
		if t.Failed == from {
			return "", fmt.Sprintf("stays in %s (error matches non_retryable %s)", from, matched)
		}
		return t.Failed, fmt.Sprintf("→ %s at once (error matches non_retryable %s)", t.Failed, matched)
	}
	switch a.Kind {
	case ActRetry:
		return a.To, fmt.Sprintf("→ %s, retry %d of %d at once", a.To, a.Attempt, t.Policy(c).MaxAttempts)
	case ActWait:
		return "", fmt.Sprintf("stays in %s, retry %d of %d in %s", from, a.Attempt, t.Policy(c).MaxAttempts, t.Policy(c).Backoff.describe(a.Attempt))
	case ActHold:
		return "", fmt.Sprintf("stays in %s, held for an operator", from)
	}
	if a.State == AttemptExhausted {
		if a.To == "" {
			return "", fmt.Sprintf("stays in %s (exhausted after %d %s)", from, retries, plural(retries, "retry", "retries"))
		}
		return a.To, fmt.Sprintf("→ %s (exhausted after %d %s)", a.To, retries, plural(retries, "retry", "retries"))
	}
	if a.To == "" {
		return "", fmt.Sprintf("stays in %s", from)
	}
	return a.To, "→ " + a.To
}

// describe gives the delay before retry k in words: "1m0s", "1m0s±12s"
// with jitter, "35s–1m10s" for randomized_exponential or where the final
// clamp to max_delay cuts the jitter short ("4m0s–5m0s"): always the
// range Delay draws from.
func (b Backoff) describe(k int) string {
	if b.Kind == BackoffRandomizedExponential || b.Jitter > 0 {
		// The draws are the interval's and then the jitter's: the
		// smallest delay takes 0 for both, the largest (almost) 1.
		lo, _ := b.Delay(k, func() float64 { return 0 })
		hi, _ := b.Delay(k, func() float64 { return 1 })
		if b.Kind != BackoffRandomizedExponential {
			nb := b
			nb.Jitter = 0
			d, _ := nb.Delay(k, nil)
			if d > 0 && (hi-d)-(d-lo) < time.Microsecond && (d-lo)-(hi-d) < time.Microsecond {
				return fmt.Sprintf("%s±%s", d.Round(time.Millisecond), (hi - d).Round(time.Millisecond))
			}
		}
		if lo == hi {
			return lo.Round(time.Millisecond).String()
		}
		return fmt.Sprintf("%s–%s", lo.Round(time.Millisecond), hi.Round(time.Millisecond))
	}
	d, _ := b.Delay(k, nil)
	return d.Round(time.Millisecond).String()
}
