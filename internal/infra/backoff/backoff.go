// Package backoff retries an operation with capped exponential delays and
// jitter, sleeping on a context so that shutdown is never delayed by a wait.
package backoff

import (
	"cmp"
	"context"
	"math/rand/v2"
	"time"
)

// Defaults of a zero Backoff.
const (
	DefaultBase   = 200 * time.Millisecond
	DefaultMax    = 10 * time.Second
	DefaultJitter = 0.2
)

// Backoff computes successive delays: Base·2^n capped at Max, then scaled by
// a random factor in [1−Jitter, 1+Jitter] (jitter after the cap, so that
// many nodes that all hit the cap still spread out).
type Backoff struct {
	// Base delay; zero is DefaultBase.
	Base time.Duration
	// Max delay; zero is DefaultMax.
	Max time.Duration
	// Jitter fraction; zero is DefaultJitter. Jitter cannot be turned off:
	// nodes retrying in step (after a database restart) is what it
	// prevents.
	Jitter float64

	attempt int
}

// Next returns the delay before the next attempt and counts the attempt.
func (b *Backoff) Next() time.Duration {
	base, maxDelay := cmp.Or(b.Base, DefaultBase), cmp.Or(b.Max, DefaultMax)
	jitter := b.Jitter
	if jitter == 0 {
		jitter = DefaultJitter
	}
	d := maxDelay
	if b.attempt < 62 && base<<b.attempt > 0 && base<<b.attempt < maxDelay {
		d = base << b.attempt
	}
	b.attempt++
	f := 1 + jitter*(2*rand.Float64()-1)
	return time.Duration(float64(d) * f)
}

// Reset starts the sequence again, after a success.
func (b *Backoff) Reset() { b.attempt = 0 }

// Attempts returns how many delays Next has handed out since the last Reset.
func (b *Backoff) Attempts() int { return b.attempt }

// Sleep waits d or until ctx is done, whichever is first.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Retry calls op until it succeeds or ctx is done. After each failure it
// calls onErr with the attempt number (from 1), the error and the delay
// before the next try, then waits. It returns nil once op succeeds, else
// the cause of ctx (context.Cause) alone: the failures went to onErr.
func Retry(ctx context.Context, b Backoff, op func(context.Context) error, onErr func(attempt int, err error, next time.Duration)) error {
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		d := b.Next()
		if onErr != nil {
			onErr(attempt, err, d)
		}
		if Sleep(ctx, d) != nil {
			return context.Cause(ctx)
		}
	}
}
