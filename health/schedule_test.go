package health

import (
	"strings"
	"testing"
	"time"
)

func mustSchedule(t *testing.T, spec string) Schedule {
	t.Helper()
	s, err := ParseSchedule(spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestParseSchedule: the schedule is parsed once, with its period; a
// schedule that cannot run is an error, never a period of zero.
func TestParseSchedule(t *testing.T) {
	for spec, period := range map[string]time.Duration{
		"@every 15s":  15 * time.Second,
		"@every 1s":   time.Second,
		"*/5 * * * *": 5 * time.Minute,
		"@hourly":     time.Hour,
	} {
		s := mustSchedule(t, spec)
		if s.Period() != period || s.String() != spec || s.IsZero() {
			t.Errorf("%q: period %s, want %s", spec, s.Period(), period)
		}
	}
	if got := mustSchedule(t, "@every 15s").StuckAfter(); got != time.Minute {
		t.Errorf("stuck after %s for a 15s period, want the 1 min floor", got)
	}
	if got := mustSchedule(t, "@every 1m").StuckAfter(); got != 3*time.Minute {
		t.Errorf("stuck after %s for a 1m period, want 3m", got)
	}
	for spec, want := range map[string]string{
		"@every -1s":  "at least 1s",
		"@every 1ns":  "at least 1s",
		"@every fast": "wants a duration",
		"0 0 30 2 *":  "never fires",
		"junk":        "",
		"":            "",
	} {
		if _, err := ParseSchedule(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", spec, err, want)
		}
	}
	if !(Schedule{}).IsZero() {
		t.Error("the zero Schedule is not zero")
	}
}
