package recovery

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/leader"
)

// attemptRow is an attempts row as tests read it.
type attemptRow struct {
	Attempt  int     `db:"attempt"`
	Manual   int     `db:"manual"`
	State    string  `db:"state"`
	LeftIn   string  `db:"left_in"`
	Nodes    string  `db:"nodes"`
	Reason   string  `db:"last_reason"`
	DelayMS  *int64  `db:"delay_ms"`
	LastNode *string `db:"last_node"`
}

// attemptOf returns the attempts row of instance id in task, or, when it
// has none, what the events of its retries at once say (eventCases).
func attemptOf(t *testing.T, db *sqlx.DB, wf, id, task string) attemptRow {
	t.Helper()
	var a attemptRow
	err := db.Get(&a, `SELECT attempt, manual, state, left_in, array_to_string(nodes, ',') AS nodes, last_reason, last_node,
			(extract(epoch FROM next_attempt_at - since) * 1000)::bigint AS delay_ms
		FROM enginehealth.attempts WHERE workflow = $1 AND instance = $2 AND task = $3`, wf, id, task)
	if !errors.Is(err, sql.ErrNoRows) {
		if err != nil {
			t.Fatalf("attempts row of %s/%s %s: %v", wf, id, task, err)
		}
		return a
	}
	cases, err := eventCases(context.Background(), db, newStatements("enginehealth"), wf, id)
	if err != nil {
		t.Fatalf("retries at once of %s/%s %s: %v", wf, id, task, err)
	}
	for _, c := range cases {
		if c.Task == task {
			return attemptRow{Attempt: c.AttemptCount, Manual: c.Manual, State: c.State, LeftIn: c.LeftIn,
				Nodes: strings.Join(c.Nodes, ","), Reason: c.LastReason, LastNode: c.LastNode}
		}
	}
	t.Fatalf("%s/%s %s: no attempts row, no retry at once", wf, id, task)
	return a
}

func statusOf(t *testing.T, db *sqlx.DB, id int) string {
	t.Helper()
	var s string
	if err := db.Get(&s, `SELECT status FROM app.orders WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	return s
}

// policyFixture is a repairer whose orders.ship task has a policy.
type policyFixture struct {
	r  *Repairer
	db *sqlx.DB
	o  *leader.Office
	// pass runs a recovery run (interruptions and failures) without the
	// due retries, so what it scheduled can be read before it falls due.
	pass func() Result
	// check runs pass and then the due retries.
	check func() Result
}

// policySetup: one unclaimed interrupted order (id 1) whose ship task has
// policy p; the other orders are shipped.
func policySetup(t *testing.T, p Policy) policyFixture {
	t.Helper()
	r, db, o := setup(t)
	db.MustExec(`DELETE FROM app.orders_claim; UPDATE app.orders SET status = 'Shipped' WHERE id > 1;
		ALTER TABLE app.orders ADD COLUMN last_error text`)
	r.cfg.Workflows[0].Tasks = slices.Clone(r.cfg.Workflows[0].Tasks) // not the shared fixture's
	r.cfg.Workflows[0].Tasks[0].OnInterrupt = p
	r.cfg.Workflows[0].ErrorColumn = "last_error"
	pass := func() Result {
		t.Helper()
		res, err := r.Recover(context.Background(), o, TriggerManual, Scope{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		fs, err := r.Failures(context.Background(), o, res.RunID)
		if err != nil {
			t.Fatal(err)
		}
		res.Tasks = append(res.Tasks, fs...)
		return res
	}
	check := func() Result {
		t.Helper()
		res := pass()
		if _, err := r.Due(context.Background(), o, res.RunID); err != nil {
			t.Fatal(err)
		}
		return res
	}
	return policyFixture{r, db, o, pass, check}
}

// TestRetryWithDelaysThenExhausted: an interrupted non-atomic instance
// under retry (max_attempts 3, exponential from 100ms, no jitter) waits
// where it was left for the computed delays 100, 200, 400 ms, goes back to
// begin three times, and is then failed for good as exhausted. No pass
// treats a waiting instance as a fresh interruption.
func TestRetryWithDelaysThenExhausted(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3,
		Backoff: Backoff{Kind: BackoffExponential, Base: 100 * time.Millisecond, MaxDelay: time.Hour}})
	db, check := f.db, f.check
	for k := 1; k <= 3; k++ {
		// Without the due retries: on a slow machine the same check would
		// already run a 100 ms retry (CI, 2026-11-25).
		res := f.pass()
		if res.Tasks[0].Scheduled != 1 {
			t.Fatalf("interruption %d: %+v, want a retry scheduled", k, res.Tasks[0])
		}
		a := attemptOf(t, db, "orders", "1", "ship")
		want := int64(100 << (k - 1))
		if a.State != AttemptWaiting || a.Attempt != k-1 || a.DelayMS == nil || *a.DelayMS != want || a.LeftIn != "Shipping" {
			t.Fatalf("interruption %d: %+v, want waiting %d ms after %d retries", k, a, want, k-1)
		}
		if s := statusOf(t, db, 1); s != "Shipping" {
			t.Fatalf("waiting instance in %q, want it left in Shipping", s)
		}
		// Passes before the delay do not touch it.
		if res := check(); res.Done() != 0 {
			t.Fatalf("a pass while the retry waits handled %+v", res.Tasks)
		}
		testkit.Eventually(t, 10*time.Second, "the retry to run", func() (bool, error) {
			check()
			return statusOf(t, db, 1) == "Paid", nil
		})
		if a := attemptOf(t, db, "orders", "1", "ship"); a.State != AttemptRetried || a.Attempt != k || a.Reason != fmt.Sprintf("interrupted: retry %d of 3", k) {
			t.Fatalf("after retry %d: %+v", k, a)
		}
		// The engine runs it again and is interrupted again.
		db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 1`)
	}
	res := check()
	if res.Tasks[0].Failed != 1 || res.Tasks[0].Exhausted != 1 || statusOf(t, db, 1) != "ShipFailed" {
		t.Fatalf("fourth interruption: %+v, status %s, want failed", res.Tasks[0], statusOf(t, db, 1))
	}
	a := attemptOf(t, db, "orders", "1", "ship")
	if a.State != AttemptExhausted || a.Attempt != 3 || !strings.Contains(a.Reason, "exhausted after 3 retries") {
		t.Fatalf("after exhaustion: %+v", a)
	}
	var kinds []string
	if err := db.Select(&kinds, `SELECT kind || ':' || coalesce(attempt::text, '-') FROM enginehealth.events
		WHERE workflow = 'orders' AND instance = '1' ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	want := "retry_scheduled:1 instance_retried:1 retry_scheduled:2 instance_retried:2 retry_scheduled:3 instance_retried:3 instance_repaired:3"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("events of instance 1:\n got %s\nwant %s", got, want)
	}
	// A run that ran a due retry planned it: "1 of 1 repaired", never
	// more done than planned.
	var over, dueRuns int
	if err := db.QueryRow(`SELECT count(*) FILTER (WHERE done > planned),
		count(*) FILTER (WHERE planned = 1 AND done = 1 AND EXISTS (SELECT 1 FROM enginehealth.events e WHERE e.run_id = r.id AND e.kind = 'instance_retried'))
		FROM enginehealth.runs r`).Scan(&over, &dueRuns); err != nil || over != 0 || dueRuns != 3 {
		t.Fatalf("%d runs did more than they planned, %d ran a due retry as planned (want 0 and 3; %v)", over, dueRuns, err)
	}
}

// TestAtomicPoisonInstance: an atomic task's default policy sends an
// interrupted instance back at once, and after DefaultAtomicMaxAttempts
// interruptions fails it, naming every node it was interrupted on.
func TestAtomicPoisonInstance(t *testing.T) {
	f := policySetup(t, Policy{})
	r, db, check := f.r, f.db, f.check
	r.cfg.Workflows[0].Tasks[0].AtomicInternal = true
	nodes := []string{"n1", "n2", "n3"}
	for k := 1; k <= DefaultAtomicMaxAttempts+1; k++ {
		// An engine on node n_k claims it and dies: the claim expires.
		db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 1`)
		db.MustExec(`INSERT INTO app.orders_claim VALUES (1, $1, 't', now() - interval '1h', now() - interval '1s')`, nodes[k%3])
		res := check()
		if res.ClaimsExpired != 1 {
			t.Fatalf("interruption %d: %+v", k, res)
		}
		if k <= DefaultAtomicMaxAttempts {
			if s := statusOf(t, db, 1); s != "Paid" || res.Tasks[0].Retried != 1 {
				t.Fatalf("interruption %d: %s %+v, want back to Paid at once", k, s, res.Tasks[0])
			}
		}
	}
	if s := statusOf(t, db, 1); s != "ShipFailed" {
		t.Fatalf("poison instance in %s, want ShipFailed", s)
	}
	a := attemptOf(t, db, "orders", "1", "ship")
	if a.State != AttemptExhausted || a.Attempt != DefaultAtomicMaxAttempts || a.Nodes != "n2,n3,n1" ||
		!strings.HasSuffix(a.Reason, "exhausted after 10 retries; interrupted on n2, n3, n1") {
		t.Fatalf("poison instance's attempts row: %+v", a)
	}
}

// TestHoldWaitsForOperator: a held instance stays where it was left, is
// not a fresh interruption to later passes.
func TestHoldWaitsForOperator(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyHold})
	db, check := f.db, f.check
	if res := check(); res.Tasks[0].Held != 1 {
		t.Fatalf("first pass: %+v", res.Tasks[0])
	}
	if res := check(); res.Done() != 0 {
		t.Fatalf("second pass handled the held instance again: %+v", res.Tasks[0])
	}
	if a := attemptOf(t, db, "orders", "1", "ship"); a.State != AttemptHeld || statusOf(t, db, 1) != "Shipping" {
		t.Fatalf("held: %+v in %s", a, statusOf(t, db, 1))
	}
}

// TestNonRetryableFailsAtOnce: an error text matching non_retryable fails
// the instance whatever the strategy.
func TestNonRetryableFailsAtOnce(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 5,
		Backoff: Backoff{Kind: BackoffFixed}, NonRetryable: []string{`^card declined`}})
	db, check := f.db, f.check
	db.MustExec(`UPDATE app.orders SET last_error = 'card declined: insufficient funds' WHERE id = 1`)
	if res := check(); res.Tasks[0].Failed != 1 || statusOf(t, db, 1) != "ShipFailed" {
		t.Fatalf("non-retryable: %+v in %s", res.Tasks[0], statusOf(t, db, 1))
	}
	if a := attemptOf(t, db, "orders", "1", "ship"); a.State != AttemptFailed || !strings.Contains(a.Reason, "non_retryable") {
		t.Fatalf("attempts row %+v", a)
	}
}

// TestNonRetryableWordBoundary: \b is a word boundary to Go (config
// check) and a backspace to PostgreSQL (the repair statement): the
// pattern is rewritten, so `\bfatal\b` fails "fatal: disk corrupted" at
// once and retries "nonfatal" (outside review: it was retried).
func TestNonRetryableWordBoundary(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 5,
		Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}, NonRetryable: []string{`\bfatal\b`}})
	db, check := f.db, f.check
	db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 2;
		UPDATE app.orders SET last_error = 'fatal: disk corrupted' WHERE id = 1;
		UPDATE app.orders SET last_error = 'nonfatal: try again' WHERE id = 2`)
	if res := check(); res.Tasks[0].Failed != 1 || res.Tasks[0].Scheduled != 1 {
		t.Fatalf("%+v, want one failed at once and one retry scheduled", res.Tasks[0])
	}
	if s1, s2 := statusOf(t, db, 1), statusOf(t, db, 2); s1 != "ShipFailed" || s2 != "Shipping" {
		t.Fatalf("fatal in %s, nonfatal in %s; want ShipFailed and left waiting in Shipping", s1, s2)
	}
}

// TestPGPatternMatchesAsGo: a pattern rewritten by PGPattern matches in
// PostgreSQL exactly the texts Go's regexp matches with the pattern as
// written, for the escapes the two read differently and those they share.
func TestPGPatternMatchesAsGo(t *testing.T) {
	db := pg.MigratedDB(t)
	patterns := []string{`\bfatal\b`, `\Bata`, `lost\z`, `^\w+: \d+`, `\Afatal`, `[[:upper:]]{3}\b`, `a\.b`, `\s\S`, `(?:dead|live)lock\b`, `x\\b`,
		`fatal.*deadlock`, `fatal[^!]*deadlock`, `^fatal.+$`, `[.]b`, `[]a]x`, `[^]a]x`, `(?i)FATAL`, `x[[:alpha:].]y`}
	texts := []string{"fatal: x", "nonfatal", "fatality", "data lost", "lost data", "E: 42", "DISK full", "a.b", "axb", "deadlock", "livelocked", `x\b`, "xb", "",
		"fatal: lock wait\ngoroutine 7: deadlock", "fatal: x\ndeadlock", "fatal: one line", "fatal:\n", "]x", "ax", "bx", "x.y", "xqy", "x\ny"}
	for _, pat := range patterns {
		re := regexp.MustCompile(pat)
		pgPat, err := PGPattern(pat)
		if err != nil {
			t.Fatalf("%s: %v", pat, err)
		}
		for _, text := range texts {
			var got bool
			if err := db.Get(&got, `SELECT $1::text ~ $2`, text, pgPat); err != nil {
				t.Fatalf("%s as %s: %v", pat, pgPat, err)
			}
			if want := re.MatchString(text); got != want {
				t.Errorf("%s (PostgreSQL: %s) on %q: PostgreSQL %v, Go %v", pat, pgPat, text, got, want)
			}
		}
	}
	for _, pat := range []string{`\Qa.b\E`, `\p{L}`, `\PL`, `\x41`, `\101`, `[\x41]`, `a\1`, `(?s)a.b`, `(?m)^x`, `a(?i)b`, `(?U)a+`, `(?P<n>x)`, `x[[.a.]]`, `x[[=a=]]`} {
		if _, err := PGPattern(pat); err == nil {
			t.Errorf("%s: rewritten, want refused", pat)
		}
	}
}

// TestMovedRetryIsCancelled: a due retry whose instance someone else moved
// meanwhile is cancelled with an event naming where it went; one that
// reached an end state says so.
func TestMovedRetryIsCancelled(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3,
		Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}})
	db, check := f.db, f.check
	db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id IN (2, 3)`)
	if res := check(); res.Tasks[0].Scheduled != 3 {
		t.Fatalf("%+v", res.Tasks[0])
	}
	db.MustExec(`UPDATE app.orders SET status = 'Cancelled' WHERE id = 1; UPDATE app.orders SET status = 'Shipped' WHERE id = 2`)
	db.MustExec(`UPDATE enginehealth.attempts SET next_attempt_at = now() - interval '1s', since = now() - interval '1h'`)
	check()
	if s := statusOf(t, db, 3); s != "Paid" {
		t.Fatalf("instance 3 in %s, want retried to Paid", s)
	}
	// An instance that reached an end state succeeded: a later case of
	// the task counts from 0.
	for id, want := range map[string]string{"1": "cancelled instance moved to Cancelled by someone else", "2": "succeeded the instance reached end state Shipped"} {
		if a := attemptOf(t, db, "orders", id, "ship"); a.State+" "+strings.TrimPrefix(a.Reason, "retry cancelled: ") != want || a.Attempt != 0 {
			t.Errorf("instance %s: %+v, want %s", id, a, want)
		}
	}
}

// TestSampleSQL: the delays a repair batch draws in SQL (sampleDelay) lie
// within the bounds of Delay for the same retry, and spread over them; a
// delay without randomness (no jitter, an interval of one point) is
// Delay's, without random().
func TestSampleSQL(t *testing.T) {
	db := pg.MigratedDB(t)
	for _, b := range []Backoff{
		{Kind: BackoffFixed, Base: time.Minute, MaxDelay: time.Hour, Jitter: 0.2},
		{Kind: BackoffExponential, Base: time.Second, MaxDelay: 10 * time.Second, Jitter: 0.5},
		{Kind: BackoffRandomizedExponential, Base: 35 * time.Second, MaxDelay: 24 * time.Hour},
		{Kind: BackoffRandomizedExponential, Base: 35 * time.Second, MaxDelay: 24 * time.Hour, Jitter: 0.3},
		{Kind: BackoffFibonacci, Base: time.Second, Jitter: 0.1},
		{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour},
		{Kind: BackoffExponential, Base: 1500 * time.Millisecond, MaxDelay: time.Minute},
	} {
		for _, k := range []int{1, 4, 10} {
			lo, hi, _ := b.interval(k)
			low, _ := b.Delay(k, func() float64 { return 0 })
			high, _ := b.Delay(k, func() float64 { return 1 })
			var got struct {
				Min float64 `db:"min"`
				Max float64 `db:"max"`
			}
			drawn := hi != lo || b.Jitter != 0
			sample, err := sampleDelay("s", drawn)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(sample, "random()") != drawn {
				t.Errorf("%s k=%d: drawn %v, but the SQL is %s", b.Kind, k, drawn, sample)
			}
			q := `SELECT min(d), max(d) FROM (SELECT ` + sample + ` AS d
				FROM (SELECT $1::float8 AS lo, $2::float8 AS hi, $3::float8 AS cap, $4::float8 AS jitter) s, generate_series(1, 2000)) x`
			if err := db.Get(&got, q, lo/1e6, hi/1e6, b.limit()/1e6, b.Jitter); err != nil {
				t.Fatal(err)
			}
			minMS, maxMS := float64(low)/1e6, float64(high)/1e6
			if got.Min < minMS-1e-6 || got.Max > maxMS+1e-6 {
				t.Errorf("%s k=%d: SQL drew [%v, %v] ms, Delay bounds [%v, %v]", b.Kind, k, got.Min, got.Max, minMS, maxMS)
			}
			if !drawn && (got.Min != minMS || got.Max != minMS) {
				t.Errorf("%s k=%d: SQL gave [%v, %v] ms, Delay %v", b.Kind, k, got.Min, got.Max, minMS)
			}
			if mid := (minMS + maxMS) / 2; maxMS > minMS && (got.Min > mid || got.Max < mid) {
				t.Errorf("%s k=%d: SQL drew [%v, %v] ms, not spread over [%v, %v]", b.Kind, k, got.Min, got.Max, minMS, maxMS)
			}
		}
	}
}

// TestWaitSecondsSQL: a scheduled retry's delay is said alike by the
// repair's SQL (batchSlots.Seconds, over the delay in milliseconds as the
// decision table holds it) and by Go (waitSuffix), half milliseconds
// rounded up on both sides.
func TestWaitSecondsSQL(t *testing.T) {
	db := pg.MigratedDB(t)
	for _, d := range []time.Duration{0, time.Millisecond / 2, 2500 * time.Microsecond, 1500500 * time.Microsecond, 2500500 * time.Microsecond,
		10000500 * time.Microsecond, 30 * time.Second, 72 * time.Hour, 1000*time.Hour + time.Millisecond/2, 30 * 24 * time.Hour} {
		var got string
		if err := db.Get(&got, `SELECT ' in ' || `+batchSlots{}.Seconds("$1::float8")+` || 's'`, float64(d)/1e6); err != nil {
			t.Fatal(err)
		}
		if want := waitSuffix(d); got != want {
			t.Errorf("%v: SQL says %q, Go %q", d, got, want)
		}
	}
}

// TestCatalogChecksPatterns: a non_retryable pattern Go accepts but
// PostgreSQL (which matches it) cannot use is named by CheckCatalog.
func TestCatalogChecksPatterns(t *testing.T) {
	_, db, _ := setup(t)
	wf := reports
	wf.Tasks = slices.Clone(reports.Tasks)
	wf.Tasks[0].OnInterrupt = Policy{Strategy: StrategyNone, NonRetryable: []string{`^timeout`, `E{256}`}}
	err := CheckCatalog(context.Background(), db, []Workflow{wf})
	var ce *CatalogError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || !strings.Contains(ce.Problems[0], "workflows[0].tasks[0].on_interrupt.non_retryable[1]: PostgreSQL cannot match") {
		t.Fatalf("CheckCatalog: %v", err)
	}
	wf.Tasks[0].OnInterrupt.NonRetryable = []string{`^timeout`, `E\d+`}
	if err := CheckCatalog(context.Background(), db, []Workflow{wf}); err != nil {
		t.Fatalf("CheckCatalog with patterns both accept: %v", err)
	}
}

// TestEffects: what config check prints for a policy, retry by retry,
// alike retries collapsed.
func TestEffects(t *testing.T) {
	send := orders.Tasks[0]
	send.OnInterrupt = Policy{Strategy: StrategyRetry, MaxAttempts: 3,
		Backoff: Backoff{Kind: BackoffExponential, Base: 30 * time.Second, MaxDelay: time.Hour, Jitter: 0.2}}
	atomic := reports.Tasks[0]
	fatal := send
	fatal.OnInterrupt.NonRetryable = []string{"^fatal:", "card declined"}
	held := send
	held.OnInterrupt = Policy{Strategy: StrategyHold, NonRetryable: []string{"^fatal:"}}
	// The final clamp to max_delay cuts the jitter short: the range
	// printed is the one drawn from, never above max_delay.
	clamped := send
	clamped.OnInterrupt = Policy{Strategy: StrategyRetry, MaxAttempts: 4,
		Backoff: Backoff{Kind: BackoffExponential, Base: time.Minute, MaxDelay: 5 * time.Minute, Jitter: 0.2}}
	wide := send
	wide.OnInterrupt = Policy{Strategy: StrategyRetry, MaxAttempts: 1,
		Backoff: Backoff{Kind: BackoffFixed, Base: 50 * time.Minute, MaxDelay: time.Hour, Jitter: 0.5}}
	// Past float overflow (30s·100^148 is finite, ·100 again is not) the
	// interval is still [lo, max_delay], never negative.
	huge := send
	huge.OnInterrupt = Policy{Strategy: StrategyRetry, MaxAttempts: 150,
		Backoff: Backoff{Kind: BackoffRandomizedExponential, Base: 30 * time.Second, Multiplier: 100, MaxDelay: time.Hour}}
	for _, c := range []struct {
		t    Task
		want string
	}{
		{send, "stays in Shipping, retry 1 of 3 in 30s±6s|stays in Shipping, retry 2 of 3 in 1m0s±12s|stays in Shipping, retry 3 of 3 in 2m0s±24s|→ ShipFailed (exhausted after 3 retries)"},
		{atomic, "→ Queued, retries 1–10 of 10 at once|→ Failed (exhausted after 10 retries)"},
		{orders.Tasks[0], "→ ShipFailed"},
		{fatal, "stays in Shipping, retry 1 of 3 in 30s±6s|stays in Shipping, retry 2 of 3 in 1m0s±12s|stays in Shipping, retry 3 of 3 in 2m0s±24s|→ ShipFailed (exhausted after 3 retries)|an error matching non_retryable ^fatal: | card declined → ShipFailed at once"},
		{held, "stays in Shipping, held for an operator|an error matching non_retryable ^fatal: → ShipFailed at once"},
		{clamped, "stays in Shipping, retry 1 of 4 in 1m0s±12s|stays in Shipping, retry 2 of 4 in 2m0s±24s|stays in Shipping, retry 3 of 4 in 4m0s±48s|" +
			"stays in Shipping, retry 4 of 4 in 4m0s–5m0s|→ ShipFailed (exhausted after 4 retries)"},
		{wide, "stays in Shipping, retry 1 of 1 in 25m0s–1h0m0s|→ ShipFailed (exhausted after 1 retry)"},
		{huge, "stays in Shipping, retry 1 of 150 in 30s–50m0s|stays in Shipping, retry 2 of 150 in 50m0s–1h0m0s|" +
			"stays in Shipping, retries 3–150 of 150 in 1h0m0s|→ ShipFailed (exhausted after 150 retries)"},
	} {
		if got := strings.Join(Effects(c.t, CauseInterrupt), "|"); got != c.want {
			t.Errorf("Effects(%s):\n got %s\nwant %s", c.t.Name, got, c.want)
		}
	}
	if _, e := FirstEffect(fatal, CauseInterrupt); !strings.HasSuffix(e, "; an error matching non_retryable ^fatal: | card declined → ShipFailed at once") {
		t.Errorf("FirstEffect with non_retryable: %s", e)
	}
}

// TestOnFailureRetriesNewFailuresOnly: under on_failure retry, an instance
// the engine fails after the policy is first applied waits where it was
// left for its delay and goes back to begin, max_attempts times, then
// stays failed as exhausted; failures from before the policy are never
// touched; a decided failure is not decided again; removing the policy
// drops its mark.
func TestOnFailureRetriesNewFailuresOnly(t *testing.T) {
	f := policySetup(t, Policy{})
	db, check := f.db, f.check
	db.MustExec(`ALTER TABLE app.orders ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
		CREATE INDEX ON app.orders (status, updated_at);
		UPDATE app.orders SET status = 'ShipFailed', updated_at = now() - interval '1h' WHERE id IN (5, 6);
		UPDATE app.orders SET status = 'Shipped' WHERE id = 1`)
	f.r.cfg.Workflows[0].UpdatedColumn = "updated_at"
	f.r.cfg.Workflows[0].Tasks[0].OnFailure = Policy{Strategy: StrategyRetry, MaxAttempts: 2,
		Backoff: Backoff{Kind: BackoffFixed, Base: 300 * time.Millisecond, MaxDelay: time.Hour}}
	failures := func(res Result) TaskResult {
		for _, tr := range res.Tasks {
			if tr.From == "ShipFailed" {
				return tr
			}
		}
		return TaskResult{}
	}
	if tr := failures(check()); tr.Done != 0 {
		t.Fatalf("first pass handled old failures: %+v", tr)
	}
	engineFails := func() {
		db.MustExec(`UPDATE app.orders SET status = 'ShipFailed', updated_at = now() WHERE id = 4`)
	}
	for k := 1; k <= 2; k++ {
		engineFails()
		if tr := failures(f.pass()); tr.Scheduled != 1 {
			t.Fatalf("failure %d: %+v, want a retry scheduled", k, tr)
		}
		if a := attemptOf(t, db, "orders", "4", "ship"); a.State != AttemptWaiting || a.Attempt != k-1 || a.LeftIn != "ShipFailed" {
			t.Fatalf("failure %d: %+v", k, a)
		}
		testkit.Eventually(t, 10*time.Second, "the retry to run", func() (bool, error) {
			check()
			return statusOf(t, db, 4) == "Paid", nil
		})
	}
	engineFails()
	tr := failures(check())
	if tr.Failed != 1 || statusOf(t, db, 4) != "ShipFailed" {
		t.Fatalf("third failure: %+v in %s, want failed for good", tr, statusOf(t, db, 4))
	}
	if a := attemptOf(t, db, "orders", "4", "ship"); a.State != AttemptExhausted || a.Attempt != 2 ||
		!strings.Contains(a.Reason, "failed by the engine: exhausted after 2 retries") {
		t.Fatalf("exhausted: %+v", a)
	}
	if tr := failures(check()); tr.Done != 0 {
		t.Fatalf("a decided failure was decided again: %+v", tr)
	}
	var kinds []string
	if err := db.Select(&kinds, `SELECT kind FROM enginehealth.events WHERE workflow = 'orders' AND instance = '4' ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(kinds, " "); got != "retry_scheduled instance_retried retry_scheduled instance_retried instance_failed" {
		t.Fatalf("events of orders/4: %s", got)
	}
	var old int
	if err := db.Get(&old, `SELECT count(*) FROM app.orders o WHERE id IN (5, 6) AND status = 'ShipFailed'
		AND NOT EXISTS (SELECT 1 FROM enginehealth.attempts a WHERE a.instance = o.id::text)`); err != nil {
		t.Fatal(err)
	}
	if old != 2 {
		t.Fatalf("old failures touched: %d of 2 left alone", old)
	}
	// A failure stamped ahead of the database clock is decided once.
	f.r.cfg.Workflows[0].Tasks[0].OnFailure.NonRetryable = []string{"^permanent"}
	db.MustExec(`UPDATE app.orders SET status = 'ShipFailed', last_error = 'permanent: card', updated_at = now() + interval '1h' WHERE id = 7`)
	if tr := failures(check()); tr.Failed != 1 {
		t.Fatalf("future-stamped failure: %+v", tr)
	}
	for range 2 {
		if tr := failures(check()); tr.Done != 0 {
			t.Fatalf("a future-stamped failure was decided again: %+v", tr)
		}
	}
	f.r.cfg.Workflows[0].Tasks[0].OnFailure = Policy{}
	check()
	var marks int
	if err := db.Get(&marks, `SELECT count(*) FROM enginehealth.failure_marks`); err != nil {
		t.Fatal(err)
	}
	if marks != 0 {
		t.Fatalf("%d marks left after the policy was removed", marks)
	}
}

// TestCatalogChecksUpdatedColumn: an on_failure policy needs its
// workflow's updated_column to be a timestamp with an index on (status,
// updated_column); CheckCatalog says what to create.
func TestCatalogChecksUpdatedColumn(t *testing.T) {
	_, db, _ := setup(t)
	db.MustExec(`ALTER TABLE app.orders ADD COLUMN updated_at timestamptz, ADD COLUMN version integer`)
	wf := orders
	wf.Tasks = slices.Clone(orders.Tasks)
	wf.Tasks[0].OnFailure = Policy{Strategy: StrategyHold}
	wf.UpdatedColumn = "version"
	var ce *CatalogError
	err := CheckCatalog(context.Background(), db, []Workflow{wf})
	if !errors.As(err, &ce) || len(ce.Problems) != 2 || !strings.Contains(ce.Problems[1], `column "version" of app.orders is integer`) ||
		!strings.Contains(ce.Problems[0], `CREATE INDEX ON "app"."orders" ("status", "version")`) {
		t.Fatalf("CheckCatalog: %v", err)
	}
	wf.UpdatedColumn = "updated_at"
	db.MustExec(`CREATE INDEX ON app.orders USING brin (status, updated_at)`)
	if err := CheckCatalog(context.Background(), db, []Workflow{wf}); !errors.As(err, &ce) || len(ce.Problems) != 1 ||
		!strings.Contains(ce.Problems[0], "valid B-tree index") {
		t.Fatalf("CheckCatalog with only a BRIN index: %v", err)
	}
	db.MustExec(`CREATE INDEX ON app.orders (status, updated_at)`)
	if err := CheckCatalog(context.Background(), db, []Workflow{wf}); err != nil {
		t.Fatalf("CheckCatalog with a timestamp and its index: %v", err)
	}
}

// TestChangedPolicyCancelsWaitingRetries: a retry scheduled under a
// policy that no longer allows it (strategy changed, max_attempts
// lowered) is cancelled when due, not run.
func TestChangedPolicyCancelsWaitingRetries(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3,
		Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}})
	f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 3`)
	if res := f.check(); res.Tasks[0].Scheduled != 2 {
		t.Fatalf("%+v", res.Tasks[0])
	}
	f.db.MustExec(`UPDATE enginehealth.attempts SET next_attempt_at = now() - interval '1s'`)
	f.r.cfg.Workflows[0].Tasks[0].OnInterrupt = Policy{Strategy: StrategyHold}
	f.check()
	for _, id := range []int{1, 3} {
		if a := attemptOf(t, f.db, "orders", fmt.Sprint(id), "ship"); a.State != AttemptCancelled || statusOf(t, f.db, id) != "Shipping" ||
			!strings.Contains(a.Reason, "on_interrupt policy is hold now") {
			t.Fatalf("orders/%d: %+v in %s", id, a, statusOf(t, f.db, id))
		}
	}
}

// TestParkedInstanceRunAgainIsANewCase: an instance parked by a policy
// (a retry waiting, or held) that someone else moves back and an engine
// runs again and is interrupted on (its claim expires) is a new case of
// the task, decided at once: the waiting retry counts as made (so a
// poison instance still runs out of retries), the node joins the nodes it
// was interrupted on, and the event says what happened. Left alone, the
// due retry would find it where it was left and the interruption would be
// lost (outside review of the retry issue).
func TestParkedInstanceRunAgainIsANewCase(t *testing.T) {
	runAgain := func(db *sqlx.DB, node string) {
		t.Helper()
		db.MustExec(`UPDATE app.orders SET status = 'Paid' WHERE id = 1`) // someone moves it back
		db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 1;
			INSERT INTO app.orders_claim VALUES (1, '` + node + `', 't', now() - interval '1h', now() - interval '1s')`) // an engine claims it and dies
	}
	t.Run("waiting", func(t *testing.T) {
		f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 2,
			Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}})
		db, check := f.db, f.check
		if res := f.check(); res.Tasks[0].Scheduled != 1 {
			t.Fatalf("first interruption: %+v", res.Tasks[0])
		}
		runAgain(db, "n2")
		if res := check(); res.ClaimsExpired != 1 || res.Tasks[0].Scheduled != 1 {
			t.Fatalf("run again while retry 1 waited: %+v", res)
		}
		a := attemptOf(t, db, "orders", "1", "ship")
		if a.State != AttemptWaiting || a.Attempt != 1 || a.Nodes != "n2" ||
			!strings.Contains(a.Reason, "retry 2 of 2") || !strings.Contains(a.Reason, "run again by someone else while retry 1 waited") {
			t.Fatalf("after the second interruption: %+v, want retry 2 of 2 waiting, retry 1 counted", a)
		}
		runAgain(db, "n3")
		if res := check(); res.Tasks[0].Exhausted != 1 || statusOf(t, db, 1) != "ShipFailed" {
			t.Fatalf("third interruption: %+v in %s, want exhausted", res.Tasks[0], statusOf(t, db, 1))
		}
		if a := attemptOf(t, db, "orders", "1", "ship"); a.State != AttemptExhausted || a.Attempt != 2 || a.Nodes != "n2,n3" {
			t.Fatalf("exhausted: %+v", a)
		}
		var kinds []string
		if err := db.Select(&kinds, `SELECT kind || ':' || coalesce(attempt::text, '-') FROM enginehealth.events
			WHERE workflow = 'orders' AND instance = '1' AND kind <> 'claim_expired' ORDER BY id`); err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(kinds, " "), "retry_scheduled:1 retry_scheduled:2 instance_repaired:2"; got != want {
			t.Fatalf("events: got %s, want %s", got, want)
		}
	})
	t.Run("held", func(t *testing.T) {
		f := policySetup(t, Policy{Strategy: StrategyHold})
		db, check := f.db, f.check
		if res := check(); res.Tasks[0].Held != 1 {
			t.Fatalf("first interruption: %+v", res.Tasks[0])
		}
		runAgain(db, "n1")
		if res := check(); res.Tasks[0].Held != 1 {
			t.Fatalf("run again while held: %+v", res.Tasks[0])
		}
		if a := attemptOf(t, db, "orders", "1", "ship"); a.State != AttemptHeld || a.LastNode == nil || *a.LastNode != "n1" ||
			!strings.Contains(a.Reason, "run again by someone else while held") {
			t.Fatalf("held again: %+v", a)
		}
		// A pass with nothing new leaves it held.
		if res := check(); res.Done() != 0 {
			t.Fatalf("a quiet pass handled the held instance: %+v", res.Tasks[0])
		}
	})
}

// TestAttemptsStartOverAfterSuccess: once a retried instance succeeded,
// a later interruption of the same task is a new case: its retries count
// from 0 and its nodes from none.
func TestAttemptsStartOverAfterSuccess(t *testing.T) {
	f := policySetup(t, Policy{})
	r, db, o, check := f.r, f.db, f.o, f.check
	r.cfg.Workflows[0].Tasks[0].AtomicInternal = true
	interrupt := func(node string) {
		db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 1`)
		db.MustExec(`INSERT INTO app.orders_claim VALUES (1, $1, 't', now() - interval '1h', now() - interval '1s')`, node)
	}
	for _, n := range []string{"n1", "n2"} {
		interrupt(n)
		check()
	}
	if a := attemptOf(t, db, "orders", "1", "ship"); a.State != AttemptRetried || a.Attempt != 2 || a.Nodes != "n1,n2" {
		t.Fatalf("after two interruptions: %+v", a)
	}
	db.MustExec(`UPDATE app.orders SET status = 'Shipped' WHERE id = 1`)
	if _, err := r.Settle(context.Background(), o, 0, true); err != nil {
		t.Fatal(err)
	}
	if a := attemptOf(t, db, "orders", "1", "ship"); a.State != AttemptSucceeded {
		t.Fatalf("after success: %+v", a)
	}
	// Later the instance goes through the task again and is interrupted.
	interrupt("n3")
	check()
	if a := attemptOf(t, db, "orders", "1", "ship"); a.State != AttemptRetried || a.Attempt != 1 || a.Nodes != "n3" ||
		!strings.Contains(a.Reason, "retry 1 of 10") {
		t.Fatalf("a new case after success: %+v, want retry 1 of 10 on n3", a)
	}
}

// TestHoldCancelledWhenInstanceMoves: a hold whose instance reached an
// end state, was moved by someone else or is gone is closed by the check
// (hold_cancelled, saying which), so holds lists only instances that
// still wait; a pass looks at BatchSize holds, the next goes on after
// them.
func TestHoldCancelledWhenInstanceMoves(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyHold})
	r, db, o, check := f.r, f.db, f.o, f.check
	db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id <= 5`)
	if res := check(); res.Tasks[0].Held != 5 {
		t.Fatalf("%+v", res.Tasks[0])
	}
	// The holds looked at first (1 and 2) still wait: the passes after
	// must go on past them to find the others.
	db.MustExec(`UPDATE app.orders SET status = 'Shipped' WHERE id = 3`)
	db.MustExec(`UPDATE app.orders SET status = 'Cancelled' WHERE id = 4`)
	db.MustExec(`DELETE FROM app.orders WHERE id = 5`)
	var cancelled int64
	for pass := 1; pass <= 3; pass++ { // BatchSize 2: five holds in three passes
		sc, err := r.Settle(context.Background(), o, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range sc {
			cancelled += c.HoldsCancelled
		}
	}
	if cancelled != 3 {
		t.Fatalf("%d holds cancelled, want 3", cancelled)
	}
	for id, want := range map[string]string{"3": "hold cancelled: the instance reached end state Shipped",
		"4": "hold cancelled: instance moved to Cancelled by someone else", "5": "hold cancelled: the instance no longer exists"} {
		// One that reached an end state succeeded (a later case counts
		// from 0).
		st := AttemptCancelled
		if id == "3" {
			st = AttemptSucceeded
		}
		if a := attemptOf(t, db, "orders", id, "ship"); a.State != st || a.Reason != want {
			t.Errorf("hold of %s: %+v, want %s: %s", id, a, st, want)
		}
	}
	for _, id := range []string{"1", "2"} {
		if a := attemptOf(t, db, "orders", id, "ship"); a.State != AttemptHeld {
			t.Errorf("hold of %s: %+v, want still held", id, a)
		}
	}
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM enginehealth.events WHERE kind = 'hold_cancelled'`); err != nil || n != 3 {
		t.Fatalf("%d hold_cancelled events (%v), want 3", n, err)
	}
	if hs, err := r.Holds(context.Background(), "", 100); err != nil || len(hs) != 2 {
		t.Fatalf("holds listed: %+v (%v), want 1 and 2", hs, err)
	}
}

// TestPlanFollowsHistory: recover --dry-run says what happens to each
// interrupted instance by its history, as the run will decide it: a
// first interruption waits for retry 1, one retried before for its next
// retry, one out of retries is failed as exhausted, one whose error is
// non-retryable fails at once; a parked one is not planned.
func TestPlanFollowsHistory(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3, NonRetryable: []string{"^fatal:"},
		Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}})
	r, db := f.r, f.db
	db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id <= 5`)
	db.MustExec(`UPDATE app.orders SET last_error = 'fatal: card gone' WHERE id = 3`)
	db.MustExec(`INSERT INTO enginehealth.attempts (workflow, instance, task, attempt, state, cause, left_in, next_attempt_at) VALUES
		('orders', '2', 'ship', 3, 'retried', 'interrupt', 'Shipping', NULL),
		('orders', '4', 'ship', 0, 'waiting', 'interrupt', 'Shipping', now() + interval '1h'),
		('orders', '5', 'ship', 1, 'retried', 'interrupt', 'Shipping', NULL)`)
	plans, err := r.Plan(context.Background(), Scope{})
	if err != nil {
		t.Fatal(err)
	}
	tr := plans[0].Tasks[0]
	var got []string
	for _, e := range tr.Plan {
		got = append(got, fmt.Sprintf("%d %s", e.Instances, e.Effect))
	}
	want := []string{"1 stays in Shipping, retry 1 of 3 in 1h0m0s", "1 → ShipFailed at once (error matches non_retryable ^fatal:)",
		"1 stays in Shipping, retry 2 of 3 in 1h0m0s", "1 → ShipFailed (exhausted after 3 retries)"}
	if strings.Join(got, "|") != strings.Join(want, "|") || tr.Planned != 4 {
		t.Fatalf("plan of %d:\n got %s\nwant %s", tr.Planned, strings.Join(got, "|"), strings.Join(want, "|"))
	}
	// And the run does what the plan said.
	res := f.check()
	if c := res.Tasks[0]; c.Scheduled != 2 || c.Failed != 2 || c.Exhausted != 1 {
		t.Fatalf("run after the plan: %+v", c)
	}
}

// TestDueRetryRunElsewhereCounts: a retry that falls due while someone
// else has moved the instance back to begin, or while an engine runs it
// (claimed), counts as made: that run is the retry. So a poison instance
// moved back by hand again and again still runs out of retries (outside
// review: with max_attempts 1 it was interrupted four times, retry 1
// scheduled four times).
func TestDueRetryRunElsewhereCounts(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 1,
		Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}})
	db, check := f.db, f.check
	if res := check(); res.Tasks[0].Scheduled != 1 {
		t.Fatalf("%+v", res.Tasks[0])
	}
	// Someone moves it back and an engine claims it, with a live claim.
	db.MustExec(`UPDATE app.orders SET status = 'Paid' WHERE id = 1`)
	db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 1`)
	db.MustExec(`INSERT INTO app.orders_claim VALUES (1, 'n2', 't', now(), now() + interval '1h')`)
	db.MustExec(`UPDATE enginehealth.attempts SET next_attempt_at = now() - interval '1s'`) // due
	check()
	a := attemptOf(t, db, "orders", "1", "ship")
	if a.State != AttemptRetried || a.Attempt != 1 || !strings.Contains(a.Reason, "claimed by someone else: retry 1 runs there (counted as made)") {
		t.Fatalf("due while claimed: %+v, want retry 1 counted as made", a)
	}
	// The engine dies: the claim expires, and the instance is out of
	// retries.
	db.MustExec(`UPDATE app.orders_claim SET expires_at = now() - interval '1s'`)
	if res := check(); res.Tasks[0].Exhausted != 1 || statusOf(t, db, 1) != "ShipFailed" {
		t.Fatalf("interrupted after its retry ran elsewhere: %+v in %s, want exhausted", res.Tasks[0], statusOf(t, db, 1))
	}
	// The same when it was only moved back to begin at the due time.
	f2 := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 2,
		Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}})
	f2.check()
	f2.db.MustExec(`UPDATE app.orders SET status = 'Paid' WHERE id = 1`)
	f2.db.MustExec(`UPDATE enginehealth.attempts SET next_attempt_at = now() - interval '1s'`)
	f2.check()
	if a := attemptOf(t, f2.db, "orders", "1", "ship"); a.State != AttemptRetried || a.Attempt != 1 ||
		!strings.Contains(a.Reason, "someone else moved the instance back to Paid: retry 1 runs there (counted as made)") {
		t.Fatalf("due while back in begin: %+v", a)
	}
}

// TestWaitingRetryEndsWithItsInstance: a waiting retry whose instance
// reached an end state is closed by the next sweep (not at its due time,
// which may be days away), as succeeded, so the instance view and the
// statistics stop showing it waiting, and a later case of the task counts
// from 0 with none of the old nodes (second outside review).
func TestWaitingRetryEndsWithItsInstance(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 2,
		Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}})
	r, db, o, check := f.r, f.db, f.o, f.check
	db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 2`)
	db.MustExec(`INSERT INTO app.orders_claim VALUES (1, 'n1', 't', now() - interval '1h', now() - interval '1s')`)
	if res := check(); res.Tasks[0].Scheduled != 2 {
		t.Fatalf("%+v", res.Tasks[0])
	}
	db.MustExec(`UPDATE app.orders SET status = 'Shipped' WHERE id = 1`) // reached an end state
	db.MustExec(`DELETE FROM app.orders WHERE id = 2`)                   // gone
	if _, err := r.Settle(context.Background(), o, 0, true); err != nil {
		t.Fatal(err)
	}
	if a := attemptOf(t, db, "orders", "1", "ship"); a.State != AttemptSucceeded || a.Reason != "retry cancelled: the instance reached end state Shipped" {
		t.Fatalf("waiting retry of a shipped instance: %+v", a)
	}
	if a := attemptOf(t, db, "orders", "2", "ship"); a.State != AttemptCancelled || a.Reason != "retry cancelled: the instance no longer exists" {
		t.Fatalf("waiting retry of a deleted instance: %+v", a)
	}
	// Later it goes through the task again and is interrupted on n2.
	db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 1`)
	db.MustExec(`INSERT INTO app.orders_claim VALUES (1, 'n2', 't', now() - interval '1h', now() - interval '1s')`)
	check()
	if a := attemptOf(t, db, "orders", "1", "ship"); a.State != AttemptWaiting || a.Attempt != 0 || a.Nodes != "n2" ||
		!strings.Contains(a.Reason, "retry 1 of 2") || strings.Contains(a.Reason, "someone else") {
		t.Fatalf("a new case after the end state: %+v, want retry 1 of 2 on n2 only", a)
	}
}

// TestExhaustedSaysTheRetriesMade: once max_attempts is lowered below the
// retries an instance has had, its exhaustion says how many it had.
func TestExhaustedSaysTheRetriesMade(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 1, Backoff: Backoff{Kind: BackoffFixed}})
	f.db.MustExec(`INSERT INTO enginehealth.attempts (workflow, instance, task, attempt, state, cause, left_in)
		VALUES ('orders', '1', 'ship', 4, 'retried', 'interrupt', 'Shipping')`)
	if res := f.check(); res.Tasks[0].Exhausted != 1 {
		t.Fatalf("%+v", res.Tasks[0])
	}
	if a := attemptOf(t, f.db, "orders", "1", "ship"); a.State != AttemptExhausted || !strings.HasPrefix(a.Reason, "interrupted: exhausted after 4 retries") {
		t.Fatalf("%+v, want exhausted after 4 retries", a)
	}
}

// planFixtureSize is planFixture's instances.
const planFixtureSize = 10_000

// planFixture is 10k instances of a task with mixed histories (the
// plan-equals-run tests').
func planFixture(t *testing.T) policyFixture {
	t.Helper()
	// Retry 1 at once, retries 2 and 3 after an hour: some instances go
	// back to begin, some stay.
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3, NonRetryable: []string{"^fatal:"},
		Backoff: Backoff{Kind: BackoffSchedule, Schedule: []time.Duration{0, time.Hour, time.Hour}, MaxDelay: time.Hour}})
	r, db := f.r, f.db
	r.cfg.BatchSize = 1000 // the fixture's 2 is for batch edges
	const n = planFixtureSize
	db.MustExec(`DELETE FROM app.orders`)
	db.MustExec(`INSERT INTO app.orders (id, status, last_error)
		SELECT i, 'Shipping', CASE WHEN i % 13 = 0 THEN 'fatal: card gone' WHEN i % 17 = 0 THEN 'timeout' END FROM generate_series(1, $1) i`, n)
	// Histories, by id modulo 10: none (0), in the events only (1, below),
	// retried k times (2–5: k =
	// 0..3, 3 is max_attempts), 5 beyond it (6), succeeded after 2 (7),
	// waiting (8; every other one run again since: a claim expired on it
	// after it was parked), held (9, likewise).
	db.MustExec(`INSERT INTO enginehealth.attempts (workflow, instance, task, attempt, state, cause, left_in, next_attempt_at, since)
		SELECT 'orders', i::text, 'ship',
			CASE i % 10 WHEN 2 THEN 0 WHEN 3 THEN 1 WHEN 4 THEN 2 WHEN 5 THEN 3 WHEN 6 THEN 5 WHEN 7 THEN 2 ELSE 1 END,
			CASE i % 10 WHEN 7 THEN 'succeeded' WHEN 8 THEN 'waiting' WHEN 9 THEN 'held' ELSE 'retried' END,
			'interrupt', 'Shipping', CASE WHEN i % 10 = 8 THEN now() + interval '1h' END, now() - interval '1h'
		FROM generate_series(1, $1) i WHERE i % 10 >= 2`, n)
	db.MustExec(`INSERT INTO enginehealth.events (kind, actor, node, workflow, instance, from_state)
		SELECT 'claim_expired', 'm', 'n' || (i % 3), 'orders', i::text, 'Shipping' FROM generate_series(1, $1) i WHERE i % 10 IN (8, 9) AND i % 20 < 10`, n)
	// Retries at once kept only in their events (a fleet that counts
	// them there), after the task's settle cursor: 2 made (ids ending in
	// 1, every other one: the third waits), 3 (the others: exhausted).
	db.MustExec(`INSERT INTO enginehealth.settle_cursors (workflow, task, after_id) VALUES ('orders', 'ship', 0)`)
	db.MustExec(`INSERT INTO enginehealth.events (kind, actor, node, workflow, instance, task, from_state, to_state, attempt, reason)
		SELECT 'instance_repaired', 'm', 'n' || ((i + k) % 3), 'orders', i::text, 'ship', 'Shipping', 'Paid', k, 'retry ' || k
		FROM generate_series(1, $1) i CROSS JOIN LATERAL generate_series(1, CASE WHEN i % 20 = 1 THEN 2 ELSE 3 END) k
		WHERE i % 10 = 1`, n)
	// Claims: live on some (not planned, not run), expired on others
	// (planned: the run expires them first).
	db.MustExec(`INSERT INTO app.orders_claim (instance_id, node, token, claimed_at, expires_at)
		SELECT i, 'n1', 't', now() - interval '1h', CASE WHEN i % 7 = 0 THEN now() + interval '1h' ELSE now() - interval '1m' END
		FROM generate_series(1, $1) i WHERE i % 7 = 0 OR i % 11 = 0`, n)
	db.MustExec(`ANALYZE app.orders, enginehealth.attempts, enginehealth.events`)
	return f
}

// TestPlanEqualsRunAtScale: on 10k interrupted instances with mixed
// histories (none, retries at once in the events only, retries made 0 to
// beyond max_attempts, a success since, parked and run again since or
// not, a non-retryable error, a live claim or an expired one), the dry-run plan and the run after it agree: as many
// handled as planned, each destination (begin, failed, staying) with the
// count planned, and as many exhausted. They share their decision.
func TestPlanEqualsRunAtScale(t *testing.T) {
	const n = planFixtureSize
	f := planFixture(t)
	r, db := f.r, f.db
	ctx := context.Background()
	task := r.cfg.Workflows[0].Tasks[0]
	plans, err := r.Plan(ctx, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	plan := plans[0].Tasks[0]
	byTo := map[string]int64{}
	var exhausted int64
	for _, e := range plan.Plan {
		byTo[e.To] += e.Instances
		if strings.Contains(e.Effect, "exhausted") {
			exhausted += e.Instances
		}
	}
	if plan.Planned < n/2 || byTo[task.Begin] == 0 || byTo[task.Failed] == 0 || byTo[""] == 0 || exhausted == 0 {
		t.Fatalf("planned %d instances in %d groups: the histories are not mixed enough: %+v", plan.Planned, len(plan.Plan), plan.Plan)
	}
	// The same plan instance by instance: the groups above, each
	// instance in one.
	each, err := r.planEach(ctx, r.cfg.Workflows[0], task)
	if err != nil {
		t.Fatal(err)
	}
	byEffect := map[PlannedEffect]int64{}
	for _, e := range each {
		byEffect[PlannedEffect{To: e.To, Effect: e.Effect}]++
	}
	for _, g := range plan.Plan {
		byEffect[PlannedEffect{To: g.To, Effect: g.Effect}] -= g.Instances
	}
	for k, n := range byEffect {
		if n != 0 {
			t.Fatalf("the plan instance by instance has %d instances more than the plan %q (to %q)", n, k.Effect, k.To)
		}
	}
	res := f.pass()
	run := res.Tasks[0]
	if run.Done != plan.Planned || run.Planned != plan.Planned || run.Retried != byTo[task.Begin] || run.Failed != byTo[task.Failed] ||
		run.Scheduled+run.Held != byTo[""] || run.Exhausted != exhausted {
		t.Fatalf("the run did not do what the plan said:\nplan: %d planned, by destination %v, %d exhausted, groups %+v\nrun:  %+v",
			plan.Planned, byTo, exhausted, plan.Plan, run)
	}
	instances, groups, err := planMatchesRun(db, each)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d instances, %d groups, each group one outcome of the run", instances, groups)
}

// TestPlanEqualsRunBites: two instances whose histories change places
// between the plan and the run, which the totals cannot see, fail the
// comparison instance by instance.
func TestPlanEqualsRunBites(t *testing.T) {
	f := planFixture(t)
	r, db := f.r, f.db
	each, err := r.planEach(context.Background(), r.cfg.Workflows[0], r.cfg.Workflows[0].Tasks[0])
	if err != nil {
		t.Fatal(err)
	}
	// 12 and 13: one retry counted and two (no error on either).
	db.MustExec(`UPDATE enginehealth.attempts SET attempt = CASE instance WHEN '12' THEN 1 ELSE 0 END
		WHERE workflow = 'orders' AND task = 'ship' AND instance IN ('12', '13')`)
	f.pass()
	_, _, err = planMatchesRun(db, each)
	if err == nil || !strings.Contains(err.Error(), "instance 12:") || !strings.Contains(err.Error(), "instance 13:") {
		t.Fatalf("two instances swapped between the plan and the run: %v, want both named", err)
	}
	t.Log(err)
}

// planMatchesRun compares the plan instance by instance (each, taken
// before the last run) with the outcomes the run wrote in the events.
func planMatchesRun(db *sqlx.DB, each map[string]InstancePlan) (instances, groups int, err error) {
	// Instance by instance: the run decided exactly the instances the
	// plan did, and the plan's groups (its effect, with the retries it
	// counted: a failed instance's event carries them) and the run's
	// outcomes (kind, destination, attempt, reason) match one to one:
	// every instance of a group had its group's outcome. Two instances
	// whose outcomes the run swapped, against the plan, are named here
	// even where the totals agree.
	var outcomes []struct {
		Instance string         `db:"instance"`
		Kind     string         `db:"kind"`
		To       sql.NullString `db:"to_state"`
		Attempt  sql.NullInt64  `db:"attempt"`
		Reason   string         `db:"reason"`
	}
	if err := db.Select(&outcomes, `SELECT instance, kind, to_state, attempt, reason FROM enginehealth.events
		WHERE run_id = (SELECT max(id) FROM enginehealth.runs) AND task = 'ship' AND kind IN ('instance_repaired', 'retry_scheduled', 'instance_held')
		ORDER BY instance`); err != nil {
		return 0, 0, err
	}
	if len(outcomes) != len(each) {
		return 0, 0, fmt.Errorf("the run wrote %d outcomes, the plan planned %d instances", len(outcomes), len(each))
	}
	groupOf := make(map[string]string, len(outcomes)) // instance → its plan's group
	gotOf := make(map[string]string, len(outcomes))   // instance → its outcome in the run
	seen := map[string]map[string]int{}               // group → outcome → instances
	var odd []string                                  // instances not done as planned
	for _, o := range outcomes {
		e, ok := each[o.Instance]
		if !ok {
			return 0, 0, fmt.Errorf("the run decided instance %s, which the plan did not plan: %+v", o.Instance, o)
		}
		if _, twice := gotOf[o.Instance]; twice {
			return 0, 0, fmt.Errorf("the run decided instance %s twice", o.Instance)
		}
		if e.To != o.To.String {
			odd = append(odd, fmt.Sprintf("instance %s: the plan said %q (to %q), the run sent it to %q (%s: %s)", o.Instance, e.Effect, e.To, o.To.String, o.Kind, o.Reason))
		}
		// (What follows "; " is the instance's own, not its group's:
		// the nodes an exhausted instance was interrupted on, that it
		// was run again while parked.)
		reason, _, _ := strings.Cut(o.Reason, "; ")
		got := fmt.Sprintf("%s → %q, attempt %v: %s", o.Kind, o.To.String, o.Attempt, reason)
		group := fmt.Sprintf("%s (after %d retries)", e.Effect, e.Retries)
		groupOf[o.Instance], gotOf[o.Instance] = group, got
		if seen[group] == nil {
			seen[group] = map[string]int{}
		}
		seen[group][got]++
	}
	// Each group's outcome: the one most of its instances had.
	outcome := map[string]string{}
	ofOutcome := map[string]string{}
	for group, gots := range seen {
		best := ""
		for got, n := range gots {
			if best == "" || n > gots[best] || (n == gots[best] && got < best) {
				best = got
			}
		}
		if other, ok := ofOutcome[best]; ok {
			return 0, 0, fmt.Errorf("the run did %q to the instances the plan said %q of and to those it said %q of", best, group, other)
		}
		outcome[group], ofOutcome[best] = best, group
	}
	for _, o := range outcomes {
		if g := groupOf[o.Instance]; gotOf[o.Instance] != outcome[g] {
			odd = append(odd, fmt.Sprintf("instance %s: the plan said %q, the run did %q (to the others of its group: %q)", o.Instance, g, gotOf[o.Instance], outcome[g]))
		}
	}
	if len(odd) > 0 {
		return 0, 0, fmt.Errorf("%d instances not done as planned:\n%s", len(odd), strings.Join(odd, "\n"))
	}
	return len(outcomes), len(outcome), nil
}
