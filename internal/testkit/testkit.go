// Package testkit holds the waiting helpers of the tests: conditions are
// polled with a deadline, never slept for.
package testkit

import (
	"testing"
	"time"
)

// Poll is how often Eventually and Never look at their condition.
const Poll = 20 * time.Millisecond

// Eventually polls cond until it returns true, failing the test after
// timeout with what and the last error cond returned.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(Poll)
	defer tick.Stop()
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not true after %s (last error: %v)", what, timeout, err)
		}
		<-tick.C
	}
}

// Never polls cond for d and fails the test if it ever returns true: it
// shows that something does not happen for a while.
func Never(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	end := time.Now().Add(d)
	tick := time.NewTicker(Poll)
	defer tick.Stop()
	for time.Now().Before(end) {
		if cond() {
			tb.Fatalf("%s (within %s)", what, d)
		}
		<-tick.C
	}
}
