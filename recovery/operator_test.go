package recovery

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
)

// eventsOf returns the kind, actor (and via), term and reason of
// instance id's events.
func (f policyFixture) eventsOf(t *testing.T, id string) []string {
	t.Helper()
	var es []string
	if err := f.db.Select(&es, `SELECT kind || '|' || coalesce(actor, '') || coalesce(' via ' || via, '') || '|' || coalesce(term::text, '') || '|' || reason
		FROM enginehealth.event_log WHERE workflow = 'orders' AND instance = $1 ORDER BY id`, id); err != nil {
		t.Fatal(err)
	}
	return es
}

// TestHoldDecisions: held instances are listed; holds retry sends the
// named one back to begin (a manual retry, not one of max_attempts) and
// holds fail --all fails the rest, closing as cancelled the hold of an
// instance someone else moved; each decision is an event naming the
// operator; a repeated decision finds no hold.
func TestHoldDecisions(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyHold})
	ctx := context.Background()
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipping', last_error = 'carrier timeout' WHERE id IN (1, 3, 4)`)
	if res := f.check(); res.Tasks[0].Held != 3 {
		t.Fatalf("first pass: %+v", res.Tasks[0])
	}
	hs, err := f.r.Holds(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 3 || hs[0].State != "Shipping" || hs[0].Task != "ship" || hs[0].LastError == nil || *hs[0].LastError != "carrier timeout" {
		t.Fatalf("holds: %+v", hs)
	}
	if _, err := f.r.Holds(ctx, "nope", 0); !errors.Is(err, ErrScope) {
		t.Fatalf("holds of an unknown workflow: %v", err)
	}
	// The console's filtered lists: each filter keeps what it says, and
	// the count is of every match, whatever the limit.
	f.db.MustExec(`UPDATE enginehealth.attempts SET last_node = 'n9', nodes = '{n8,n9}', since = now() - interval '2 hours' WHERE instance = '4'`)
	for _, c := range []struct {
		f     ParkedFilter
		total int64
		first string
	}{
		{ParkedFilter{State: AttemptHeld}, 3, "4"},
		{ParkedFilter{State: AttemptHeld, Limit: 1}, 3, "4"},
		{ParkedFilter{State: AttemptHeld, Workflow: "orders", Task: "ship", Cause: CauseInterrupt}, 3, "4"},
		{ParkedFilter{State: AttemptHeld, Node: "n8"}, 1, "4"},
		{ParkedFilter{State: AttemptHeld, OlderThan: time.Hour}, 1, "4"},
		{ParkedFilter{State: AttemptHeld, Task: "pay"}, 0, ""},
		{ParkedFilter{State: AttemptHeld, Cause: CauseFailure}, 0, ""},
		{ParkedFilter{State: AttemptWaiting}, 0, ""},
	} {
		ps, total, err := f.r.Parked(ctx, c.f)
		first := ""
		if len(ps) > 0 {
			first = ps[0].Instance
		}
		if err != nil || total != c.total || len(ps) != min(int(c.total), cmp.Or(c.f.Limit, DefaultHoldsLimit)) || first != c.first {
			t.Errorf("Parked(%+v): %d rows of %d, first %q, %v; want %d, first %q", c.f, len(ps), total, first, err, c.total, c.first)
		}
	}
	if _, _, err := f.r.Parked(ctx, ParkedFilter{State: AttemptHeld, Cause: "whim"}); !errors.Is(err, ErrScope) {
		t.Errorf("an unknown cause: %v", err)
	}

	// "01" names row 1, whose hold is keyed "1".
	res, err := f.r.DecideHolds(ctx, f.o, HoldDecision{Action: DecideRetry, Instances: []Ref{{"orders", "01"}},
		By: audit.By{Actor: "ops (operator)", Via: "n2"}, Reason: "carrier fixed"})
	if err != nil || res.Decided != 1 || len(res.NotHeld) != 0 || len(res.Cancelled) != 0 {
		t.Fatalf("holds retry orders/1: %+v, %v", res, err)
	}
	if s := statusOf(t, f.db, 1); s != "Paid" {
		t.Fatalf("released instance in %s, want Paid", s)
	}
	if a := attemptOf(t, f.db, "orders", "1", "ship"); a.State != AttemptRetried || a.Attempt != 0 || a.Manual != 1 {
		t.Fatalf("released instance's attempts row: %+v", a)
	}
	es := f.eventsOf(t, "1")
	if last := es[len(es)-1]; !strings.HasPrefix(last, "hold_decided|ops (operator) via n2|") || !strings.HasSuffix(last, "hold released by an operator: carrier fixed") {
		t.Fatalf("events of orders/1: %q", es)
	}

	// Someone moves instance 3 meanwhile; fail all the rest. The
	// decision is logged: at info with its events' fields and counts, at
	// debug per instance.
	f.db.MustExec(`UPDATE app.orders SET status = 'Cancelled' WHERE id = 3`)
	var logs strings.Builder
	f.r.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	res, err = f.r.DecideHolds(ctx, f.o, HoldDecision{Action: DecideFail, All: true, Workflow: "orders", By: audit.By{Actor: "ops"}, Reason: "gave up"})
	if err != nil || res.Decided != 1 || len(res.Cancelled) != 1 || res.Cancelled[0].Instance != "3" ||
		!strings.Contains(res.Cancelled[0].Reason, "hold cancelled: instance moved to Cancelled by someone else") {
		t.Fatalf("holds fail --all: %+v, %v", res, err)
	}
	for _, want := range []string{
		`level=INFO msg="holds decided" decision=fail moved=1 cancelled=1 event.kind=hold_decided event.actor=ops event.term=`,
		` event.workflow=orders event.task=ship event.from_state=Shipping event.to_state=ShipFailed event.reason="hold failed by an operator: gave up"`,
		`level=DEBUG msg="hold decided" event.kind=hold_decided event.actor=ops event.term=`,
		` event.instance=4 event.task=ship event.from_state=Shipping event.to_state=ShipFailed event.reason="hold failed by an operator: gave up"`,
		` event.instance=3 event.task=ship event.from_state=Shipping event.to_state="" event.reason="hold cancelled: instance moved to Cancelled by someone else"`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if s := statusOf(t, f.db, 4); s != "ShipFailed" {
		t.Fatalf("failed hold in %s", s)
	}
	if a := attemptOf(t, f.db, "orders", "4", "ship"); a.State != AttemptFailed {
		t.Fatalf("failed hold's attempts row: %+v", a)
	}
	if s := statusOf(t, f.db, 3); s != "Cancelled" {
		t.Fatalf("moved instance changed to %s", s)
	}

	// The same request again: nothing is held any more.
	res, err = f.r.DecideHolds(ctx, f.o, HoldDecision{Action: DecideRetry, Instances: []Ref{{"orders", "1"}}, By: audit.By{Actor: "ops"}})
	if err != nil || res.Decided != 0 || !slices.Equal(res.NotHeld, []Ref{{"orders", "1"}}) {
		t.Fatalf("repeated holds retry: %+v, %v", res, err)
	}
	if hs, _ := f.r.Holds(ctx, "", 0); len(hs) != 0 {
		t.Fatalf("holds left: %+v", hs)
	}
	// The released instance is interrupted again: held again, its manual
	// retry kept.
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 1`)
	f.check()
	if a := attemptOf(t, f.db, "orders", "1", "ship"); a.State != AttemptHeld || a.Manual != 1 {
		t.Fatalf("held again: %+v", a)
	}
	for _, bad := range []HoldDecision{
		{Action: "maybe", All: true},
		{Action: DecideRetry},
		{Action: DecideRetry, All: true, Instances: []Ref{{"orders", "1"}}},
		{Action: DecideRetry, Instances: []Ref{{"nope", "1"}}},
	} {
		if _, err := f.r.DecideHolds(ctx, f.o, bad); !errors.Is(err, ErrScope) {
			t.Errorf("DecideHolds(%+v): %v, want ErrScope", bad, err)
		}
	}
}

// TestManualRetry: an operator's retry moves a failed instance back to
// begin at once, counted as manual; it is refused (saying why) for an
// instance in begin, one that is claimed, one running in its interim
// state, and one whose scheduled retry is due soon; it replaces a retry
// scheduled later; unknown ids are not found.
func TestManualRetry(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 2,
		Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}})
	ctx := context.Background()
	retry := func(id string) (RetryResult, error) {
		return f.r.Retry(ctx, f.o, ManualRetry{Ref: Ref{"orders", id}, Soon: time.Minute, By: audit.By{Actor: "ops (operator)", Via: "n3"}, Reason: "replayed"})
	}
	// A failure the engine made, never seen by a policy.
	f.db.MustExec(`UPDATE app.orders SET status = 'ShipFailed' WHERE id = 5`)
	res, err := retry("5")
	if err != nil || res.From != "ShipFailed" || res.To != "Paid" || res.Manual != 1 || res.Attempts != 0 || res.Task != "ship" {
		t.Fatalf("retry orders/5: %+v, %v", res, err)
	}
	if s := statusOf(t, f.db, 5); s != "Paid" {
		t.Fatalf("orders/5 in %s", s)
	}
	if a := attemptOf(t, f.db, "orders", "5", "ship"); a.State != AttemptRetried || a.Manual != 1 || a.Attempt != 0 {
		t.Fatalf("attempts row: %+v", a)
	}
	if es := f.eventsOf(t, "5"); len(es) != 1 || !strings.HasPrefix(es[0], "manual_retry|ops (operator) via n3|") ||
		!strings.Contains(es[0], "manual retry 1 by an operator (not counted against max_attempts): replayed") {
		t.Fatalf("events: %q", es)
	}
	// The same request again.
	if _, err := retry("5"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "is in Paid") {
		t.Fatalf("repeated retry: %v", err)
	}
	// Claimed (even failed): refused.
	f.db.MustExec(`UPDATE app.orders SET status = 'ShipFailed' WHERE id = 6;
		INSERT INTO app.orders_claim VALUES (6, 'n9', 'tok', now(), now() + interval '1h')`)
	if _, err := retry("6"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "claimed by node n9 until") {
		t.Fatalf("claimed: %v", err)
	}
	// Waiting for a retry an hour away: replaced.
	f.check()
	if a := attemptOf(t, f.db, "orders", "1", "ship"); a.State != AttemptWaiting {
		t.Fatalf("orders/1: %+v", a)
	}
	res, err = retry("1")
	if err != nil || !strings.HasPrefix(res.Replaced, "retry 1 scheduled at ") || statusOf(t, f.db, 1) != "Paid" {
		t.Fatalf("retry of a waiting instance: %+v, %v", res, err)
	}
	if a := attemptOf(t, f.db, "orders", "1", "ship"); a.State != AttemptRetried || a.Manual != 1 || a.Attempt != 0 || a.DelayMS != nil {
		t.Fatalf("replaced schedule: %+v", a)
	}
	// Waiting for a retry due within Soon: refused.
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 1`)
	f.check()
	f.db.MustExec(`UPDATE enginehealth.attempts SET next_attempt_at = now() + interval '5s' WHERE instance = '1'`)
	for _, id := range []string{"1", "01", " 1"} { // the id as typed does not get around the guard
		if _, err := retry(id); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "retry 1 is scheduled at") {
			t.Fatalf("retry %q due soon: %v", id, err)
		}
	}
	// Running (interim, not parked): refused.
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 7`)
	if _, err := retry("7"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "interim state of task ship") {
		t.Fatalf("interim: %v", err)
	}
	for _, id := range []string{"999", "abc"} {
		if _, err := retry(id); !errors.Is(err, ErrNoInstance) {
			t.Errorf("retry %s: %v, want ErrNoInstance", id, err)
		}
	}
	if _, err := f.r.Retry(ctx, f.o, ManualRetry{Ref: Ref{"orders", "5"}, Task: "nope"}); !errors.Is(err, ErrScope) {
		t.Errorf("unknown task: %v", err)
	}
}

// TestInstanceView: an instance's view holds its state, its claim, its
// attempts row and its events in order; an instance nothing is known of
// is not found, whatever its id looks like.
func TestInstanceView(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 2,
		Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}})
	ctx := context.Background()
	f.db.MustExec(`INSERT INTO app.orders_claim VALUES (1, 'n7', 'tok1', now() - interval '1h', now() - interval '1s')`)
	f.check()
	v, err := f.r.Instance(ctx, Ref{"orders", "1"}, InstanceParams{})
	if err != nil {
		t.Fatal(err)
	}
	if v.State == nil || *v.State != "Shipping" || v.Claim != nil || len(v.Attempts) != 1 || v.Truncated {
		t.Fatalf("view of orders/1: %+v", v)
	}
	if a := v.Attempts[0]; !a.InRetry || a.NextAttemptTime == nil || a.AttemptCount != 0 || a.LastNode == nil || *a.LastNode != "n7" {
		t.Fatalf("attempt of orders/1: %+v", a)
	}
	var kinds []string
	for _, e := range v.Events {
		kinds = append(kinds, string(e.Kind))
	}
	if strings.Join(kinds, " ") != "claim_expired retry_scheduled" || v.Events[1].Attempt == nil || *v.Events[1].Attempt != 1 {
		t.Fatalf("events of orders/1: %v", kinds)
	}
	if v, err := f.r.Instance(ctx, Ref{"orders", "1"}, InstanceParams{Limit: 1}); err != nil || len(v.Events) != 1 || !v.Truncated {
		t.Fatalf("view with limit 1: %+v, %v", v, err)
	}
	// Newest first, paged back in time (the console's timeline).
	newest, err := f.r.Instance(ctx, Ref{"orders", "1"}, InstanceParams{Limit: 1, Newest: true})
	if err != nil || len(newest.Events) != 1 || !newest.Truncated || newest.Events[0].ID != v.Events[1].ID {
		t.Fatalf("newest first: %+v, %v", newest.Events, err)
	}
	older, err := f.r.Instance(ctx, Ref{"orders", "1"}, InstanceParams{Limit: 1, Newest: true, BeforeID: newest.Events[0].ID})
	if err != nil || len(older.Events) != 1 || older.Truncated || older.Events[0].ID != v.Events[0].ID {
		t.Fatalf("the page before: %+v (truncated %v), %v", older.Events, older.Truncated, err)
	}
	// A live claim is shown.
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 3;
		INSERT INTO app.orders_claim VALUES (3, 'n8', 'tok3', now(), now() + interval '1h')`)
	if v, err := f.r.Instance(ctx, Ref{"orders", "3"}, InstanceParams{}); err != nil || v.Claim == nil || v.Claim.Node != "n8" || v.Claim.Expired {
		t.Fatalf("view of a claimed instance: %+v, %v", v, err)
	}
	for _, id := range []string{"999", "abc", "1 OR 1=1"} {
		if _, err := f.r.Instance(ctx, Ref{"orders", id}, InstanceParams{}); !errors.Is(err, ErrNoInstance) {
			t.Errorf("view of %q: %v, want ErrNoInstance", id, err)
		}
	}
	if _, err := f.r.Instance(ctx, Ref{"nope", "1"}, InstanceParams{}); !errors.Is(err, ErrScope) {
		t.Errorf("unknown workflow: %v", err)
	}
}

// TestRetryStats: per task, the retries made, the instances that reached
// an end state after their retry, those exhausted, and the success rate
// among the instances whose retrying ended.
func TestRetryStats(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 1, Backoff: Backoff{Kind: BackoffFixed}})
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id IN (1, 3, 4)`)
	if res := f.check(); res.Tasks[0].Retried != 3 {
		t.Fatalf("first pass: %+v", res.Tasks[0])
	}
	// The engine ships 1; 3 is interrupted again (exhausted); 4 waits in
	// begin.
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipped' WHERE id = 1; UPDATE app.orders SET status = 'Shipping' WHERE id = 3`)
	f.check()
	if _, err := f.r.Retry(context.Background(), f.o, ManualRetry{Ref: Ref{"orders", "3"}, By: audit.By{Actor: "ops"}}); err != nil {
		t.Fatal(err)
	}
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 3`)
	f.check()
	stats, err := f.r.RetryStats(context.Background())
	if err != nil || len(stats) != 1 {
		t.Fatalf("stats: %+v, %v", stats, err)
	}
	s := stats[0]
	if s.Workflow != "orders" || s.Task != "ship" || s.Instances != 3 || s.Retried != 3 || s.Scheduled != 3 || s.Manual != 1 ||
		s.Succeeded != 1 || s.Exhausted != 1 || s.Waiting != 0 || s.SuccessRate == nil || *s.SuccessRate != 0.5 {
		t.Fatalf("stats: %+v", s)
	}
}

// TestRetryStatsCancelledIsNotSuccess: a retry that never ran because
// someone else finished its instance while it waited (closed by the
// sweep, or found so when it fell due: retry_cancelled "reached end
// state", attempts row succeeded) is counted as cancelled, not as
// succeeded, and the success rate counts only retries that ran: those
// that then succeeded over those that then succeeded, exhausted or failed
// (a non_retryable failure that no retry preceded is not one), nil when
// no retry ran (outside run). (The API's TestRetryStatsJSON checks the
// same in the JSON it sends: every field, cancelled apart, the rate null.)
func TestRetryStatsCancelledIsNotSuccess(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 2, NonRetryable: []string{"fatal"},
		Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}})
	ctx := context.Background()
	stats := func() RetryStats {
		t.Helper()
		st, err := f.r.RetryStats(ctx)
		if err != nil || len(st) != 1 {
			t.Fatalf("stats: %+v, %v", st, err)
		}
		return st[0]
	}
	// 1 and 2 wait for a retry and are finished by someone else; 4 fails
	// at once (non_retryable).
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id IN (1, 2, 4); UPDATE app.orders SET last_error = 'fatal: disk' WHERE id = 4`)
	if res := f.check(); res.Tasks[0].Scheduled != 2 || res.Tasks[0].Failed != 1 {
		t.Fatalf("first pass: %+v", res.Tasks[0])
	}
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipped' WHERE id IN (1, 2)`)
	if _, err := f.r.Settle(ctx, f.o, 0, true); err != nil { // the sweep closes them
		t.Fatal(err)
	}
	for _, id := range []string{"1", "2"} {
		if a := attemptOf(t, f.db, "orders", id, "ship"); a.State != AttemptSucceeded || a.Reason != "retry cancelled: the instance reached end state Shipped" {
			t.Fatalf("attempts row of %s: %+v", id, a)
		}
	}
	s := stats()
	if s.Instances != 3 || s.Succeeded != 0 || s.Failed != 1 || s.Waiting != 0 || s.SuccessRate != nil {
		t.Fatalf("no retry ran: %+v, want 0 succeeded, rate null", s)
	}
	if s.Cancelled != 2 {
		t.Fatalf("no retry ran: %+v, want cancelled 2", s)
	}

	// 3 is finished by someone else while its retry waits and found so
	// when it falls due; 5 and 6 are retried: 5 succeeds, 6 fails.
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id IN (3, 5, 6)`)
	f.check()
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipped' WHERE id = 3;
		UPDATE enginehealth.attempts SET next_attempt_at = now() - interval '1s', since = now() - interval '1h' WHERE instance IN ('3', '5', '6')`)
	if res := f.check(); statusOf(t, f.db, 5) != "Paid" || statusOf(t, f.db, 6) != "Paid" {
		t.Fatalf("due retries: %+v", res)
	}
	if a := attemptOf(t, f.db, "orders", "3", "ship"); a.State != AttemptSucceeded || a.Reason != "retry cancelled: the instance reached end state Shipped" {
		t.Fatalf("attempts row of 3: %+v", a)
	}
	// 5 reached its end state, not settled yet: it counts already.
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipped' WHERE id = 5; UPDATE app.orders SET status = 'ShipFailed' WHERE id = 6`)
	if s := stats(); s.Succeeded != 1 || s.Cancelled != 3 || s.SuccessRate == nil || *s.SuccessRate != 1 {
		t.Fatalf("before settling: %+v", s)
	}
	if _, err := f.r.Settle(ctx, f.o, 0, false); err != nil {
		t.Fatal(err)
	}
	s = stats()
	if s.Instances != 6 || s.Retried != 2 || s.Succeeded != 1 || s.Cancelled != 3 || s.Failed != 2 || s.Exhausted != 0 ||
		s.SuccessRate == nil || *s.SuccessRate != 0.5 {
		t.Fatalf("settled: %+v, want 1 succeeded of 2 retries that ran (rate 0.5), 3 cancelled", s)
	}
}

// TestManualRetryWhilePausedAndWhileLocked: a retry that is due (or
// overdue) is left to the check, unless the cluster is paused (the check
// runs no retry then); and a manual retry never waits for an attempts row
// the check holds (the check locks attempts rows before instances, a
// manual retry instances first: waiting would deadlock) but is refused at
// once, to be tried again.
func TestManualRetryWhilePausedAndWhileLocked(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3,
		Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}})
	ctx := context.Background()
	if res := f.check(); res.Tasks[0].Scheduled != 1 {
		t.Fatalf("%+v", res.Tasks[0])
	}
	f.db.MustExec(`UPDATE enginehealth.attempts SET next_attempt_at = now() - interval '10s'`) // overdue
	m := ManualRetry{Ref: Ref{"orders", "1"}, Soon: time.Second, By: audit.By{Actor: "ops (operator)"}}
	if _, err := f.r.Retry(ctx, f.o, m); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "the check runs it") {
		t.Fatalf("overdue retry, not paused: %v, want refused: the check runs it", err)
	}
	// The check holds the attempts row (a due-retry batch between its
	// lock and its move).
	tx := f.db.MustBegin()
	tx.MustExec(`SELECT 1 FROM enginehealth.attempts WHERE workflow = 'orders' AND instance = '1' FOR UPDATE`)
	m.Paused = true
	// (Waiting for the lock, this would hang: tx ends only below.)
	_, err := f.r.Retry(ctx, f.o, m)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "the check is deciding this instance right now") {
		t.Fatalf("attempts row locked: %v, want refused at once", err)
	}
	tx.Rollback()
	if res, err := f.r.Retry(ctx, f.o, m); err != nil || res.To != "Paid" || statusOf(t, f.db, 1) != "Paid" {
		t.Fatalf("overdue retry while paused: %+v %v, want moved to Paid", res, err)
	}
}
