package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestNextIsCappedAndJittered(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: time.Second, Jitter: 0.2}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for i, w := range want {
		w *= time.Millisecond
		d := b.Next()
		lo, hi := time.Duration(float64(w)*0.8), time.Duration(float64(w)*1.2)
		if d < lo || d > hi {
			t.Fatalf("attempt %d: delay %s outside [%s, %s]", i, d, lo, hi)
		}
	}
	b.Reset()
	if d := b.Next(); d > 120*time.Millisecond {
		t.Fatalf("after Reset: %s, want about the base", d)
	}
}

func TestNextNeverOverflows(t *testing.T) {
	b := Backoff{Base: time.Second, Max: time.Minute}
	for range 200 {
		if d := b.Next(); d <= 0 || d > 72*time.Second {
			t.Fatalf("delay %s out of range after %d attempts", d, b.Attempts())
		}
	}
}

func TestRetryStopsOnSuccessAndReportsFailures(t *testing.T) {
	calls, reported := 0, 0
	err := Retry(context.Background(), Backoff{Base: time.Millisecond, Max: time.Millisecond},
		func(context.Context) error {
			calls++
			if calls < 3 {
				return errors.New("down")
			}
			return nil
		},
		func(int, error, time.Duration) { reported++ })
	if err != nil || calls != 3 || reported != 2 {
		t.Fatalf("err=%v calls=%d reported=%d", err, calls, reported)
	}
}

func TestRetryEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	err := Retry(ctx, Backoff{Base: time.Hour}, func(context.Context) error { return errors.New("down") },
		func(int, error, time.Duration) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// TestRetryReturnsTheCause: stopped while waiting or while op fails,
// Retry returns the context's cause alone, not op's last failure.
func TestRetryReturnsTheCause(t *testing.T) {
	down, stopping := errors.New("down"), errors.New("stopping")
	for name, cancelIn := range map[string]string{"while waiting": "onErr", "while op fails": "op"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			calls := 0
			err := Retry(ctx, Backoff{Base: time.Hour},
				func(context.Context) error {
					calls++
					if cancelIn == "op" {
						cancel(stopping)
					}
					return down
				},
				func(int, error, time.Duration) {
					if cancelIn == "onErr" {
						cancel(stopping)
					}
				})
			if err != stopping || calls != 1 {
				t.Fatalf("got %v after %d calls, want the cause %v alone after 1", err, calls, stopping)
			}
		})
	}
}
