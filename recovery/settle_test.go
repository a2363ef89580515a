package recovery

import (
	"context"
	"strings"
	"testing"
)

// TestSettle: the check closes the attempts rows of retries whose outcome
// is known, one event each: an instance that reached an end state or went
// on past the task succeeded, one the engine failed (no on_failure policy)
// failed, one whose row is gone is cancelled; instances still in begin or
// running in the interim state stay retried. A second pass does nothing;
// under an on_failure policy a failed retry is left to that policy.
func TestSettle(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffFixed}})
	ctx := context.Background()
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipping'`)
	if res := f.check(); res.Tasks[0].Retried != 7 {
		t.Fatalf("first pass: %+v, want 7 retried", res.Tasks[0])
	}
	// What the engines did with the retries: 1 shipped, 2 waits in
	// begin, 3 runs (claimed), 4 failed, 5 went on to a later task, 6 is
	// deleted, 7 failed too (decided below under on_failure).
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipped' WHERE id = 1;
		UPDATE app.orders SET status = 'Shipping' WHERE id = 3;
		INSERT INTO app.orders_claim VALUES (3, 'n1', 't', now(), now() + interval '1h');
		UPDATE app.orders SET status = 'ShipFailed' WHERE id IN (4, 7);
		UPDATE app.orders SET status = 'Delivered' WHERE id = 5;
		DELETE FROM app.orders WHERE id = 6`)
	f.r.cfg.BatchSize = 2 // several batches
	sc, err := f.r.Settle(ctx, f.o, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc) != 1 || sc[0].Workflow != "orders" || sc[0].Task != "ship" || sc[0].Succeeded != 2 || sc[0].Failed != 2 || sc[0].Cancelled != 1 {
		t.Fatalf("settled %+v, want 2 succeeded, 2 failed, 1 cancelled", sc)
	}
	want := map[string]string{"1": AttemptSucceeded, "2": AttemptRetried, "3": AttemptRetried, "4": AttemptFailed,
		"5": AttemptSucceeded, "6": AttemptCancelled, "7": AttemptFailed}
	for id, st := range want {
		if a := attemptOf(t, f.db, "orders", id, "ship"); a.State != st {
			t.Errorf("instance %s: %s (%s), want %s", id, a.State, a.Reason, st)
		}
	}
	for id, reason := range map[string]string{"1": "retry 1 succeeded: the instance reached Shipped",
		"5": "retry 1 succeeded: the instance went on to Delivered", "4": "retry 1 failed: the engine moved the instance to ShipFailed",
		"6": "retry 1 cancelled: the instance no longer exists"} {
		if a := attemptOf(t, f.db, "orders", id, "ship"); a.Reason != reason {
			t.Errorf("instance %s: reason %q, want %q", id, a.Reason, reason)
		}
	}
	var kinds []string
	if err := f.db.Select(&kinds, `SELECT instance || ':' || kind || ':' || coalesce(to_state, '-') || ':' || attempt FROM enginehealth.events
		WHERE kind IN ('retry_succeeded', 'retry_failed', 'retry_cancelled') ORDER BY instance`); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(kinds, " "); got != "1:retry_succeeded:Shipped:1 4:retry_failed:ShipFailed:1 5:retry_succeeded:Delivered:1 6:retry_cancelled:-:1 7:retry_failed:ShipFailed:1" {
		t.Fatalf("events: %s", got)
	}
	if sc, err := f.r.Settle(ctx, f.o, 0, true); err != nil || len(sc) != 0 {
		t.Fatalf("second pass settled %+v, %v; want nothing", sc, err)
	}

	// Under an on_failure policy, a retry the engine failed is that
	// policy's to decide: it stays retried.
	f.r.cfg.Workflows[0].Tasks[0].OnFailure = Policy{Strategy: StrategyHold}
	f.db.MustExec(`UPDATE app.orders SET status = 'ShipFailed' WHERE id = 2`)
	if sc, err := f.r.Settle(ctx, f.o, 0, true); err != nil || len(sc) != 0 {
		t.Fatalf("under on_failure: settled %+v, %v; want nothing", sc, err)
	}
	if a := attemptOf(t, f.db, "orders", "2", "ship"); a.State != AttemptRetried {
		t.Fatalf("instance 2 under on_failure: %+v", a)
	}
}
