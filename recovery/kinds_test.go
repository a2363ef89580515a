package recovery

import (
	"fmt"
	"testing"
)

// TestKindsAreValid: each typed kind's constants are Valid and print as
// themselves; a value that is none of them (a misspelling, the empty
// string) is not Valid.
func TestKindsAreValid(t *testing.T) {
	type kind interface {
		Valid() bool
		fmt.Stringer
	}
	check := func(name string, known []kind, bogus ...kind) {
		t.Helper()
		for _, k := range known {
			if !k.Valid() {
				t.Errorf("%s %q is not Valid", name, k)
			}
		}
		for _, k := range bogus {
			if k.Valid() {
				t.Errorf("%s %q is Valid", name, k)
			}
		}
	}
	check("cause", []kind{CauseInterrupt, CauseFailure}, Cause("bogus"), Cause(""))
	check("trigger", []kind{TriggerStartup, TriggerPeriodic, TriggerManual}, Trigger("cron"), Trigger(""))
	check("run kind", []kind{KindRecovery, KindCheck}, RunKind("repair"), RunKind(""))
	check("strategy", []kind{StrategyNone, StrategyRetry, StrategyHold}, Strategy("retyr"), Strategy(""))
	check("backoff kind", []kind{BackoffFixed, BackoffLinear, BackoffExponential, BackoffFibonacci, BackoffRandomizedExponential, BackoffSchedule},
		BackoffKind("expnential"), BackoffKind(""))
	if got := fmt.Sprint(CauseInterrupt, " ", TriggerManual, " ", KindCheck); got != "interrupt manual check" {
		t.Errorf("the kinds print as %q", got)
	}
	if len(Causes) != 2 || len(Triggers) != 3 || len(RunKinds) != 2 {
		t.Errorf("the lists of kinds: %v %v %v", Causes, Triggers, RunKinds)
	}
}
