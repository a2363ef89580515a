package recovery

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDoctor: each kind of protocol violation is found once: a claim by
// a node with no record, a claim on an instance in its begin state, a
// claim a Not responding node took after it was marked, instances a run
// repaired out of the interim state with no claim on them (not the one
// whose claim the run expired), and an instance an engine moved while
// the run's batch was deciding it (a late write). A later look finds the
// lasting ones again without counting them twice.
func TestDoctor(t *testing.T) {
	r, db, o := setup(t)
	ctx := context.Background()
	db.MustExec(`INSERT INTO enginehealth.nodes (name, incarnation, hostname, status, last_active, status_changed_at, status_changed_by, status_reason, api_address)
		VALUES ('n-ok', gen_random_uuid(), 'n-ok', 'Ready', now(), now(), 'm', 'ok', '127.0.0.1:1'),
			('n-dead', gen_random_uuid(), 'n-dead', 'Not responding', now() - interval '10 minutes', now() - interval '10 minutes', 'm', 'no heartbeat', '127.0.0.1:2');
		UPDATE app.orders SET status = 'Paid' WHERE id = 3;
		INSERT INTO app.orders_claim VALUES (3, 'n-ok', 't3', now(), now() + interval '1h'), (4, 'n-dead', 't4', now(), now() + interval '1h')`)

	// Order 7 is moved by an "engine" while the run decides it: its
	// update waits for the engine's row lock, then finds the row changed.
	r.lockWait = time.Minute
	engine, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Rollback()
	engine.MustExec(`UPDATE app.orders SET status = 'Shipped' WHERE id = 7`)
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := r.Recover(ctx, o, TriggerManual, Scope{Workflows: []string{"orders"}}, nil)
		done <- outcome{res, err}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := db.Get(&waiting, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'WITH s AS MATERIALIZED (%'`); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the repair never waited for the engine's row lock")
		}
		select {
		case out := <-done:
			t.Fatalf("the repair ended before the engine's write: %+v, %v", out.res, out.err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := engine.Commit(); err != nil {
		t.Fatal(err)
	}
	out := <-done
	if out.err != nil {
		t.Fatal(out.err)
	}
	if len(out.res.Tasks) != 1 || out.res.Tasks[0].Lost != 1 || out.res.Tasks[0].Done != 3 {
		t.Fatalf("the run: %+v", out.res.Tasks)
	}

	found, err := r.Doctor(ctx, o, out.res.RunID, out.res.Tasks)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"claim_by_not_responding orders n-dead 1", "claim_not_interim orders n-ok 1", "claim_without_node orders n2 1",
		"interim_without_claim orders  2", "late_write orders  1"}
	if got := counts(found); !slices.Equal(got, want) {
		t.Fatalf("found %q, want %q", got, want)
	}
	var instances []string
	if err := db.Select(&instances, `SELECT instance FROM enginehealth.protocol_violations WHERE kind = 'interim_without_claim' ORDER BY 1`); err != nil {
		t.Fatal(err)
	}
	if strings.Join(instances, ",") != "5,6" {
		t.Fatalf("interim without a claim: %v (order 1's claim expired: no finding)", instances)
	}

	// Another run: the lasting claims are not counted again.
	res, err := r.Recover(ctx, o, TriggerManual, Scope{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := r.Doctor(ctx, o, res.RunID, res.Tasks); err != nil || len(again) != 0 {
		t.Fatalf("a second look: %q, %v", counts(again), err)
	}
	sum, examples, err := r.Violations(ctx, time.Now().Add(-time.Hour), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := counts(sum); !slices.Equal(got, want) || len(examples) != 5 || examples[0].Kind != ViolationClaimByNotResponding ||
		!strings.Contains(examples[0].Detail, "by n-dead, marked Not responding at") {
		t.Fatalf("violations %q, %d examples: %+v", got, len(examples), examples)
	}
}

func counts(vs []ViolationCount) []string {
	var out []string
	for _, v := range vs {
		out = append(out, fmt.Sprintf("%s %s %s %d", v.Kind, v.Workflow, v.Node, v.Count))
	}
	slices.Sort(out)
	return out
}
