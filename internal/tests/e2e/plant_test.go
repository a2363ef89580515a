package e2e

import (
	"context"
	"testing"

	"github.com/enginehealth/enginehealth/internal/app/demoengine"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
)

// plants break each invariant of the checker by hand: statements run in
// one transaction each, as the application named (a sidecar, an engine,
// the test), on a recorded database with 20 orders in Created.
var plants = map[string][]planted{
	"terms never go back (events in the order written)": {
		{"test", `INSERT INTO enginehealth.events (kind, actor, term) VALUES ('paused', 'node-a (operator)', 5)`},
		{"test", `INSERT INTO enginehealth.events (kind, actor, term) VALUES ('resumed', 'node-b (operator)', 3)`},
	},
	"terms never go back (runs in the order begun)": {
		{"test", `INSERT INTO enginehealth.runs (term, master, kind, trigger, status) VALUES (5, 'node-a', 'check', 'periodic', 'finished'),
			(3, 'node-b', 'check', 'periodic', 'finished')`},
	},
	"one master per term": {
		{"test", `INSERT INTO enginehealth.events (kind, actor, term) VALUES ('master_elected', 'node-a', 7), ('master_elected', 'node-b', 7)`},
		{"test", `INSERT INTO enginehealth.events (kind, actor, term) VALUES ('master_elected', 'node-a', 8);
			INSERT INTO enginehealth.runs (term, master, kind, trigger, status) VALUES (8, 'node-a', 'check', 'periodic', 'finished'),
				(8, 'node-b', 'check', 'periodic', 'finished')`},
	},
	"sidecar moves are fenced by the recorded term": {
		// Holding the term row, with events of a term not recorded.
		{"enginehealth/node-a", `SELECT term FROM enginehealth.leader_term FOR SHARE; UPDATE demo.orders SET status = 'Reserving' WHERE id = 1;
			INSERT INTO enginehealth.events (kind, actor, term, workflow, instance, from_state, to_state) VALUES
				('instance_repaired', 'node-a', 99, 'orders', '1', 'Created', 'Reserving')`},
		// Not holding it.
		{"enginehealth/node-b", `UPDATE demo.orders SET status = 'Reserving' WHERE id = 11;
			INSERT INTO enginehealth.events (kind, actor, term, workflow, instance, from_state, to_state)
				SELECT 'instance_repaired', 'node-b', term, 'orders', '11', 'Created', 'Reserving' FROM enginehealth.leader_term`},
	},
	"no instance under a live claim was repaired": {
		{"test", `UPDATE demo.orders SET status = 'Reserving' WHERE id = 2;
			INSERT INTO demo.orders_claim VALUES (2, 'node-b', 'tok', now(), now() + interval '1 hour')`},
		{"enginehealth/node-a", `UPDATE demo.orders SET status = 'Created' WHERE id = 2;
			INSERT INTO enginehealth.events (kind, actor, term, workflow, instance, from_state, to_state) VALUES
				('instance_repaired', 'node-a', 1, 'orders', '2', 'Reserving', 'Created')`},
	},
	"no repair overwritten by an engine's late write (engines move only under their own claims)": {
		{"engine/node-a", `UPDATE demo.orders SET status = 'Reserved' WHERE id = 3`},
		{"worker-7", `UPDATE demo.orders SET status = 'Reserving' WHERE id = 14`},
	},
	"every sidecar change has exactly one event": {
		{"enginehealth/node-a", `UPDATE demo.orders SET status = 'Reserving' WHERE id = 4`},
	},
	"every instance event that moves has its move": {
		{"enginehealth/node-a", `INSERT INTO enginehealth.events (kind, actor, term, workflow, instance, from_state, to_state) VALUES
			('instance_repaired', 'node-a', 1, 'orders', '5', 'Reserving', 'Created')`},
	},
	"every run ended (by its master or a later one)": {
		{"test", `INSERT INTO enginehealth.runs (term, master, kind, trigger, status) VALUES (1, 'node-a', 'check', 'periodic', 'running'),
			(1, 'node-a', 'check', 'periodic', 'finished')`},
	},
	"retries numbered 1, 2, … with none counted twice or skipped, none beyond max_attempts": {
		{"test", `INSERT INTO enginehealth.attempts (workflow, instance, task, attempt, state, cause, left_in) VALUES
			('orders', '6', 'reserve', 2, 'retried', 'interrupt', 'Reserving');
			INSERT INTO enginehealth.events (kind, actor, term, workflow, instance, task, from_state, to_state, attempt) VALUES
				('instance_repaired', 'node-a', 1, 'orders', '6', 'reserve', 'Reserving', 'Created', 1)`},
		// Retries at once (no row) numbered 1 twice.
		{"test", `INSERT INTO enginehealth.events (kind, actor, term, workflow, instance, task, from_state, to_state, attempt) VALUES
				('instance_repaired', 'node-a', 1, 'orders', '7', 'reserve', 'Reserving', 'Created', 1),
				('instance_repaired', 'node-a', 1, 'orders', '7', 'reserve', 'Reserving', 'Created', 1)`},
	},
	"an instance is parked (retry scheduled, held) once at a time": {
		{"test", `INSERT INTO enginehealth.events (kind, actor, term, workflow, instance, task, from_state, attempt) VALUES
			('retry_scheduled', 'node-a', 1, 'orders', '7', 'ship', 'Shipping', 1), ('retry_scheduled', 'node-b', 2, 'orders', '7', 'ship', 'Shipping', 1)`},
	},
	"a held instance moves only by an operator's decision": {
		{"test", `INSERT INTO enginehealth.events (kind, actor, term, workflow, instance, task, from_state) VALUES
			('instance_held', 'node-a', 1, 'orders', '8', 'deliver', 'Delivering')`},
		{"engine/node-a", `UPDATE demo.orders SET status = 'Delivered' WHERE id = 8`},
	},
	"decisions on holds are made by operators": {
		{"test", `INSERT INTO enginehealth.events (kind, actor, term, workflow, instance, task) VALUES ('hold_decided', 'node-a', 1, 'orders', '9', 'deliver')`},
	},
	"a node leaves Unexpected shutdown only by an ack": {
		{"test", `INSERT INTO enginehealth.nodes (name, incarnation, hostname, status, status_changed_by) VALUES
			('node-a', gen_random_uuid(), 'h', 'Unexpected shutdown', 'node-a')`},
		{"enginehealth/node-a", `UPDATE enginehealth.nodes SET status = 'Recovering' WHERE name = 'node-a'`},
	},
	"a killed node comes back in Unexpected shutdown": {
		{"test", `INSERT INTO enginehealth.nodes (name, incarnation, hostname, status, status_changed_by) VALUES
			('node-a', gen_random_uuid(), 'h', 'Ready', 'node-a'); INSERT INTO faults.kills (name) VALUES ('node-a')`},
		{"enginehealth/node-a", `UPDATE enginehealth.nodes SET status = 'Recovering', incarnation = gen_random_uuid() WHERE name = 'node-a'`},
		// A restore the node reported before its kill excuses nothing.
		{"test", `INSERT INTO enginehealth.nodes (name, incarnation, hostname, status, status_changed_by) VALUES
			('node-c', gen_random_uuid(), 'h', 'Ready', 'node-c');
			INSERT INTO enginehealth.events (kind, actor, node, reason) VALUES ('node_status', 'node-c', 'node-c', 'registration restored: lost')`},
		{"test", `INSERT INTO faults.kills (name) VALUES ('node-c')`},
		{"enginehealth/node-c", `DELETE FROM enginehealth.nodes WHERE name = 'node-c'`},
		// Not planted: a registration the database lost after the kill
		// (restored, and said so) excuses the node's next change.
		{"test", `INSERT INTO enginehealth.nodes (name, incarnation, hostname, status, status_changed_by) VALUES
			('node-b', gen_random_uuid(), 'h', 'Ready', 'node-b'); INSERT INTO faults.kills (name) VALUES ('node-b')`},
		{"enginehealth/node-b", `INSERT INTO enginehealth.events (kind, actor, node, reason) VALUES
			('node_status', 'node-b', 'node-b', 'registration restored: the database had lost it')`},
		{"enginehealth/node-b", `DELETE FROM enginehealth.nodes WHERE name = 'node-b'`},
		// Nor the restore itself, which moves the record and says so in
		// one transaction (the move first).
		{"test", `INSERT INTO enginehealth.nodes (name, incarnation, hostname, status, status_changed_by) VALUES
			('node-d', gen_random_uuid(), 'h', 'Not responding', 'node-d'); INSERT INTO faults.kills (name) VALUES ('node-d')`},
		{"enginehealth/node-d", `UPDATE enginehealth.nodes SET status = 'Ready' WHERE name = 'node-d';
			INSERT INTO enginehealth.events (kind, actor, node, reason) VALUES
				('node_status', 'node-d', 'node-d', 'registration restored: the database had lost it')`},
		// Nor a kill while the record awaited an ack: the restart keeps
		// it in Unexpected shutdown (no move), an ack takes it out, and
		// the node's next change is its own.
		{"test", `INSERT INTO enginehealth.nodes (name, incarnation, hostname, status, status_changed_by) VALUES
			('node-e', gen_random_uuid(), 'h', 'Unexpected shutdown', 'node-e'); INSERT INTO faults.kills (name) VALUES ('node-e')`},
		{"enginehealth/node-a/api", `UPDATE enginehealth.nodes SET status = 'Recovering' WHERE name = 'node-e'`},
		{"enginehealth/node-e", `DELETE FROM enginehealth.nodes WHERE name = 'node-e'`},
		// But a kill after the ack, whose restart is not recorded in
		// Unexpected shutdown, is still one.
		{"test", `INSERT INTO enginehealth.nodes (name, incarnation, hostname, status, status_changed_by) VALUES
			('node-f', gen_random_uuid(), 'h', 'Unexpected shutdown', 'node-f')`},
		{"enginehealth/node-a/api", `UPDATE enginehealth.nodes SET status = 'Ready' WHERE name = 'node-f'; INSERT INTO faults.kills (name) VALUES ('node-f')`},
		{"enginehealth/node-f", `UPDATE enginehealth.nodes SET status = 'Recovering' WHERE name = 'node-f'`},
	},
	"the disruption guard: no pass marks most nodes": {
		{"test", `INSERT INTO enginehealth.nodes (name, incarnation, hostname, status, status_changed_by)
			SELECT n, gen_random_uuid(), 'h', 'Ready', n FROM unnest('{node-a,node-b,node-c}'::text[]) n`},
		{"enginehealth/node-a", `UPDATE enginehealth.nodes SET status = 'Not responding' WHERE name IN ('node-b', 'node-c')`},
	},
	"no instance left interim and unclaimed after the final pass": {
		{"test", `UPDATE demo.orders SET status = 'Billing' WHERE id = 10`},
		// Parked, but in another state, or with its retry long overdue.
		{"test", `UPDATE demo.orders SET status = 'Billing' WHERE id = 12; UPDATE demo.orders SET status = 'Shipping' WHERE id = 13;
			INSERT INTO enginehealth.attempts (workflow, instance, task, attempt, state, cause, left_in, next_attempt_at) VALUES
				('orders', '12', 'deliver', 0, 'held', 'interrupt', 'Delivering', NULL),
				('orders', '13', 'ship', 1, 'waiting', 'interrupt', 'Shipping', now() - interval '1 hour')`},
	},
}

type planted struct{ app, sql string }

// plantedMore: the invariants whose plants make more than one violation,
// each to be reported.
var plantedMore = map[string]int{
	"no repair overwritten by an engine's late write (engines move only under their own claims)": 2,
	"one master per term": 2,
	"retries numbered 1, 2, … with none counted twice or skipped, none beyond max_attempts": 2,
	"a killed node comes back in Unexpected shutdown":                                       3,
	"sidecar moves are fenced by the recorded term":                                         2,
	"no instance left interim and unclaimed after the final pass":                           3,
}

// TestInvariantsBite: each invariant of the checker holds on a clean
// record and reports what is planted against it (TestCheckerBites shows
// the same for the safety mechanisms, on a real cluster). An invariant
// without a plant fails the test.
func TestInvariantsBite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := &faultRun{t: t}
	for _, inv := range r.invariants() {
		t.Run(inv.name, func(t *testing.T) {
			ps, ok := plants[inv.name]
			if !ok {
				t.Fatalf("no plant for invariant %q", inv.name)
			}
			c := newCluster(t)
			if _, err := pgdb.Migrate(ctx, c.db, pgdb.DefaultSchema); err != nil {
				t.Fatal(err)
			}
			c.db.MustExec(demoengine.Schema)
			installRecorder(t, c)
			c.db.MustExec(`INSERT INTO demo.orders (status) SELECT 'Created' FROM generate_series(1, 20)`)
			r := &faultRun{t: t, c: c}
			if bad, err := r.violated(inv.name); err != nil || bad {
				t.Fatalf("violated before the plant: %v %v", bad, err)
			}
			for _, p := range ps {
				conn, err := c.db.Connx(ctx)
				if err != nil {
					t.Fatal(err)
				}
				tx, err := conn.BeginTxx(ctx, nil)
				if err == nil {
					_, err = tx.ExecContext(ctx, `SELECT set_config('application_name', $1, true)`, p.app)
				}
				if err == nil {
					_, err = tx.ExecContext(ctx, p.sql)
				}
				if err == nil {
					err = tx.Commit()
				}
				conn.Close()
				if err != nil {
					t.Fatalf("plant as %s: %v", p.app, err)
				}
			}
			want := max(plantedMore[inv.name], 1)
			if n, err := r.violationCount(inv.name); err != nil || n != want {
				t.Fatalf("the plant is reported %d times, want %d (%v)", n, want, err)
			}
		})
	}
	if len(plants) != len(r.invariants()) {
		t.Errorf("%d plants for %d invariants", len(plants), len(r.invariants()))
	}
}
