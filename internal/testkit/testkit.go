// Package testkit holds what every test package shares: Main, which runs
// the tests and then looks for leaked goroutines, and the waiting helpers
// (conditions are polled with a deadline, never slept for).
package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Main runs a test package and exits: run starts the package's fixtures,
// calls m.Run and stops the fixtures before it returns (pgtest.Main,
// leadertest.Main, or nil for m.Run alone). When the tests passed, Main then
// fails the package if goroutines other than the runtime's and the testing
// package's are still running, after goleak's grace period (but for
// toxiproxyLeaks). Call it from TestMain. goleak.VerifyTestMain cannot do
// this: it runs m.Run itself, and the fixtures must be stopped before the
// check.
func Main(m *testing.M, run func(*testing.M) int, opts ...goleak.Option) {
	if run == nil {
		run = (*testing.M).Run
	}
	code := run(m)
	if code == 0 {
		if err := goleak.Find(append(toxiproxyLeaks(), opts...)...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Must returns v, and panics when err is set: for a test's constructor
// call whose configuration is the test's own (a constructor that refuses
// it is a broken test, not a finding).
func Must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("testkit.Must: %v", err))
	}
	return v
}

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

// Golden compares got with the golden file at path, failing the test
// with got when they differ; with update (the package's -update flag) it
// writes got there instead.
func Golden(tb testing.TB, path, got string, update bool) {
	tb.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (rerun the test with -update to write it)", err)
	}
	if got != string(want) {
		tb.Errorf("%s differs (rerun the test with -update if the change is meant, and review the diff):\n%s", path, got)
	}
}

// toxiproxyLeaks are toxiproxy's (v2.12.0), not ours, in every package
// that cuts links with faultproxy: when a toxic is removed from a link
// whose connection the other side has closed, its toxic's goroutine (the
// noop toxic's, or faultproxy's byte counter) stays blocked on a send for
// good. The leader package's race run failed on it once (2026-11-27).
func toxiproxyLeaks() []goleak.Option {
	return []goleak.Option{goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"),
		goleak.IgnoreTopFunction("github.com/enginehealth/enginehealth/internal/testkit/faultproxy.(*counter).Pipe")}
}
