package recovery

// Retries at once without their attempts rows behave as with them: each
// test runs the same scenario with rows (a fleet not all on this
// release: Config.EventRetries false), which is what the semantics of
// docs/retry-policies.md describe, and without, where that makes the
// comparison; and the statements that read the events after a settle
// cursor plan without reading the whole events table. (From an outside
// review of the write model.)

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// rowModes: the rows model (EventRetries false: the master writes the
// row of a retry at once) and the rowless one.
var rowModes = []struct {
	name    string
	rowless bool
}{{"rows", false}, {"rowless", true}}

func rowModeFixture(t *testing.T, p Policy, rowless bool) policyFixture {
	t.Helper()
	f := policySetup(t, p)
	f.r.cfg.EventRetries = func(context.Context) (bool, error) { return rowless, nil }
	return f
}

func statsOf(t *testing.T, f policyFixture) RetryStats {
	t.Helper()
	st, err := f.r.RetryStats(context.Background())
	if err != nil || len(st) != 1 {
		t.Fatalf("stats: %+v, %v", st, err)
	}
	s := st[0]
	s.SuccessRate = nil
	return s
}

func settleAll(t *testing.T, f policyFixture) {
	t.Helper()
	if _, err := f.r.Settle(context.Background(), f.o, 0, true); err != nil {
		t.Fatal(err)
	}
}

// TestStatsFollowLatestCase: retry statistics count each instance once,
// by its latest case, as its attempts row does: a case of retries at once
// closed by the settle pass gets its row, and a later case takes the row
// on. Three scenarios, each the same as with rows.
func TestStatsFollowLatestCase(t *testing.T) {
	ctx := context.Background()
	scenarios := []struct {
		name string
		run  func(t *testing.T, f policyFixture)
	}{
		{"two cases, each succeeded", func(t *testing.T, f policyFixture) {
			for range 2 {
				f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 1`)
				f.check()
				f.db.MustExec(`UPDATE app.orders SET status = 'Shipped' WHERE id = 1`)
				settleAll(t, f)
			}
		}},
		{"failed case, then a manual retry", func(t *testing.T, f policyFixture) {
			f.check() // retry 1 at once
			f.db.MustExec(`UPDATE app.orders SET status = 'ShipFailed' WHERE id = 1`)
			settleAll(t, f) // retry 1 failed
			if _, err := f.r.Retry(ctx, f.o, ManualRetry{Ref: Ref{"orders", "1"}, By: audit.By{Actor: "ops"}}); err != nil {
				t.Fatal(err)
			}
		}},
		{"failed case, then interrupted again", func(t *testing.T, f policyFixture) {
			f.check() // retry 1 at once
			f.db.MustExec(`UPDATE app.orders SET status = 'ShipFailed' WHERE id = 1`)
			settleAll(t, f) // retry 1 failed
			// Someone moves it back; an engine runs it and dies.
			f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 1`)
			f.check() // retry 2 at once
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			var got [2]RetryStats
			for i, m := range rowModes {
				f := rowModeFixture(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffFixed}}, m.rowless)
				sc.run(t, f)
				got[i] = statsOf(t, f)
			}
			if got[0] != got[1] {
				t.Errorf("stats differ from the rows model:\n  rows:    %+v\n  rowless: %+v", got[0], got[1])
			}
		})
	}
}

// TestHandedOverCaseLeavesFailureToPolicy: a case of retries at once still
// open after the horizon is handed to an attempts row since its retry's
// time, not the hand-over's: under an on_failure policy, an instance the
// engine failed after the retry but before the hand-over (a pause longer
// than the horizon, when only the settle pass runs) is still a new
// failure for the failure pick (a.since < updated), and is held, as with
// rows.
func TestHandedOverCaseLeavesFailureToPolicy(t *testing.T) {
	for _, m := range rowModes {
		t.Run(m.name, func(t *testing.T) {
			f := rowModeFixture(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffFixed}}, m.rowless)
			f.db.MustExec(`ALTER TABLE app.orders ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
				CREATE INDEX ON app.orders (status, updated_at)`)
			f.r.cfg.Workflows[0].UpdatedColumn = "updated_at"
			f.r.cfg.Workflows[0].Tasks[0].OnFailure = Policy{Strategy: StrategyHold}
			if res := f.check(); res.Tasks[0].Retried != 1 { // also writes the failure mark
				t.Fatalf("first pass: %+v", res.Tasks[0])
			}
			// The engine failed the instance after its retry; the case is
			// past the horizon (15 minutes: the test's knob).
			f.r.caseHorizon = 0
			f.db.MustExec(`UPDATE app.orders SET status = 'ShipFailed', updated_at = now() WHERE id = 1`)
			settleAll(t, f) // a paused pass: settle only
			f.check()
			f.check()
			if a := attemptOf(t, f.db, "orders", "1", "ship"); a.State != AttemptHeld {
				t.Fatalf("failed after retry 1: %+v in %s, want held by the on_failure policy", a, statusOf(t, f.db, 1))
			}
		})
	}
}

// TestRetryStatsReadsNoWholeEvents: retry_stats reads the open cases
// from the events after the task's settle cursor, given as a parameter,
// each checked by probes: with sequential scans on (TestStatementsPlan
// turns them off), 300k events and the cursor 100 events from the end,
// its plan reads no whole events table.
func TestRetryStatsReadsNoWholeEvents(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffFixed}})
	f.db.MustExec(`INSERT INTO enginehealth.events (kind, actor, workflow, instance, task, from_state, to_state, attempt, reason)
		SELECT CASE WHEN i % 3 = 0 THEN 'claim_expired' ELSE 'instance_repaired' END, 'm', 'orders', (i % 50000)::text, 'ship', 'Shipping', 'Paid',
			CASE WHEN i % 3 <> 0 THEN 1 + i % 4 END, 'interrupted: retry at once'
		FROM generate_series(1, 300000) AS i`)
	f.db.MustExec(`ANALYZE enginehealth.events`)
	var after int64
	if err := f.db.Get(&after, `SELECT max(id) - 100 FROM enginehealth.events`); err != nil {
		t.Fatal(err)
	}
	sl, err := f.r.statsSlots(orders, "bigint")
	if err != nil {
		t.Fatal(err)
	}
	q, err := retryStatsSQL.Render(sl, sqltext.Args{"workflow": "orders", "task": "ship",
		"ends": pq.Array([]string{"Shipped"}), "after": after})
	if err != nil {
		t.Fatal(err)
	}
	readsNoWholeEvents(t, f.db, q, "retry_stats")
}

// readsNoWholeEvents fails t if the plan of q (what names it) scans the
// events table whole.
func readsNoWholeEvents(t *testing.T, db *sqlx.DB, q sqltext.Statement, what string) {
	t.Helper()
	var lines []string
	if err := db.Select(&lines, "EXPLAIN "+q.SQL, q.Args...); err != nil {
		t.Fatal(err)
	}
	if seq := seqScans(lines, "events"); seq != "" {
		t.Fatalf("%s scans the events table:\n%s", what, seq)
	}
}

// TestSettleEventsReadsNoWholeEvents: settle_events checks each of up to
// batch_size (default 10000) retry events for a later retry of its
// instance by a probe of the index on instance: with sequential scans on,
// 300k events and a window of 20k, its plan reads no whole events
// table.
func TestSettleEventsReadsNoWholeEvents(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffFixed}})
	f.db.MustExec(`INSERT INTO enginehealth.events (kind, actor, workflow, instance, task, from_state, to_state, attempt, reason)
		SELECT CASE WHEN i % 3 = 0 THEN 'claim_expired' ELSE 'instance_repaired' END, 'm', 'orders', (i % 50000)::text, 'ship', 'Shipping', 'Paid',
			CASE WHEN i % 3 <> 0 THEN 1 + i % 4 END, 'interrupted: retry at once'
		FROM generate_series(1, 300000) AS i`)
	f.db.MustExec(`ANALYZE enginehealth.events`)
	var upto int64
	if err := f.db.Get(&upto, `SELECT max(id) FROM enginehealth.events`); err != nil {
		t.Fatal(err)
	}
	f.r.cfg.BatchSize = DefaultBatchSize
	// A pass's batch after the cursor, and a later pass's batch of
	// 10,000 cases left open, read again by id.
	open := make([]int64, DefaultBatchSize)
	for i := range open {
		open[i] = upto - 2*int64(i)
	}
	slices.Sort(open)
	for _, p := range []eventsPick{{after: upto - 20000, upto: upto}, {open: open}} {
		q, err := f.r.renderSettleEvents(f.r.cfg.Workflows[0], f.r.cfg.Workflows[0].Tasks[0], "bigint", p, 1)
		if err != nil {
			t.Fatal(err)
		}
		readsNoWholeEvents(t, f.db, q, fmt.Sprintf("settle_events (open cases %v)", p.open != nil))
	}
}

// TestSettleCursorKeepsUnconfiguredTask: a pass by a master whose
// configuration lacks a task (renamed and renamed back, a rollout whose
// nodes' files differ) leaves that task's settle cursor where it is: once
// the task is back, its open case is counted, settled as succeeded, and
// the next case counts from 0, as with rows.
func TestSettleCursorKeepsUnconfiguredTask(t *testing.T) {
	for _, m := range rowModes {
		t.Run(m.name, func(t *testing.T) {
			f := rowModeFixture(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffFixed}}, m.rowless)
			f.check() // retry 1 at once; the instance is back in Paid, still running
			task := &f.r.cfg.Workflows[0].Tasks[0]
			task.Name = "shipping" // one pass without the task "ship"
			settleAll(t, f)
			task.Name = "ship"
			if st, err := f.r.RetryStats(context.Background()); err != nil || len(st) != 1 || st[0].Instances != 1 {
				t.Errorf("stats with retry 1 running: %+v, %v; want the instance counted", st, err)
			}
			f.db.MustExec(`UPDATE app.orders SET status = 'Shipped' WHERE id = 1`)
			settleAll(t, f)
			if a := attemptOf(t, f.db, "orders", "1", "ship"); a.State != AttemptSucceeded {
				t.Errorf("retry 1 of a shipped instance: %+v, want succeeded", a)
			}
			// A new case after success.
			f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 1`)
			f.check()
			if a := attemptOf(t, f.db, "orders", "1", "ship"); a.Attempt != 1 {
				t.Errorf("a new case after success: %+v, want retry 1", a)
			}
		})
	}
}

// seqScans returns the plan lines of a sequential scan of table, each
// with the line above it (the node that reads it) and its filter.
func seqScans(lines []string, table string) string {
	var out []string
	for i, l := range lines {
		if strings.Contains(l, "Seq Scan on "+table+" ") {
			out = append(out, lines[max(i-1, 0)], l)
			if i+1 < len(lines) {
				out = append(out, lines[i+1])
			}
		}
	}
	return strings.Join(out, "\n")
}

// TestRowlessRowsSayWhatRowsSay: a row written after retries at once that
// wrote none (exhausted, failed, held, waiting, settled, a manual retry)
// says what the row kept since would say: the attempt, the nodes, and the
// last attempt's time and node (the latest retry's event: its time, the
// latest node it named), which the holds list and the instance view
// show. Each story runs in both write models; their rows must match,
// and the last attempt's time must be the latest retry's.
func TestRowlessRowsSayWhatRowsSay(t *testing.T) {
	ctx := context.Background()
	retry3 := Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffFixed}}
	expire := func(f policyFixture, node string) {
		f.db.MustExec(`INSERT INTO app.orders_claim VALUES (1, $1, 't', now() - interval '1h', now() - interval '1s')`, node)
	}
	interrupt := func(f policyFixture, node string) {
		f.db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id = 1`)
		if node != "" {
			expire(f, node)
		}
	}
	stories := []struct {
		name string
		p    Policy
		run  func(t *testing.T, f policyFixture)
	}{
		{"on n1 then n2, then failed by the engine and held by on_failure", retry3, func(_ *testing.T, f policyFixture) {
			f.db.MustExec(`ALTER TABLE app.orders ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now(); CREATE INDEX ON app.orders (status, updated_at)`)
			f.r.cfg.Workflows[0].UpdatedColumn = "updated_at"
			f.r.cfg.Workflows[0].Tasks[0].OnFailure = Policy{Strategy: StrategyHold}
			f.check() // the failure mark
			expire(f, "n1")
			f.check()
			interrupt(f, "n2")
			f.check()
			f.db.MustExec(`UPDATE app.orders SET status = 'ShipFailed', last_error = 'disk full', updated_at = now() + interval '1s' WHERE id = 1`)
			f.check()
			f.check()
		}},
		{"on n1, then unattributed (a sweep), exhausted", Policy{Strategy: StrategyRetry, MaxAttempts: 1, Backoff: Backoff{Kind: BackoffFixed}},
			func(_ *testing.T, f policyFixture) {
				expire(f, "n1")
				f.check()
				interrupt(f, "")
				f.check()
			}},
		{"on n1, then on n2 under a policy now hold", retry3, func(_ *testing.T, f policyFixture) {
			expire(f, "n1")
			f.check()
			f.r.cfg.Workflows[0].Tasks[0].OnInterrupt = Policy{Strategy: StrategyHold}
			interrupt(f, "n2")
			f.check()
		}},
		{"on n1, then unattributed under a policy now none", retry3, func(_ *testing.T, f policyFixture) {
			expire(f, "n1")
			f.check()
			f.r.cfg.Workflows[0].Tasks[0].OnInterrupt = Policy{Strategy: StrategyNone}
			interrupt(f, "")
			f.check()
		}},
		{"on n2 then n1, settled failed, then a manual retry", retry3, func(t *testing.T, f policyFixture) {
			expire(f, "n2")
			f.check()
			interrupt(f, "n1")
			f.check()
			f.db.MustExec(`UPDATE app.orders SET status = 'ShipFailed' WHERE id = 1`)
			if _, err := f.r.Retry(ctx, f.o, ManualRetry{Ref: Ref{"orders", "1"}, By: audit.By{Actor: "ops"}}); err != nil {
				t.Fatal(err)
			}
		}},
		{"on n1 then n2 as a release before wrote them, settled while open (its cursor between the two), then on n3, exhausted", Policy{Strategy: StrategyRetry, MaxAttempts: 2,
			Backoff: Backoff{Kind: BackoffFixed}}, func(t *testing.T, f policyFixture) {
			expire(f, "n1")
			f.check()
			interrupt(f, "n2")
			f.check()
			// A second retry at once writes its row, but the releases
			// before this one wrote none: rowless, the case as they left
			// it in the events, both retries there.
			if rowless, err := f.r.cfg.EventRetries(ctx); err != nil || rowless {
				f.db.MustExec(`DELETE FROM enginehealth.attempts WHERE instance = '1'`)
			}
			settleAll(t, f)
			// Rowless: the settle pass went past the first retry (a later
			// one of its case came) and stopped before the second (its
			// case still runs): the batch that decides must still read
			// both, for every node of the case.
			var between bool
			if err := f.db.Get(&between, `SELECT coalesce((SELECT c.after_id >= min(e.id) AND c.after_id < max(e.id)
				FROM enginehealth.settle_cursors c, enginehealth.events e WHERE e.kind = 'instance_repaired' AND e.attempt IS NOT NULL
				GROUP BY c.after_id), true)`); err != nil || !between {
				t.Fatalf("the settle cursor is not between the two retries (%v)", err)
			}
			interrupt(f, "n3")
			f.check()
		}},
		{"on n1, then a retry that waits (the policy now delays)", retry3, func(_ *testing.T, f policyFixture) {
			expire(f, "n1")
			f.check()
			f.r.cfg.Workflows[0].Tasks[0].OnInterrupt = Policy{Strategy: StrategyRetry, MaxAttempts: 3,
				Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}}
			interrupt(f, "")
			f.pass()
		}},
	}
	for _, st := range stories {
		t.Run(st.name, func(t *testing.T) {
			var said [2]string
			for i, m := range rowModes {
				f := rowModeFixture(t, st.p, m.rowless)
				st.run(t, f)
				settleAll(t, f)
				// The row, its last attempt's time checked against the
				// latest retry's (a retry at once's event, or a manual
				// retry's).
				var rows []string
				if err := f.db.Select(&rows, `SELECT format('%s %s attempt=%s manual=%s nodes=%s last_node=%s last_attempt=%s: %s', a.state, a.cause,
						a.attempt, a.manual, a.nodes, coalesce(a.last_node, '-'),
						CASE WHEN a.last_attempt_at IS NULL THEN 'none'
						     WHEN a.last_attempt_at = (SELECT max(e.at) FROM enginehealth.events e WHERE e.instance = a.instance
								AND e.task = a.task AND ((e.kind = 'instance_repaired' AND e.attempt IS NOT NULL AND e.to_state = 'Paid')
									OR e.kind = 'manual_retry')) THEN 'the latest retry'
						     ELSE a.last_attempt_at::text END, a.last_reason)
					FROM enginehealth.attempts a ORDER BY a.instance`); err != nil {
					t.Fatal(err)
				}
				hs, err := f.r.Holds(ctx, "", 100)
				if err != nil {
					t.Fatal(err)
				}
				for _, h := range hs {
					rows = append(rows, fmt.Sprintf("hold %s/%s last_node=%v nodes=%v", h.Workflow, h.Instance, deref(h.LastNode), []string(h.Nodes)))
				}
				said[i] = strings.Join(rows, "\n  ")
				if strings.Contains(said[i], "last_attempt=none") || strings.Contains(said[i], "last_attempt=2") {
					t.Errorf("%s: a row without the latest retry's time:\n  %s", m.name, said[i])
				}
			}
			if said[0] != said[1] {
				t.Errorf("rows differ:\n rows:\n  %s\n rowless:\n  %s", said[0], said[1])
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

// TestTaskRepairsWaitForEachOther: a task's repairs in one process run one
// at a time (lockTask), since each reads the task's retries at once up
// to where it began (histWindow): a run that finds the task's repair
// going on waits for it, as long as its context allows, and repairs
// nothing meanwhile.
func TestTaskRepairsWaitForEachOther(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffFixed}})
	unlock, err := f.r.lockTask(context.Background(), "orders", "ship")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := f.r.Recover(ctx, f.o, TriggerManual, Scope{}, nil)
	if !errors.Is(err, context.DeadlineExceeded) || res.Done() != 0 || statusOf(t, f.db, 1) != "Shipping" {
		t.Fatalf("with the task's repair going on: %+v, %v, status %s; want it waiting, nothing repaired", res, err, statusOf(t, f.db, 1))
	}
	unlock()
	if res := f.check(); res.Done() != 1 || statusOf(t, f.db, 1) != "Paid" {
		t.Fatalf("after it ended: %+v, status %s", res.Tasks, statusOf(t, f.db, 1))
	}
}

// TestPickProbesEachInstancesRow: a repair batch reads its instances'
// attempts rows by a probe of the primary key per instance, never by a
// read of all the task's rows, even when the statistics say the table is
// empty (a run that parks thousands writes them faster than they are
// analysed: read whole for every batch, they made a run of 100k
// instances in batches of 1,000 take twice as long).
func TestPickProbesEachInstancesRow(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}})
	f.db.MustExec(`TRUNCATE enginehealth.attempts`) // statistics of an empty table
	f.db.MustExec(`INSERT INTO enginehealth.attempts (workflow, instance, task, attempt, state, cause, left_in, next_attempt_at)
		SELECT 'orders', 'x' || i, 'ship', 0, 'waiting', 'interrupt', 'Shipping', now() + interval '1h' FROM generate_series(1, 20000) i`)
	f.db.MustExec(`ALTER TABLE app.orders ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now(); CREATE INDEX ON app.orders (status, updated_at)`)
	w := f.r.cfg.Workflows[0]
	w.UpdatedColumn = "updated_at"
	for _, c := range []Cause{CauseInterrupt, CauseFailure} {
		st, err := f.r.renderBatch(w, w.Tasks[0], c, w.Claims, attribution{}, cursor{at: "2026-11-26 09:00:00+00"}, batchMode{rowless: true}, 1)
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		if err := f.db.Get(&out, "EXPLAIN (FORMAT JSON) "+st.SQL, st.Args...); err != nil {
			t.Fatal(err)
		}
		var scans []string
		var walk func(n map[string]any)
		walk = func(n map[string]any) {
			if n["Relation Name"] == "attempts" && n["Parent Relationship"] != "SubPlan" {
				cond, _ := n["Index Cond"].(string)
				scans = append(scans, fmt.Sprintf("%v %s", n["Node Type"], cond))
			}
			kids, _ := n["Plans"].([]any)
			for _, k := range kids {
				walk(k.(map[string]any))
			}
		}
		var plans []map[string]any
		if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
			t.Fatalf("EXPLAIN: %v", err)
		}
		walk(plans[0]["Plan"].(map[string]any))
		probes := 0
		for _, s := range scans {
			if strings.Contains(s, "Index Scan") && strings.Contains(s, "instance = ") {
				probes++
			}
		}
		if probes == 0 {
			t.Errorf("%s: the attempts rows are not read by a probe per instance: %q", c, scans)
		}
	}
}

// TestPlannedCountedUnderTaskLock: a run that waits for another repair
// of the task counts what is left once it has the task's lock, so its
// planned count is what it does (it counted first, and planned what the
// other repair then did). From an outside review.
func TestPlannedCountedUnderTaskLock(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffFixed}})
	unlock, err := f.r.lockTask(context.Background(), "orders", "ship") // the other repair
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{})
	f.r.onTaskWait = func(string, string) { close(waiting) }
	type ran struct {
		res Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := f.r.Recover(context.Background(), f.o, TriggerManual, Scope{}, nil)
		done <- ran{res, err}
	}()
	select {
	case <-waiting:
	case r := <-done:
		t.Fatalf("the run did not wait for the task's lock: %+v, %v", r.res, r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("the run never reached the task's lock")
	}
	f.db.MustExec(`UPDATE app.orders SET status = 'Paid' WHERE id = 1`) // the other repair's work
	unlock()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	var planned, did int64
	if err := f.db.QueryRow(`SELECT planned, done FROM enginehealth.runs WHERE id = $1`, r.res.RunID).Scan(&planned, &did); err != nil {
		t.Fatal(err)
	}
	if planned != 0 || did != 0 {
		t.Errorf("run: planned %d, done %d; want 0 and 0 (the other repair did it)", planned, did)
	}
}

// TestBatchWaitEndsWithContext: a repair batch waiting for a settle pass
// of retries at once (which holds the events semaphore whole) stops
// waiting when its context ends. From an outside review.
func TestBatchWaitEndsWithContext(t *testing.T) {
	f := policySetup(t, Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffFixed}})
	if err := f.r.events.Acquire(context.Background(), eventsWhole); err != nil { // a settle pass
		t.Fatal(err)
	}
	defer f.r.events.Release(eventsWhole)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := f.r.Recover(ctx, f.o, TriggerManual, Scope{}, nil)
	if !errors.Is(err, context.DeadlineExceeded) || res.Done() != 0 {
		t.Fatalf("%+v, %v: want the deadline's error, nothing done", res, err)
	}
	// It had counted its instance: it was waiting at its first batch.
	var planned int64
	if err := f.db.Get(&planned, `SELECT planned FROM enginehealth.runs WHERE id = $1`, res.RunID); err != nil || planned != 1 {
		t.Fatalf("the run planned %d (%v): it stopped before its first batch", planned, err)
	}
}

// TestCursorWrittenOnce: a task's first repair writes its settle cursor
// in the batch that writes its first retry at once without a row, and its
// batches after that one know the task has one (they render no started:
// no RETURNING of their events, no look for the cursor). A policy whose
// decision table has no retry at once (strategy none: each fails) writes
// none, and its batches do not look for it.
func TestCursorWrittenOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy Policy
		cursor bool
	}{
		{"retried at once", Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffFixed}}, true},
		{"strategy none", Policy{Strategy: StrategyNone}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := policySetup(t, tc.policy)
			f.db.MustExec(`UPDATE app.orders SET status = 'Shipping'`) // 7 instances: batches of 2
			var modes []batchMode
			f.r.onBatch = func(m batchMode) {
				if m.rowless {
					modes = append(modes, m)
				}
			}
			res := f.pass()
			if res.Done() != 7 {
				t.Fatalf("repaired %d, want 7", res.Done())
			}
			var firstEvent, cursors int64
			var after sql.NullInt64
			if err := f.db.QueryRow(`SELECT (SELECT min(id) FROM enginehealth.events WHERE task = 'ship'), count(*), max(after_id)
				FROM enginehealth.settle_cursors WHERE workflow = 'orders' AND task = 'ship'`).Scan(&firstEvent, &cursors, &after); err != nil {
				t.Fatal(err)
			}
			if len(modes) < 4 {
				t.Fatalf("%d rowless batches of the task, want 4 (7 instances, 2 a batch)", len(modes))
			}
			if !tc.cursor {
				if cursors != 0 {
					t.Fatalf("strategy none wrote a settle cursor (after %d)", after.Int64)
				}
				w := f.r.cfg.Workflows[0]
				st, err := f.r.renderBatch(w, w.Tasks[0], CauseInterrupt, w.Claims, attribution{}, cursor{}, modes[0], 1)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(st.SQL, "started AS") {
					t.Fatal("strategy none's batch looks for the settle cursor")
				}
				for i, m := range modes {
					if m.hist.cursor {
						t.Fatalf("batch %d was told the task has a cursor", i+1)
					}
				}
				return
			}
			if cursors != 1 || after.Int64 != firstEvent-1 {
				t.Fatalf("the settle cursor: %d rows, after %d; want 1, just before the first event %d", cursors, after.Int64, firstEvent)
			}
			if modes[0].hist.cursor {
				t.Fatal("the first batch was told the task has a cursor")
			}
			for i, m := range modes[1:] {
				if !m.hist.cursor {
					t.Fatalf("batch %d, after the cursor was written, was not told of it", i+2)
				}
			}
		})
	}
}
