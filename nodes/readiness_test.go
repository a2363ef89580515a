package nodes

import (
	"strings"
	"testing"
)

// TestReadiness: only Ready runs engines; every other status says why.
func TestReadiness(t *testing.T) {
	for status, want := range map[Status]string{
		StatusReady:              "",
		"":                       "no heartbeat",
		StatusRecovering:         "start-up recovery",
		StatusUnexpectedShutdown: "node ack",
		StatusNotResponding:      "node status is Not responding",
	} {
		ready, reason := Readiness(status, GradeError, false)
		if ready != (status == StatusReady) || (want == "") != (reason == "") || !strings.Contains(reason, want) {
			t.Errorf("Readiness(%q) = %v, %q; want reason with %q", status, ready, reason, want)
		}
	}
	// An ERROR node is not ready only when failover.error_not_ready says so.
	if ready, reason := Readiness(StatusReady, GradeError, true); ready || !strings.Contains(reason, "ERROR") {
		t.Errorf("ERROR node with error_not_ready: %v, %q", ready, reason)
	}
	for _, g := range []string{GradeNormal, GradeWarning} {
		if ready, _ := Readiness(StatusReady, g, true); !ready {
			t.Errorf("%s node with error_not_ready is not ready", g)
		}
	}
}
