package recovery

import (
	"math"
	"strings"
	"time"
)

// DefaultMultiplier of the exponential kinds.
const DefaultMultiplier = 2.0

// Delay returns the delay before retry k (k ≥ 1; the original execution
// is attempt 0) and true, or false when the backoff has no retry k (past
// the end of a schedule). rnd returns uniform numbers in [0, 1); it is
// called for randomized_exponential and for jitter only.
//
// The delay of the kind (fixed: Base; linear: Base·k; exponential:
// Base·m^(k−1); fibonacci: Base·fib(k), fib(1) = fib(2) = 1;
// randomized_exponential: uniform in [Base·m^(k−1), Base·m^k]; schedule:
// its k-th entry) is capped by MaxDelay, then scaled by 1 ± Jitter, then
// clamped to [0, MaxDelay] again. A zero MaxDelay means no cap.
func (b Backoff) Delay(k int, rnd func() float64) (time.Duration, bool) {
	lo, hi, ok := b.interval(k)
	if !ok {
		return 0, false
	}
	d := lo
	if hi > lo {
		// A draw of 0 is lo: when hi overflowed to +Inf, 0·Inf would be
		// NaN (and a NaN delay converts to a negative Duration).
		if r := rnd(); r > 0 {
			d = lo + r*(hi-lo)
		}
	}
	limit := b.limit()
	d = min(d, limit)
	if b.Jitter > 0 {
		d *= 1 + b.Jitter*(2*rnd()-1)
	}
	// Clamp in float64 first: an overflowed power is +Inf, and a huge
	// float does not convert to a Duration.
	d = max(0, min(d, limit))
	if d >= math.MaxInt64 {
		return time.Duration(math.MaxInt64), true
	}
	return time.Duration(d), true
}

// sampleDelaySQL is Delay's draw as an SQL expression over a decision
// table's row (sql/sample_delay.sql), a fragment of policy_batch.
var sampleDelaySQL = load("sample_delay")

// sampleDelay is Delay's draw over the decision table's row alias step,
// in SQL (sample_delay.sql); drawn: some step's delay is random (without,
// the expression calls no random()).
func sampleDelay(step string, drawn bool) (string, error) {
	f, err := sampleDelaySQL.Fragment(struct {
		Step  string
		Drawn bool
	}{step, drawn})
	return strings.TrimRight(f, "\n"), err
}

// interval returns the delay of the kind before retry k, in nanoseconds,
// before cap and jitter: uniform in [lo, hi] (lo = hi but for
// randomized_exponential), or false past the end of a schedule.
func (b Backoff) interval(k int) (lo, hi float64, ok bool) {
	if k < 1 {
		return 0, 0, false
	}
	base := float64(b.Base)
	m := b.Multiplier
	if m <= 0 {
		m = DefaultMultiplier
	}
	switch b.Kind {
	case BackoffFixed:
		lo = base
	case BackoffLinear:
		lo = base * float64(k)
	case BackoffExponential:
		lo = base * math.Pow(m, float64(k-1))
	case BackoffFibonacci:
		lo = base * fib(k)
	case BackoffRandomizedExponential:
		lo = base * math.Pow(m, float64(k-1))
		return lo, lo * m, true
	case BackoffSchedule:
		if k > len(b.Schedule) {
			return 0, 0, false
		}
		lo = float64(b.Schedule[k-1])
	default:
		return 0, 0, false
	}
	return lo, lo, true
}

// limit is MaxDelay in nanoseconds, or the largest Duration when there is
// no cap.
func (b Backoff) limit() float64 {
	if b.MaxDelay <= 0 {
		return math.MaxInt64
	}
	return float64(b.MaxDelay)
}

// fib returns the k-th Fibonacci number (fib(1) = fib(2) = 1) as a float,
// +Inf once it no longer fits.
func fib(k int) float64 {
	a, b := 0.0, 1.0
	for range k - 1 {
		a, b = b, a+b
		if math.IsInf(b, 1) {
			return b
		}
	}
	return b
}
