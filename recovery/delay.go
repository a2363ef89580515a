package recovery

import (
	"math"
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
	if k < 1 {
		return 0, false
	}
	base := float64(b.Base)
	m := b.Multiplier
	if m <= 0 {
		m = DefaultMultiplier
	}
	var d float64
	switch b.Kind {
	case BackoffFixed:
		d = base
	case BackoffLinear:
		d = base * float64(k)
	case BackoffExponential:
		d = base * math.Pow(m, float64(k-1))
	case BackoffFibonacci:
		d = base * fib(k)
	case BackoffRandomizedExponential:
		lo := base * math.Pow(m, float64(k-1))
		d = lo + rnd()*(lo*m-lo)
	case BackoffSchedule:
		if k > len(b.Schedule) {
			return 0, false
		}
		d = float64(b.Schedule[k-1])
	default:
		return 0, false
	}
	limit := float64(b.MaxDelay)
	if limit <= 0 {
		limit = math.MaxInt64
	}
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
