package recovery

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestDelaySequences: the sequences of docs/retry-policies.md, exactly (no jitter).
func TestDelaySequences(t *testing.T) {
	none := func() float64 { t.Fatal("rnd called without jitter"); return 0 }
	seq := func(b Backoff, n int) []time.Duration {
		var out []time.Duration
		for k := 1; k <= n; k++ {
			d, ok := b.Delay(k, none)
			if !ok {
				break
			}
			out = append(out, d)
		}
		return out
	}
	minutes := func(ms ...int) []time.Duration {
		out := make([]time.Duration, len(ms))
		for i, m := range ms {
			out[i] = time.Duration(m) * time.Minute
		}
		return out
	}
	for _, c := range []struct {
		name string
		b    Backoff
		n    int
		want []time.Duration
	}{
		{"fixed", Backoff{Kind: BackoffFixed, Base: time.Minute, MaxDelay: time.Hour}, 3, minutes(1, 1, 1)},
		{"linear", Backoff{Kind: BackoffLinear, Base: time.Minute, MaxDelay: time.Hour}, 4, minutes(1, 2, 3, 4)},
		{"exponential", Backoff{Kind: BackoffExponential, Base: time.Minute, MaxDelay: time.Hour}, 5, minutes(1, 2, 4, 8, 16)},
		{"exponential m=3", Backoff{Kind: BackoffExponential, Base: time.Minute, Multiplier: 3, MaxDelay: time.Hour}, 4, minutes(1, 3, 9, 27)},
		{"fibonacci", Backoff{Kind: BackoffFibonacci, Base: time.Minute, MaxDelay: time.Hour}, 5, minutes(1, 1, 2, 3, 5)},
		{"capped", Backoff{Kind: BackoffExponential, Base: time.Minute, MaxDelay: 5 * time.Minute}, 5, minutes(1, 2, 4, 5, 5)},
		{"schedule ends", Backoff{Kind: BackoffSchedule, Schedule: minutes(1, 10, 60), MaxDelay: time.Hour}, 10, minutes(1, 10, 60)},
		{"zero fixed", Backoff{Kind: BackoffFixed}, 3, minutes(0, 0, 0)},
	} {
		if got := seq(c.b, c.n); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// randomized_exponential with base 35 s: retry 1 in [35, 70] s, retry
	// 10 in [17920, 35840] s; the ends are reached with rnd 0 and 1.
	b := Backoff{Kind: BackoffRandomizedExponential, Base: 35 * time.Second, MaxDelay: 24 * time.Hour}
	for _, c := range []struct {
		k     int
		r     float64
		wantS int
	}{{1, 0, 35}, {1, 1, 70}, {10, 0, 17920}, {10, 1, 35840}} {
		d, ok := b.Delay(c.k, func() float64 { return c.r })
		if !ok || d != time.Duration(c.wantS)*time.Second {
			t.Errorf("randomized_exponential retry %d at rnd %v: %v %v, want %ds", c.k, c.r, d, ok, c.wantS)
		}
	}
	if _, ok := (Backoff{Kind: BackoffFixed}).Delay(0, none); ok {
		t.Error("a delay for retry 0 (the original execution)")
	}
}

// TestDelayProperties: for every kind, random bases, caps, multipliers,
// jitters and retries: never negative, never above MaxDelay (jitter
// included); jitter stays within ±Jitter of the delay; without jitter the
// non-random kinds never decrease;
// randomized exponential stays in its interval (before the cap).
func TestDelayProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	kinds := BackoffKinds
	for i := range 20000 {
		b := Backoff{
			Kind:       kinds[i%len(kinds)],
			Base:       time.Duration(r.Int64N(int64(10 * time.Minute))),
			MaxDelay:   time.Duration(1 + r.Int64N(int64(48*time.Hour))),
			Multiplier: 1 + 4*r.Float64(),
		}
		if b.Kind == BackoffSchedule {
			for range 1 + r.IntN(8) {
				b.Schedule = append(b.Schedule, time.Duration(r.Int64N(int64(2*time.Hour))))
			}
			slices.Sort(b.Schedule)
		}
		if i%2 == 0 {
			b.Jitter = 0.99 * r.Float64()
		}
		var prev time.Duration
		for k := 1; k <= 200; k++ {
			u := r.Float64()
			d, ok := b.Delay(k, func() float64 { return u })
			if !ok {
				if b.Kind != BackoffSchedule || k != len(b.Schedule)+1 {
					t.Fatalf("%+v: no retry %d", b, k)
				}
				break
			}
			if d < 0 || d > b.MaxDelay {
				t.Fatalf("%+v retry %d: %v outside [0, %v]", b, k, d, b.MaxDelay)
			}
			if b.Jitter > 0 {
				plain := b
				plain.Jitter = 0
				c, _ := plain.Delay(k, func() float64 { return u })
				lo, hi := (1-b.Jitter)*float64(c), min((1+b.Jitter)*float64(c), float64(b.MaxDelay))
				if float64(d) < lo-1 || float64(d) > hi+1 {
					t.Fatalf("%+v retry %d: %v outside %v ± %.2f", b, k, d, c, b.Jitter)
				}
			}
			if b.Jitter == 0 && b.Kind != BackoffRandomizedExponential && d < prev {
				t.Fatalf("%+v retry %d: %v after %v: not monotone", b, k, d, prev)
			}
			if b.Kind == BackoffRandomizedExponential && b.Jitter == 0 && k < 20 {
				lo := float64(b.Base) * pow(b.Multiplier, k-1)
				hi := min(lo*b.Multiplier, float64(b.MaxDelay))
				if float64(d) < min(lo, float64(b.MaxDelay))-1 || float64(d) > hi+1 {
					t.Fatalf("%+v retry %d: %v outside [%v, %v]", b, k, d, time.Duration(lo), time.Duration(hi))
				}
			}
			prev = d
		}
	}
}

func pow(m float64, n int) float64 {
	p := 1.0
	for range n {
		p *= m
	}
	return p
}
