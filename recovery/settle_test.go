package recovery

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/testkit"
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
	f.r.cfg.BatchSize, f.r.cfg.SettleBatchSize = 2, 2 // several batches
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

// TestRetriesAtOnceWriteOnlyTheirEvents: a first interruption retried at
// once writes its event and no attempts row; the event holds the
// attempt, and the next interruption counts from it (retry 2, which
// writes the case's row, then exhausted after max_attempts with every
// node it was interrupted on). While a node of the fleet runs a release that counts retries from
// the attempts rows only, a retry at once writes its row as before.
func TestRetriesAtOnceWriteOnlyTheirEvents(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 2, Backoff: Backoff{Kind: BackoffFixed}})
	interrupt := func(node string) {
		f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 1`)
		f.db.MustExec(`DELETE FROM app.orders_claim WHERE instance_id = 1`)
		f.db.MustExec(`INSERT INTO app.orders_claim VALUES (1, $1, 't', now() - interval '1h', now() - interval '1s')`, node)
	}
	rows := func() int {
		var n int
		if err := f.db.Get(&n, `SELECT count(*) FROM enginehealth.attempts`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The first retry at once of a case writes its event alone; the
	// second, its row too (the case then is the row's: the settle pass
	// reads a case in the events once).
	for k, node := range []string{"n1", "n2"} {
		interrupt(node)
		if res := f.check(); res.Tasks[0].Retried != 1 {
			t.Fatalf("interruption %d: %+v, want retried", k+1, res.Tasks[0])
		}
		if n := rows(); n != k {
			t.Fatalf("interruption %d: %d attempts rows, want %d", k+1, n, k)
		}
		if a := attemptOf(t, f.db, "orders", "1", "ship"); a.State != AttemptRetried || a.Attempt != k+1 {
			t.Fatalf("interruption %d: %+v, want retry %d", k+1, a, k+1)
		}
	}
	var row struct {
		Attempt  int    `db:"attempt"`
		Nodes    string `db:"nodes"`
		LastNode string `db:"last_node"`
	}
	if err := f.db.Get(&row, `SELECT attempt, array_to_string(nodes, ',') AS nodes, last_node FROM enginehealth.attempts WHERE instance = '1'`); err != nil ||
		row.Attempt != 2 || row.Nodes != "n1,n2" || row.LastNode != "n2" {
		t.Fatalf("the second retry's row: %+v (%v), want attempt 2 on n1, n2, last n2", row, err)
	}
	interrupt("n1")
	if res := f.check(); res.Tasks[0].Exhausted != 1 {
		t.Fatalf("third interruption: %+v, want exhausted", res.Tasks[0])
	}
	a := attemptOf(t, f.db, "orders", "1", "ship")
	if rows() != 1 || a.State != AttemptExhausted || a.Attempt != 2 || a.Nodes != "n1,n2" ||
		!strings.HasSuffix(a.Reason, "exhausted after 2 retries; interrupted on n1, n2") {
		t.Fatalf("exhausted: %+v (%d rows), want its row after 2 retries, on n1, n2", a, rows())
	}
	var attempts []string
	if err := f.db.Select(&attempts, `SELECT coalesce(attempt::text, '-') FROM enginehealth.events
		WHERE kind = 'instance_repaired' AND instance = '1' ORDER BY id`); err != nil || strings.Join(attempts, " ") != "1 2 2" {
		t.Fatalf("repair events' attempts: %v (%v), want 1 2 2", attempts, err)
	}

	// A fleet not all on this release: the row is written. The fleet is
	// asked once a run, however many tasks it repairs (here two).
	asked := 0
	f.r.cfg.EventRetries = func(context.Context) (bool, error) { asked++; return false, nil }
	f.r.cfg.Workflows[0].Tasks = append(f.r.cfg.Workflows[0].Tasks, Task{Task: claims.Task{Name: "pack", Begin: "Paid",
		Interim: "Packing", Ends: []string{"Packed"}, Failed: "PackFailed"}, OnInterrupt: f.r.cfg.Workflows[0].Tasks[0].OnInterrupt})
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 2; UPDATE app.orders SET status = 'Packing' WHERE id = 3`)
	f.check()
	if a := attemptOf(t, f.db, "orders", "2", "ship"); rows() != 3 || a.State != AttemptRetried || a.Attempt != 1 {
		t.Fatalf("mixed fleet: %+v (%d rows), want a retried row", a, rows())
	}
	if a := attemptOf(t, f.db, "orders", "3", "pack"); a.State != AttemptRetried || a.Attempt != 1 {
		t.Fatalf("mixed fleet, second task: %+v, want a retried row", a)
	}
	if asked != 1 {
		t.Fatalf("the fleet's versions were read %d times in one run, want once", asked)
	}
}

// TestSettleEventsCursor: a task's settle cursor of retries at once is
// written by its first repair that writes one, just before it; the settle
// pass moves it up to the first case left open, and past it once it is
// closed. A closed case gets its attempts row in its final state (the
// statistics and the next case read it there); a case still running
// after the horizon gets its row in state retried (since its retry: the
// failure path decides a failure stamped after it), which the row's
// settle then closes, and the cursor goes on past it.
func TestSettleEventsCursor(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffFixed}})
	ctx := context.Background()
	cursor := func() int64 {
		var c int64
		if err := f.db.Get(&c, `SELECT after_id FROM enginehealth.settle_cursors WHERE workflow = 'orders' AND task = 'ship'`); err != nil {
			t.Fatal(err)
		}
		return c
	}
	eventOf := func(id string) int64 {
		var e int64
		if err := f.db.Get(&e, `SELECT max(id) FROM enginehealth.events WHERE kind = 'instance_repaired' AND instance = $1`, id); err != nil {
			t.Fatal(err)
		}
		return e
	}
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id IN (1, 2)`)
	f.check()
	if c, first := cursor(), min(eventOf("1"), eventOf("2")); c != first-1 {
		t.Fatalf("cursor %d after the first repair, want %d: just before its first retry at once", c, first-1)
	}
	// 1 succeeds; 2 still runs.
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipped' WHERE id = 1`)
	if sc, err := f.r.Settle(ctx, f.o, 0, false); err != nil || len(sc) != 1 || sc[0].Succeeded != 1 {
		t.Fatalf("settled %+v, %v; want 1 succeeded", sc, err)
	}
	if c, open := cursor(), eventOf("2"); c != open-1 {
		t.Fatalf("cursor %d, want %d: before the open case of 2", c, open-1)
	}
	if a := attemptOf(t, f.db, "orders", "1", "ship"); a.State != AttemptSucceeded || a.Attempt != 1 {
		t.Fatalf("instance 1 settled: %+v, want its row succeeded after 1 retry", a)
	}
	st, err := f.r.RetryStats(ctx)
	if err != nil || len(st) != 1 || st[0].Instances != 2 || st[0].Scheduled != 2 || st[0].Succeeded != 1 {
		t.Fatalf("stats %+v, %v; want 2 instances (one open case), 2 retries, 1 succeeded", st, err)
	}
	// Past the horizon, 2's case goes on in a row.
	f.r.caseHorizon = 0
	if _, err := f.r.Settle(ctx, f.o, 0, false); err != nil {
		t.Fatal(err)
	}
	a := attemptOf(t, f.db, "orders", "2", "ship")
	if a.State != AttemptRetried || a.Attempt != 1 || a.Reason != "retry 1 still runs (in Paid): followed in this row" {
		t.Fatalf("instance 2 after the horizon: %+v, want a retried row", a)
	}
	var since, made time.Time
	if err := f.db.QueryRow(`SELECT a.since, e.at FROM enginehealth.attempts a, enginehealth.events e
		WHERE a.instance = '2' AND e.id = $1`, eventOf("2")).Scan(&since, &made); err != nil || !since.Equal(made) {
		t.Fatalf("instance 2's row since %v, want its retry's %v (%v)", since, made, err)
	}
	if c := cursor(); c < eventOf("2") {
		t.Fatalf("cursor %d, want past 2's retry (%d)", c, eventOf("2"))
	}
	// The row settles as any retried row; stats count each instance once.
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipped' WHERE id = 2`)
	if sc, err := f.r.Settle(ctx, f.o, 0, false); err != nil || len(sc) != 1 || sc[0].Succeeded != 1 {
		t.Fatalf("settled %+v, %v; want 2's row succeeded", sc, err)
	}
	st, err = f.r.RetryStats(ctx)
	if err != nil || len(st) != 1 || st[0].Instances != 2 || st[0].Scheduled != 2 || st[0].Succeeded != 2 {
		t.Fatalf("stats %+v, %v; want 2 instances, 2 retries, 2 succeeded", st, err)
	}
}

// TestUpgradeKeepsAttemptsRows: a database of the release before retries
// at once went rowless (schema 16: waiting, held, retried and exhausted
// attempts rows, with the repair events that release wrote beside them)
// migrated to this one keeps the rows' meaning: the due retry runs, the
// hold waits, the retried row of a shipped instance settles as succeeded,
// and once only (the old events are behind the settle cursor), an
// instance with a retried row interrupted again counts on from its row,
// the exhausted one stays so; the statistics count each instance once.
func TestUpgradeKeepsAttemptsRows(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffFixed}})
	ctx := context.Background()
	// Back to schema 16.
	f.db.MustExec(`DROP TABLE enginehealth.settle_cursors`)
	f.db.MustExec(`DELETE FROM enginehealth.schema_migrations WHERE version = $1`, EventRetriesSchema)
	// 1 waits for a retry now due, 2 is held, 3 was retried and shipped,
	// 4 was retried and is interrupted again, 5 is exhausted.
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id IN (1, 2, 4, 5); UPDATE app.orders SET status = 'Shipped' WHERE id = 3;
		INSERT INTO enginehealth.attempts (workflow, instance, task, attempt, state, cause, left_in, next_attempt_at, last_reason) VALUES
			('orders', '1', 'ship', 0, 'waiting', 'interrupt', 'Shipping', now() - interval '1s', 'interrupted: retry 1 of 3'),
			('orders', '2', 'ship', 1, 'held', 'interrupt', 'Shipping', NULL, 'interrupted: held for an operator'),
			('orders', '3', 'ship', 1, 'retried', 'interrupt', 'Shipping', NULL, 'interrupted: retry 1 of 3, at once'),
			('orders', '4', 'ship', 2, 'retried', 'interrupt', 'Shipping', NULL, 'interrupted: retry 2 of 3, at once'),
			('orders', '5', 'ship', 3, 'exhausted', 'interrupt', 'Shipping', NULL, 'interrupted: exhausted after 3 retries');
		INSERT INTO enginehealth.events (kind, actor, workflow, instance, task, from_state, to_state, attempt) VALUES
			('instance_repaired', 'm', 'orders', '3', 'ship', 'Shipping', 'Paid', 1),
			('instance_repaired', 'm', 'orders', '4', 'ship', 'Shipping', 'Paid', 1),
			('instance_repaired', 'm', 'orders', '4', 'ship', 'Shipping', 'Paid', 2)`)
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipped' WHERE id = 5`)
	applied, err := pgdb.Migrate(ctx, f.db, pgdb.DefaultSchema)
	if err != nil || !slices.Equal(applied, []int{EventRetriesSchema}) {
		t.Fatalf("migrated %v, %v; want %d", applied, err, EventRetriesSchema)
	}
	res := f.check()
	if res.Tasks[0].Retried != 1 {
		t.Fatalf("pass: %+v, want 1 retried (instance 4)", res.Tasks[0])
	}
	sc, err := f.r.Settle(ctx, f.o, 0, true)
	if err != nil || len(sc) != 1 || sc[0].Succeeded != 1 {
		t.Fatalf("settled %+v, %v; want 3's row succeeded", sc, err)
	}
	for id, want := range map[string]struct {
		state   string
		attempt int
	}{"1": {AttemptRetried, 1}, "2": {AttemptHeld, 1}, "3": {AttemptSucceeded, 1}, "4": {AttemptRetried, 3}, "5": {AttemptExhausted, 3}} {
		if a := attemptOf(t, f.db, "orders", id, "ship"); a.State != want.state || a.Attempt != want.attempt {
			t.Errorf("instance %s: %+v, want %s after %d", id, a, want.state, want.attempt)
		}
	}
	if s := statusOf(t, f.db, 1); s != "Paid" {
		t.Errorf("instance 1 in %s, want Paid (its due retry ran)", s)
	}
	st, err := f.r.RetryStats(ctx)
	if err != nil || len(st) != 1 || st[0].Instances != 5 || st[0].Succeeded != 1 || st[0].HoldsOpen != 1 || st[0].Exhausted != 1 {
		t.Fatalf("stats %+v, %v; want 5 instances, 1 succeeded, 1 held, 1 exhausted", st, err)
	}
}

// TestManualRetryKeepsTheCount: an operator's retry of an instance whose
// retries at once wrote no row writes its row with their count: the next
// interruption counts on from it (manual retries are not counted).
func TestManualRetryKeepsTheCount(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 2, Backoff: Backoff{Kind: BackoffFixed}})
	for range 2 {
		f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 1`)
		f.check()
	}
	f.db.MustExec(`UPDATE app.orders SET status = 'ShipFailed' WHERE id = 1`)
	res, err := f.r.Retry(context.Background(), f.o, ManualRetry{Ref: Ref{"orders", "1"}, By: audit.By{Actor: "ops"}})
	if err != nil || res.Attempts != 2 || res.Manual != 1 {
		t.Fatalf("manual retry: %+v, %v; want after 2 retries, manual 1", res, err)
	}
	if a := attemptOf(t, f.db, "orders", "1", "ship"); a.State != AttemptRetried || a.Attempt != 2 || a.Manual != 1 {
		t.Fatalf("row after the manual retry: %+v", a)
	}
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 1`)
	if r := f.check(); r.Tasks[0].Exhausted != 1 {
		t.Fatalf("interrupted after the manual retry: %+v, want exhausted after 2", r.Tasks[0])
	}
}

// TestSettleReadsOpenCasesAgain: a master's settle pass reads again only
// the cases of retries at once its last pass left open, and the events
// written since, not every event after a cursor held back by the oldest
// open case (a case that runs long kept every pass reading the whole
// window, 2 s a pass at 500k events in a review); what it closes is what
// a pass reading the whole window closes, once. Another repairer (a new
// master) reads the whole window once; a failed pass leaves the next to
// read from the cursor.
func TestSettleReadsOpenCasesAgain(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffFixed}})
	ctx := context.Background()
	f.db.MustExec(`INSERT INTO app.orders (status) SELECT 'Shipping' FROM generate_series(1, 40)`)
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipping'`)
	var ids []int64
	if err := f.db.Select(&ids, `SELECT id FROM app.orders ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	first, middle := ids[0], ids[len(ids)/2]
	if res := f.check(); res.Tasks[0].Retried != int64(len(ids)) {
		t.Fatalf("repair: %+v, want %d retried at once", res.Tasks[0], len(ids))
	}
	// settle runs a pass of r and returns what it closed and how many
	// events it read.
	settle := func(r *Repairer) (SettleCounts, int) {
		t.Helper()
		looked := -1
		r.onSettleEvents = func(_, _ string, n int) { looked = n }
		defer func() { r.onSettleEvents = nil }()
		sc, err := r.Settle(ctx, f.o, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range sc {
			return c, looked
		}
		return SettleCounts{}, looked
	}
	// All but the first and the middle one succeed: the first holds the
	// cursor back.
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipped' WHERE id <> ALL ($1)`, pq.Array([]int64{first, middle}))
	if sc, n := settle(f.r); sc.Succeeded != int64(len(ids)-2) || n != len(ids) {
		t.Fatalf("first pass: %+v after reading %d events, want %d succeeded of %d", sc, n, len(ids)-2, len(ids))
	}
	if sc, n := settle(f.r); sc.Succeeded != 0 || n != 2 {
		t.Fatalf("second pass: %+v after reading %d events, want none closed of the 2 open cases, read again alone", sc, n)
	}
	// New cases: read with the open ones.
	f.db.MustExec(`INSERT INTO app.orders (status) SELECT 'Shipping' FROM generate_series(1, 5)`)
	if res := f.check(); res.Tasks[0].Retried != 5 {
		t.Fatalf("repair of 5 more: %+v", res.Tasks[0])
	}
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipped' WHERE id = $1`, middle)
	if sc, n := settle(f.r); sc.Succeeded != 1 || n != 2+5 {
		t.Fatalf("third pass: %+v after reading %d events, want the middle one closed, of 2 open and 5 new", sc, n)
	}
	// A new master reads every event after the cursor, once, and closes
	// nothing twice.
	other := testkit.Must(New(f.r.cfg))
	if sc, n := settle(other); sc.Succeeded != 0 || n != len(ids)+5 {
		t.Fatalf("another repairer's pass: %+v after reading %d events, want nothing closed of the %d after the cursor", sc, n, len(ids)+5)
	}
	if sc, n := settle(other); sc.Succeeded != 0 || n != 6 {
		t.Fatalf("its second pass: %+v after reading %d events, want the 6 open cases alone", sc, n)
	}
	var closed int
	if err := f.db.Get(&closed, `SELECT count(*) FROM enginehealth.events WHERE kind = 'retry_succeeded'`); err != nil || closed != len(ids)-1 {
		t.Fatalf("%d cases closed (%v), want %d, each once", closed, err, len(ids)-1)
	}
	// A pass that fails (its office deposed mid-pass: here, a stale
	// term) keeps nothing: the next reads from the cursor.
	f.r.openCases[[2]string{"orders", "ship"}] = openCases{term: f.o.Term + 1, after: 0, seen: 1 << 40, ids: []int64{1}}
	if _, n := settle(f.r); n != len(ids)+5 {
		t.Fatalf("a pass whose open cases are another office's read %d events, want the %d after the cursor", n, len(ids)+5)
	}
	// Past the horizon the open cases go on in rows; the cursor passes
	// them, and the next pass reads nothing.
	f.r.caseHorizon = 0
	if _, n := settle(f.r); n != 6 {
		t.Fatalf("pass past the horizon read %d events, want the 6 open cases", n)
	}
	if _, n := settle(f.r); n != -1 && n != 0 {
		t.Fatalf("the pass after it read %d events, want none", n)
	}
}
