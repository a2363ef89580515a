package nodes

import (
	"strings"
	"testing"
)

// TestReadiness: only Ready runs engines; every other status says why.
func TestReadiness(t *testing.T) {
	for status, want := range map[string]string{
		StatusReady:              "",
		"":                       "no heartbeat",
		StatusRecovering:         "start-up recovery",
		StatusUnexpectedShutdown: "node ack",
		StatusNotResponding:      "node status is Not responding",
	} {
		ready, reason := Readiness(status)
		if ready != (status == StatusReady) || (want == "") != (reason == "") || !strings.Contains(reason, want) {
			t.Errorf("Readiness(%q) = %v, %q; want reason with %q", status, ready, reason, want)
		}
	}
}
