package recovery

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
)

// TestSecondInterruptionOnStaleStatistics: a second mass interruption, on
// statistics taken before the first (the instance table's had none in
// the interim state, the events table was young; autovacuum has not come
// by since), a settle pass between: the batch finds each instance's retries at once
// through the events' index on instance, one probe each, never with the
// window's range of the primary key nor by looping over one CTE for
// each row of another (a planner on those statistics did both: 30-40 s a
// batch, past the statement timeout, and the repair failed), and the
// repair retries every instance a second time.
func TestSecondInterruptionOnStaleStatistics(t *testing.T) {
	const rows = 3 * DefaultBatchSize // a window of 30k events: wider than histRangeSpan
	db := pg.MigratedDB(t)
	r, o := ordersRepairer(t, db)
	db.MustExec(`ALTER TABLE enginehealth.events SET (autovacuum_enabled = off); ALTER TABLE app.orders SET (autovacuum_enabled = off)`)
	wf := r.cfg.Workflows[0]
	ctx := context.Background()
	// The statistics were taken while every instance had ended, and
	// the events were few: then the mass interruption.
	db.MustExec(`INSERT INTO app.orders (status) SELECT 'Reserved' FROM generate_series(1, $1)`, rows)
	db.MustExec(`ANALYZE app.orders, enginehealth.events`)
	db.MustExec(`UPDATE app.orders SET status = 'Reserving'`)
	res, err := r.Recover(ctx, o, TriggerManual, Scope{}, nil)
	if err != nil || res.Done() != rows {
		t.Fatalf("first interruption: %d of %d: %v", res.Done(), rows, err)
	}
	if _, err := r.Settle(ctx, o, res.RunID, false); err != nil {
		t.Fatal(err)
	}
	db.MustExec(`UPDATE app.orders SET status = 'Reserving'`)
	h, err := r.histWindowOf(ctx, wf, wf.Tasks[0])
	if err != nil || h.upto-h.after <= histRangeSpan(DefaultBatchSize) {
		t.Fatalf("history window %+v (%v), want one wider than %d", h, err, histRangeSpan(DefaultBatchSize))
	}
	st, err := r.renderBatch(wf, r.cfg.Workflows[0].Tasks[0], CauseInterrupt, wf.Claims, attribution{}, cursor{}, batchMode{rowless: true, maxID: true, hist: h}, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var plan []byte
	if err := db.Get(&plan, "EXPLAIN (FORMAT JSON) "+st.SQL, st.Args...); err != nil {
		t.Fatal(err)
	}
	var root []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &root); err != nil || len(root) != 1 {
		t.Fatalf("plan: %v", err)
	}
	known := root[0].Plan.find(func(n planNode) bool { return n.Subplan == "CTE known" })
	if known == nil {
		t.Fatalf("no known in the plan:\n%s", plan)
	}
	if idx := known.indexes(); !slices.Contains(idx, "events_instance_idx") || slices.Contains(idx, "events_pkey") {
		t.Fatalf("known reads the events through %v, want their index on instance alone", idx)
	}
	if j := known.find(func(n planNode) bool {
		return n.Type == "Nested Loop" && len(n.Plans) == 2 &&
			n.Plans[0].Type == "CTE Scan" && n.Plans[1].Type == "CTE Scan"
	}); j != nil {
		t.Fatalf("known loops over one CTE for each row of another:\n%s", plan)
	}
	res, err = r.Recover(ctx, o, TriggerManual, Scope{}, nil)
	if err != nil || res.Done() != rows {
		t.Fatalf("second interruption: %d of %d: %v", res.Done(), rows, err)
	}
	var second int
	if err := db.Get(&second, `SELECT count(*) FROM enginehealth.events WHERE attempt = 2 AND run_id = $1`, res.RunID); err != nil || second != rows {
		t.Fatalf("%d instances retried a second time (%v), want %d", second, err, rows)
	}
}
