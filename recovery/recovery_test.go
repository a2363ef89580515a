package recovery

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/etcdtest"
	"github.com/enginehealth/enginehealth/internal/testkit/leadertest"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
	"github.com/enginehealth/enginehealth/leader"
)

var (
	pg   *pgtest.Server
	etcd *etcdtest.Etcd
)

func TestMain(m *testing.M) {
	testkit.Main(m, func(m *testing.M) int { return leadertest.Main(m, &pg, &etcd) })
}

// orders: a claimable workflow with one non-atomic task; reports: a
// non-claimable one with an atomic task.
var (
	ordersClaims = &claims.Table{Instances: "app.orders", IDColumn: "id", StatusColumn: "status",
		Claims: "app.orders_claim", InstanceColumn: "instance_id", NodeColumn: "node", TokenColumn: "token",
		ClaimedAtColumn: "claimed_at", ExpiresAtColumn: "expires_at"}
	orders = Workflow{Name: "orders", Table: "app.orders", IDColumn: "id", StatusColumn: "status", Claims: ordersClaims,
		Tasks: []Task{{Task: claims.Task{Name: "ship", Begin: "Paid", Interim: "Shipping", Ends: []string{"Shipped"}, Failed: "ShipFailed"}}}}
	reports = Workflow{Name: "reports", Table: "app.reports", IDColumn: "id", StatusColumn: "state",
		Tasks: []Task{{Task: claims.Task{Name: "render", Begin: "Queued", Interim: "Rendering", Ends: []string{"Done"}, Failed: "Failed"}, AtomicInternal: true}}}
)

func setup(t testing.TB) (*Repairer, *sqlx.DB, *leader.Office) {
	t.Helper()
	db := pg.MigratedDB(t)
	db.MustExec(`CREATE SCHEMA app;
		CREATE TABLE app.orders (id bigserial PRIMARY KEY, status text NOT NULL);
		CREATE TABLE app.orders_claim (instance_id bigint PRIMARY KEY, node text NOT NULL, token text NOT NULL,
			claimed_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL);
		CREATE TABLE app.reports (id bigserial PRIMARY KEY, state text NOT NULL);
		INSERT INTO app.orders (status) SELECT 'Shipping' FROM generate_series(1, 7);
		INSERT INTO app.orders_claim VALUES (1, 'n1', 't', now() - interval '1h', now() - interval '1m'),
			(2, 'n2', 't', now(), now() + interval '1h');
		INSERT INTO app.reports (state) SELECT 'Rendering' FROM generate_series(1, 5);`)
	o := leadertest.Office(t, db, etcd.Endpoint, "enginehealth", "m")
	events := audit.New("enginehealth")
	r := testkit.Must(New(Config{DB: db, Fence: testkit.Must(leader.NewFence(leader.FenceConfig{DB: db, Schema: "enginehealth", Events: events})), Events: events, Schema: "enginehealth",
		Workflows: []Workflow{orders, reports}, BatchSize: 2, SettleBatchSize: 2, Log: leadertest.Quiet}))
	return r, db, o
}

func states(t *testing.T, db *sqlx.DB, q string) map[string]int {
	t.Helper()
	rows := []struct {
		S string `db:"s"`
		N int    `db:"n"`
	}{}
	if err := db.Select(&rows, q); err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for _, r := range rows {
		m[r.S] = r.N
	}
	return m
}

// TestDecideDefaults: with no policy configured, an interrupted atomic
// task goes back to begin at once up to DefaultAtomicMaxAttempts times,
// then fails as exhausted naming the nodes; a non-atomic one fails.
func TestDecideDefaults(t *testing.T) {
	rnd := func() float64 { return 0.5 }
	for k := range DefaultAtomicMaxAttempts {
		a := Decide(reports.Tasks[0], CauseInterrupt, History{Retries: k, Known: k > 0}, "", rnd)
		if a.Kind != ActRetry || a.To != "Queued" || a.Attempt != k+1 || a.State != AttemptRetried {
			t.Fatalf("atomic task after %d retries: %+v, want retry %d back to its begin state", k, a, k+1)
		}
	}
	a := Decide(reports.Tasks[0], CauseInterrupt, History{Retries: 10, Known: true, Nodes: []string{"n1", "n2"}}, "", rnd)
	if a.Kind != ActFail || a.To != "Failed" || a.State != AttemptExhausted || a.Reason != "interrupted: exhausted after 10 retries; interrupted on n1, n2" {
		t.Errorf("atomic task after 10 retries: %+v", a)
	}
	if a := Decide(orders.Tasks[0], CauseInterrupt, History{}, "", rnd); a.Kind != ActFail || a.To != "ShipFailed" || a.State != "" {
		t.Errorf("non-atomic task: %+v, want its failed state and no attempts row", a)
	}
}

// TestScope: a manual run names claimable workflows only, each once.
func TestScope(t *testing.T) {
	r := offline(Config{Workflows: []Workflow{orders, reports}, Log: leadertest.Quiet})
	if wfs, err := r.Claimable(Scope{}); err != nil || len(wfs) != 1 || wfs[0].Name != "orders" {
		t.Fatalf("empty scope: %+v %v", wfs, err)
	}
	for _, name := range []string{"reports", "nope"} {
		if _, err := r.Claimable(Scope{Workflows: []string{name}}); !errors.Is(err, ErrScope) {
			t.Errorf("scope %q: %v, want ErrScope", name, err)
		}
	}
	// A workflow named twice is one workflow (a plan counted it twice).
	if wfs, err := r.Claimable(Scope{Workflows: []string{"orders", "orders"}}); err != nil || len(wfs) != 1 {
		t.Fatalf("orders twice: %+v %v, want orders once", wfs, err)
	}
}

// TestPlanThenRecover: the plan changes nothing, and Recover does what it said: the
// expired claim goes, the live claim and its instance stay, the other
// unclaimed instances move in batches, one event each, counted in the run.
func TestPlanThenRecover(t *testing.T) {
	r, db, o := setup(t)
	ctx := context.Background()
	plan, err := r.Plan(ctx, Scope{})
	if err != nil || len(plan) != 1 || plan[0].ClaimsToExpire != 1 || plan[0].Tasks[0].Planned != 6 || plan[0].Tasks[0].To != "ShipFailed" {
		t.Fatalf("plan %+v %v", plan, err)
	}
	if st := states(t, db, `SELECT status AS s, count(*) AS n FROM app.orders GROUP BY 1`); st["Shipping"] != 7 {
		t.Fatalf("the plan changed something: %v", st)
	}
	var logs bytes.Buffer
	r.log = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	res, err := r.Recover(ctx, o, TriggerManual, Scope{}, nil)
	if err != nil || res.ClaimsExpired != 1 || res.Done() != 6 {
		t.Fatalf("recover %+v %v", res, err)
	}
	// One info line per batch (of 2), with the counts by action; one
	// debug line per instance, with its event's fields.
	var batches, failed int
	each, nodes := map[string]bool{}, 0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l struct {
			Level, Msg, Workflow, Task, Action string
			Failed, Retried                    int
			Event                              struct {
				Workflow, Task, Instance, Node string
				From                           string `json:"from_state"`
				To                             string `json:"to_state"`
			}
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		switch l.Msg {
		case "repair batch":
			batches++
			failed += l.Failed
			if l.Level != "INFO" || l.Workflow != "orders" || l.Task != "ship" || l.Retried != 0 {
				t.Fatalf("batch line %s", line)
			}
		case "instance repaired":
			e := l.Event
			if l.Level != "DEBUG" || e.Workflow != "orders" || e.Task != "ship" || l.Action != "failed" || e.From != "Shipping" ||
				e.To != "ShipFailed" || e.Instance == "" || each[e.Instance] {
				t.Fatalf("instance line %s", line)
			}
			each[e.Instance] = true
			if e.Node != "" {
				nodes++
			}
		}
	}
	if batches != 3 || failed != 6 {
		t.Fatalf("%d batch lines counting %d failed, want 3 counting 6:\n%s", batches, failed, logs.String())
	}
	if len(each) != 6 || nodes != 1 {
		t.Fatalf("%d instance lines (%d naming a node), want 6 (1):\n%s", len(each), nodes, logs.String())
	}
	d, err := r.Run(ctx, res.RunID)
	if err != nil || d.Status != "finished" || d.Took <= 0 || len(d.Counts) != 2 ||
		d.Counts[0] != (audit.Count{Workflow: "orders", Kind: audit.KindClaimExpired, Count: 1}) ||
		d.Counts[1] != (audit.Count{Workflow: "orders", Task: "ship", Kind: audit.KindRepair, To: "ShipFailed", Count: 6}) {
		t.Fatalf("run detail %+v %v", d, err)
	}
	if _, err := r.Run(ctx, res.RunID+100); !errors.Is(err, ErrNoRun) {
		t.Fatalf("unknown run: %v, want ErrNoRun", err)
	}
	if st := states(t, db, `SELECT status AS s, count(*) AS n FROM app.orders GROUP BY 1`); st["Shipping"] != 1 || st["ShipFailed"] != 6 {
		t.Fatalf("after recovery: %v", st)
	}
	var events, named int
	if err := db.Get(&events, `SELECT count(*) FROM enginehealth.events WHERE kind = 'instance_repaired' AND run_id = $1`, res.RunID); err != nil || events != 6 {
		t.Fatalf("%d repair events (%v), want 6", events, err)
	}
	// Only the instance whose claim this run expired names a node.
	if err := db.Get(&named, `SELECT count(*) FROM enginehealth.events WHERE kind = 'instance_repaired' AND node = 'n1'`); err != nil || named != 1 {
		t.Fatalf("%d repair events name n1 (%v), want 1", named, err)
	}
	rows, err := r.ListRuns(ctx, 10)
	if err != nil || len(rows) != 1 || rows[0].Status != "finished" || rows[0].Planned != 6 || rows[0].Done != 6 || rows[0].ClaimsExpired != 1 {
		t.Fatalf("runs %+v %v", rows, err)
	}
	// Start-up recovery handles the non-claimable workflow only.
	if _, err := r.Startup(ctx, o, nil); err != nil {
		t.Fatal(err)
	}
	if st := states(t, db, `SELECT state AS s, count(*) AS n FROM app.reports GROUP BY 1`); st["Queued"] != 5 {
		t.Fatalf("reports after start-up recovery: %v", st)
	}
}

// TestResumedRunNamesOnlyItsChainsExpiries: a run that resumes another
// names on a repair the node whose claim it, or a run it resumes,
// expired, and never the node of an older run's expiry (an instance
// interrupted again since, without a claim, is nobody's interruption).
func TestResumedRunNamesOnlyItsChainsExpiries(t *testing.T) {
	r, db, o := setup(t)
	ctx := context.Background()
	if res, err := r.Recover(ctx, o, TriggerManual, Scope{}, nil); err != nil || res.ClaimsExpired != 1 {
		t.Fatalf("first run %+v %v", res, err)
	}
	// 1 (whose claim, n1's, the first run expired) and 3 back in the
	// interim state without a claim; a run that died had expired n3's
	// claim on 3 (and the run after it resumes it).
	db.MustExec(`UPDATE app.orders SET status = 'Shipping' WHERE id IN (1, 3)`)
	var dead int64
	if err := db.Get(&dead, `INSERT INTO enginehealth.runs (term, master, kind, trigger, scope, status)
		VALUES (1, 'm', 'recovery', 'manual', '{}', 'interrupted') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	db.MustExec(`INSERT INTO enginehealth.events (kind, run_id, node, workflow, instance, from_state)
		VALUES ('claim_expired', $1, 'n3', 'orders', '3', 'Shipping')`, dead)
	res, err := r.Recover(ctx, o, TriggerManual, Scope{}, &dead)
	if err != nil || res.Done() != 2 {
		t.Fatalf("resumed run %+v %v", res, err)
	}
	var got []struct {
		Instance string         `db:"instance"`
		Node     sql.NullString `db:"node"`
	}
	if err := db.Select(&got, `SELECT instance, node FROM enginehealth.events WHERE kind = 'instance_repaired' AND run_id = $1 ORDER BY instance`, res.RunID); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Instance != "1" || got[0].Node.Valid || got[1].Instance != "3" || got[1].Node.String != "n3" {
		t.Fatalf("the resumed run's repairs name %+v, want 1 nobody's (n1's claim expired two runs before), 3 n3's", got)
	}
}

// TestInRunFailure: a failed run's row keeps a cause-free summary; the
// caller gets the whole error.
func TestInRunFailure(t *testing.T) {
	r, _, o := setup(t)
	ctx := context.Background()
	boom := errors.New(`pq: permission denied for table secret_orders (42501)`)
	run, err := r.InRun(ctx, o, RunSpec{Kind: KindCheck, Trigger: TriggerManual}, func(int64) error { return boom })
	if !errors.Is(err, boom) || run == 0 {
		t.Fatalf("InRun: run %d, %v", run, err)
	}
	rows, err := r.ListRuns(ctx, 1)
	if err != nil || len(rows) != 1 || rows[0].Status != "failed" || strings.Contains(rows[0].Error, "secret_orders") || rows[0].Error == "" {
		t.Fatalf("failed run row %+v %v", rows, err)
	}
	if un, err := r.Unfinished(ctx, o); err != nil || len(un) != 0 {
		t.Fatalf("unfinished %+v %v", un, err)
	}
}

// TestUnendedRunIsEndedByTheNextRun: when a run's end cannot be written
// (here its table is gone for a moment), the master ends it, as its work
// went, before its next run begins: it is not left running until another
// master takes office.
func TestUnendedRunIsEndedByTheNextRun(t *testing.T) {
	r, db, o := setup(t)
	ctx := context.Background()
	first, err := r.InRun(ctx, o, RunSpec{Kind: KindCheck, Trigger: TriggerManual}, func(int64) error {
		_, err := db.Exec(`ALTER TABLE enginehealth.runs RENAME TO runs_away`)
		return err
	})
	if err == nil || first == 0 {
		t.Fatalf("InRun with its table gone: run %d, %v", first, err)
	}
	db.MustExec(`ALTER TABLE enginehealth.runs_away RENAME TO runs`)
	if rows, err := r.ListRuns(ctx, 1); err != nil || len(rows) != 1 || rows[0].Status != "running" {
		t.Fatalf("before the next run: %+v %v", rows, err)
	}
	second, err := r.InRun(ctx, o, RunSpec{Kind: KindCheck, Trigger: TriggerManual}, func(int64) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	rows, err := r.ListRuns(ctx, 2)
	if err != nil || len(rows) != 2 || rows[0].ID != second || rows[1].ID != first || rows[1].Status != "finished" || rows[0].Status != "finished" {
		t.Fatalf("runs %+v %v: want both finished", rows, err)
	}
}

// TestLockedRowIsSkipped: a row someone holds locked does not stall a
// repair. The batch that meets it waits a moment, is done again skipping
// locked rows (all-or-nothing: nothing is moved or recorded twice), and
// the row is repaired by the next run once the lock is gone.
func TestLockedRowIsSkipped(t *testing.T) {
	r, db, o := setup(t)
	ctx := context.Background()
	locker, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Rollback()
	locker.MustExec(`SELECT 1 FROM app.orders WHERE id = 5 FOR UPDATE`)
	res, err := r.Recover(ctx, o, TriggerManual, Scope{}, nil)
	if err != nil || res.ClaimsExpired != 1 || res.Done() != 5 {
		t.Fatalf("recover with row 5 locked: %+v %v", res, err)
	}
	left := states(t, db, `SELECT id::text AS s, 1 AS n FROM app.orders WHERE status = 'Shipping'`)
	if len(left) != 2 || left["2"] != 1 || left["5"] != 1 {
		t.Fatalf("left in Shipping: %v, want 2 (claimed) and 5 (locked)", left)
	}
	var events int
	if err := db.Get(&events, `SELECT count(DISTINCT instance) FROM enginehealth.events WHERE kind = 'instance_repaired' AND run_id = $1 HAVING count(*) = count(DISTINCT instance)`, res.RunID); err != nil || events != 5 {
		t.Fatalf("%d distinct repair events, each once (%v), want 5", events, err)
	}
	if err := locker.Rollback(); err != nil {
		t.Fatal(err)
	}
	res, err = r.Recover(ctx, o, TriggerManual, Scope{}, nil)
	if err != nil || res.Done() != 1 {
		t.Fatalf("recover after the lock is gone: %+v %v", res, err)
	}
}

// TestLockedAttemptsRowIsSkipped: an instance whose attempts row someone
// holds locked does not stall a repair either: the batch skipping locked
// rows leaves that instance for the next pass too, as it leaves a locked
// instance row, and repairs the rest (it waited on the attempts row
// until the statement timed out, and failed the run).
func TestLockedAttemptsRowIsSkipped(t *testing.T) {
	r, db, o := setup(t)
	db.MustExec(`INSERT INTO enginehealth.attempts (workflow, instance, task, attempt, state, cause, left_in, last_attempt_at)
		VALUES ('orders', '4', 'ship', 1, 'retried', 'interrupt', 'Shipping', now() - interval '1 hour')`)
	locker, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Rollback()
	locker.MustExec(`SELECT 1 FROM enginehealth.attempts WHERE instance = '4' FOR UPDATE`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := r.Recover(ctx, o, TriggerManual, Scope{}, nil)
	if err != nil || res.Done() != 5 {
		t.Fatalf("recover with the attempts row of 4 locked: %d repaired (%v), want 5", res.Done(), err)
	}
	left := states(t, db, `SELECT id::text AS s, 1 AS n FROM app.orders WHERE status = 'Shipping'`)
	if len(left) != 2 || left["2"] != 1 || left["4"] != 1 {
		t.Fatalf("left in Shipping: %v, want 2 (claimed) and 4 (its attempts row locked)", left)
	}
	if err := locker.Rollback(); err != nil {
		t.Fatal(err)
	}
	res, err = r.Recover(ctx, o, TriggerManual, Scope{}, nil)
	if err != nil || res.Done() != 1 {
		t.Fatalf("recover after the lock is gone: %+v %v", res, err)
	}
	if a := attemptOf(t, db, "orders", "4", "ship"); a.State != AttemptFailed {
		t.Fatalf("instance 4 after the lock: %+v, want failed as the others (the task's policy)", a)
	}
}

// TestRowChangedDuringBatchDoesNotEndTask: a row someone changes (and
// commits) between a batch's pick and its UPDATE drops out of the batch;
// the task goes on with the next batch all the same.
func TestRowChangedDuringBatchDoesNotEndTask(t *testing.T) {
	r, db, o := setup(t)
	r.lockWait = time.Minute // the batch waits for the other writer, then sees its change
	ctx := context.Background()
	other, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	other.MustExec(`UPDATE app.orders SET status = 'Shipped' WHERE id = 4`)
	type result struct {
		res Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := r.Recover(ctx, o, TriggerManual, Scope{}, nil)
		done <- result{res, err}
	}()
	// Batches of 2 in id order: [1 3], then [4 5], whose UPDATE waits on
	// row 4; commit the change once it waits.
	testkit.Eventually(t, 10*time.Second, "a repair batch waiting on row 4", func() (bool, error) {
		var waiting int
		err := db.Get(&waiting, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`)
		return waiting > 0, err
	})
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil || got.res.Done() != 5 {
		t.Fatalf("recover: %+v %v, want 5 repaired (1, 3, 5, 6, 7)", got.res, got.err)
	}
	if st := states(t, db, `SELECT status AS s, count(*) AS n FROM app.orders GROUP BY 1`); st["Shipping"] != 1 || st["Shipped"] != 1 || st["ShipFailed"] != 5 {
		t.Fatalf("after recovery: %v, want 2 (claimed) Shipping, 4 Shipped, the rest ShipFailed", st)
	}
}

// TestKeyShareLockDoesNotStopRepair: once a locked row sends the repair to
// SKIP LOCKED, a row held only FOR KEY SHARE (what a foreign-key check
// takes) is still repaired; the row held FOR UPDATE, and one whose claim
// another transaction is inserting under its lock, are left alone.
func TestKeyShareLockDoesNotStopRepair(t *testing.T) {
	r, db, o := setup(t)
	ctx := context.Background()
	lock := func(q string) {
		tx, err := db.Beginx()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback() })
		tx.MustExec(q)
	}
	lock(`SELECT 1 FROM app.orders WHERE id = 3 FOR UPDATE`)
	lock(`SELECT 1 FROM app.orders WHERE id = 6 FOR KEY SHARE`)
	lock(`SELECT 1 FROM app.orders WHERE id = 7 FOR UPDATE; INSERT INTO app.orders_claim VALUES (7, 'n3', 't', now(), now() + interval '1h')`)
	res, err := r.Recover(ctx, o, TriggerManual, Scope{}, nil)
	if err != nil || res.Done() != 4 {
		t.Fatalf("recover: %+v %v, want 4 repaired (1, 4, 5, 6)", res, err)
	}
	left := states(t, db, `SELECT id::text AS s, 1 AS n FROM app.orders WHERE status = 'Shipping'`)
	if len(left) != 3 || left["2"] != 1 || left["3"] != 1 || left["7"] != 1 {
		t.Fatalf("left in Shipping: %v, want 2 (claimed), 3 (locked) and 7 (being claimed)", left)
	}
}

// TestActedRuns: the runs that did something, newest first; idle
// periodic passes are left out.
func TestActedRuns(t *testing.T) {
	r, db, _ := setup(t)
	var ids []int64
	for _, q := range []string{
		`INSERT INTO enginehealth.runs (term, master, trigger, status, claims_expired) VALUES (1, 'm', 'periodic', 'finished', 2) RETURNING id`,
		`INSERT INTO enginehealth.runs (term, master, trigger, status) VALUES (1, 'm', 'periodic', 'finished') RETURNING id`,
		`INSERT INTO enginehealth.runs (term, master, trigger, status) VALUES (1, 'm', 'manual', 'finished') RETURNING id`,
		`INSERT INTO enginehealth.runs (term, master, trigger, status, error) VALUES (1, 'm', 'periodic', 'failed', 'boom') RETURNING id`,
		`INSERT INTO enginehealth.runs (term, master, trigger, status) VALUES (1, 'm', 'periodic', 'finished') RETURNING id`,
	} {
		var id int64
		if err := db.Get(&id, q); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rs, err := r.ActedRuns(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, row := range rs {
		got = append(got, row.ID)
	}
	if want := []int64{ids[3], ids[2], ids[0]}; !slices.Equal(got, want) {
		t.Fatalf("acted runs %v, want %v (all: %v)", got, want, ids)
	}
}

// TestRepairRefusedOnAnotherCluster: a fence that learnt one PostgreSQL
// cluster lets no repair commit on a server of another (a pooler that moved
// its server connections to it unseen by the sidecar's per-connection
// check): the fenced transaction checks its server with its term.
func TestRepairRefusedOnAnotherCluster(t *testing.T) {
	t.Parallel()
	r, db, o := setup(t)
	ctx := context.Background()
	// The cluster learnt is another one's (as if this server had moved
	// behind the address after the fence learnt the right one).
	other := pgtest.New(t)
	odb := other.MigratedDB(t)
	cluster := pgdb.NewCluster("enginehealth", nil)
	if err := cluster.Learn(ctx, odb); err != nil {
		t.Fatal(err)
	}
	r.cfg.Fence = testkit.Must(leader.NewFence(leader.FenceConfig{DB: db, Schema: "enginehealth", Events: r.cfg.Events, Cluster: cluster}))
	_, err := r.Recover(ctx, o, TriggerManual, Scope{}, nil)
	var wrong *pgdb.WrongClusterError
	if !errors.As(err, &wrong) {
		t.Fatalf("a repair on another cluster than learnt: %v, want a *pgdb.WrongClusterError", err)
	}
	if got := states(t, db, `SELECT status AS s, count(*) AS n FROM app.orders GROUP BY 1`); got["Shipping"] != 7 {
		t.Fatalf("instances after the refused repair: %v, want all 7 still Shipping", got)
	}
	// The cluster it is on: the same repair goes through.
	right := pgdb.NewCluster("enginehealth", nil)
	if err := right.Learn(ctx, db); err != nil {
		t.Fatal(err)
	}
	r.cfg.Fence = testkit.Must(leader.NewFence(leader.FenceConfig{DB: db, Schema: "enginehealth", Events: r.cfg.Events, Cluster: right}))
	if _, err := r.Recover(ctx, o, TriggerManual, Scope{}, nil); err != nil {
		t.Fatalf("the repair on its own cluster: %v", err)
	}
}

// TestRepairsUUIDIds: a workflow whose ids are uuids (a type with an
// order but no max) is repaired in batches, its interrupted instances
// and its failed ones (the failure cursor, after a first pass sets the
// watermark) alike.
// TestCanonicalInstance: an instance named as an operator may write it
// is read as the events name it (the id column's own text), so that an
// event filter finds it; a name that is no id of the table, or of no
// configured workflow, is kept as given.
func TestCanonicalInstance(t *testing.T) {
	r, _, _ := setup(t)
	ctx := context.Background()
	for _, c := range []struct{ workflow, in, want string }{
		{"orders", "007", "7"}, {"orders", " 7", "7"}, {"orders", "+7", "7"},
		{"orders", "x", "x"}, {"orders", "99", "99"}, {"nope", "007", "007"},
	} {
		if got, err := r.CanonicalInstance(ctx, c.workflow, c.in); err != nil || got != c.want {
			t.Errorf("%s/%q: %q (%v), want %q", c.workflow, c.in, got, err, c.want)
		}
	}
}

func TestRepairsUUIDIds(t *testing.T) {
	db := pg.MigratedDB(t)
	db.MustExec(`CREATE SCHEMA app;
		CREATE TABLE app.docs (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), status text NOT NULL,
			updated_at timestamptz NOT NULL DEFAULT now());
		CREATE TABLE app.docs_claim (instance_id uuid PRIMARY KEY, node text NOT NULL, token text NOT NULL,
			claimed_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL);
		INSERT INTO app.docs (status) SELECT 'Rendering' FROM generate_series(1, 5);
		INSERT INTO app.docs (status) SELECT 'Done' FROM generate_series(1, 5);`)
	docs := Workflow{Name: "docs", Table: "app.docs", IDColumn: "id", StatusColumn: "status", UpdatedColumn: "updated_at",
		Claims: &claims.Table{Instances: "app.docs", IDColumn: "id", StatusColumn: "status", Claims: "app.docs_claim",
			InstanceColumn: "instance_id", NodeColumn: "node", TokenColumn: "token", ClaimedAtColumn: "claimed_at", ExpiresAtColumn: "expires_at"},
		Tasks: []Task{{Task: claims.Task{Name: "render", Begin: "Queued", Interim: "Rendering", Ends: []string{"Done"}, Failed: "RenderFailed"},
			AtomicInternal: true, OnFailure: Policy{Strategy: StrategyRetry, MaxAttempts: 2,
				Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}}}}}
	o := leadertest.Office(t, db, etcd.Endpoint, "enginehealth", "m")
	events := audit.New("enginehealth")
	r := testkit.Must(New(Config{DB: db, Fence: testkit.Must(leader.NewFence(leader.FenceConfig{DB: db, Schema: "enginehealth", Events: events})),
		Events: events, Schema: "enginehealth", Workflows: []Workflow{docs}, BatchSize: 2, SettleBatchSize: 2, Log: leadertest.Quiet}))
	ctx := context.Background()
	res, err := r.Recover(ctx, o, TriggerManual, Scope{}, nil)
	if err != nil || res.Done() != 5 {
		t.Fatalf("interrupted uuid instances: %d repaired, %v; want 5", res.Done(), err)
	}
	if got := states(t, db, `SELECT status AS s, count(*) AS n FROM app.docs GROUP BY status`); got["Queued"] != 5 {
		t.Fatalf("after the repair: %v, want 5 Queued", got)
	}
	// The first failure pass sets the watermark; the engine then fails
	// the five it finished, and the next pass schedules their retries.
	if _, err := r.Failures(ctx, o, res.RunID); err != nil {
		t.Fatal(err)
	}
	db.MustExec(`UPDATE app.docs SET status = 'RenderFailed', updated_at = now() + interval '1 second' WHERE status = 'Done'`)
	fs, err := r.Failures(ctx, o, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var scheduled int64
	for _, f := range fs {
		scheduled += f.Scheduled
	}
	var waiting int
	if err := db.Get(&waiting, `SELECT count(*) FROM enginehealth.attempts WHERE workflow = 'docs' AND state = 'waiting'`); err != nil {
		t.Fatal(err)
	}
	if scheduled != 5 || waiting != 5 {
		t.Fatalf("failed uuid instances: %d retries scheduled, %d attempts rows waiting; want 5 and 5 (%+v)", scheduled, waiting, fs)
	}
}

// TestCursorByMax: a task's batches after its first read their cursor,
// the greatest id picked, with max() where the ids' type has one (bigint,
// text in the column's collation), and by sorting the pick where it has
// none (uuid); either way every instance is repaired once.
func TestCursorByMax(t *testing.T) {
	for _, tc := range []struct {
		typ, ids string
		max      bool
	}{
		{"bigint", "SELECT i FROM generate_series(1, 5) i", true},
		{"text", "SELECT i::text FROM unnest(ARRAY[1, 2, 9, 10, 100]) i", true},
		{"uuid", "SELECT gen_random_uuid() FROM generate_series(1, 5)", false},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			db := pg.MigratedDB(t)
			db.MustExec(`CREATE SCHEMA app; CREATE TABLE app.items (id ` + tc.typ + ` PRIMARY KEY, status text NOT NULL);
				CREATE TABLE app.items_claim (instance_id ` + tc.typ + ` PRIMARY KEY, node text NOT NULL, token text NOT NULL,
					claimed_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL)`)
			db.MustExec(`INSERT INTO app.items (id, status) SELECT i, 'Packing' FROM (` + tc.ids + `) AS s(i)`)
			items := Workflow{Name: "items", Table: "app.items", IDColumn: "id", StatusColumn: "status",
				Claims: &claims.Table{Instances: "app.items", IDColumn: "id", StatusColumn: "status", Claims: "app.items_claim",
					InstanceColumn: "instance_id", NodeColumn: "node", TokenColumn: "token", ClaimedAtColumn: "claimed_at", ExpiresAtColumn: "expires_at"},
				Tasks: []Task{{Task: claims.Task{Name: "pack", Begin: "Queued", Interim: "Packing", Ends: []string{"Packed"}, Failed: "Failed"}, AtomicInternal: true}}}
			o := leadertest.Office(t, db, etcd.Endpoint, "enginehealth", "m")
			events := audit.New("enginehealth")
			r := testkit.Must(New(Config{DB: db, Fence: testkit.Must(leader.NewFence(leader.FenceConfig{DB: db, Schema: "enginehealth", Events: events})),
				Events: events, Schema: "enginehealth", Workflows: []Workflow{items}, BatchSize: 2, SettleBatchSize: 2, Log: leadertest.Quiet}))
			var maxIDs []bool
			r.onBatch = func(m batchMode) { maxIDs = append(maxIDs, m.maxID) }
			res, err := r.Recover(context.Background(), o, TriggerManual, Scope{}, nil)
			if err != nil || res.Done() != 5 {
				t.Fatalf("repaired %d of 5: %v", res.Done(), err)
			}
			// 5 instances, 2 a batch: three batches; the first sorts.
			want := []bool{false, tc.max, tc.max}
			if !slices.Equal(maxIDs, want) {
				t.Fatalf("batches read their cursor by max: %v, want %v", maxIDs, want)
			}
			var events5, queued int
			if err := db.QueryRow(`SELECT (SELECT count(DISTINCT instance) FROM enginehealth.events WHERE workflow = 'items' AND kind = 'instance_repaired'),
				(SELECT count(*) FROM app.items WHERE status = 'Queued')`).Scan(&events5, &queued); err != nil {
				t.Fatal(err)
			}
			if events5 != 5 || queued != 5 {
				t.Fatalf("%d instances with a repair event, %d queued; want 5 and 5", events5, queued)
			}
		})
	}
}

// TestBatchOfOneGoesOnPastTheEmptyID: with batch_size 1 and text ids,
// the least id, ”, parked (a retry waiting) and picked first, the next
// batches go on after it, not from the start again (a run looped on it
// for good: the cursor ” read as no cursor); a retried row of instance
// ” is settled as any other (its first batch no longer reads rows after
// ” only).
func TestBatchOfOneGoesOnPastTheEmptyID(t *testing.T) {
	db := pg.MigratedDB(t)
	db.MustExec(`CREATE SCHEMA app; CREATE TABLE app.items (id text PRIMARY KEY, status text NOT NULL);
		CREATE TABLE app.items_claim (instance_id text PRIMARY KEY, node text NOT NULL, token text NOT NULL,
			claimed_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL);
		INSERT INTO app.items (id, status) VALUES ('', 'Packing'), ('0000', 'Packing'), ('zzz', 'Packing')`)
	db.MustExec(`INSERT INTO enginehealth.attempts (workflow, instance, task, attempt, state, cause, left_in, next_attempt_at)
		VALUES ('items', '', 'pack', 0, 'waiting', 'interrupt', 'Packing', now() + interval '1 hour')`)
	items := Workflow{Name: "items", Table: "app.items", IDColumn: "id", StatusColumn: "status",
		Claims: &claims.Table{Instances: "app.items", IDColumn: "id", StatusColumn: "status", Claims: "app.items_claim",
			InstanceColumn: "instance_id", NodeColumn: "node", TokenColumn: "token", ClaimedAtColumn: "claimed_at", ExpiresAtColumn: "expires_at"},
		Tasks: []Task{{Task: claims.Task{Name: "pack", Begin: "Queued", Interim: "Packing", Ends: []string{"Packed"}, Failed: "Failed"},
			OnInterrupt: Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}}}}}
	o := leadertest.Office(t, db, etcd.Endpoint, "enginehealth", "m")
	events := audit.New("enginehealth")
	r := testkit.Must(New(Config{DB: db, Fence: testkit.Must(leader.NewFence(leader.FenceConfig{DB: db, Schema: "enginehealth", Events: events})),
		Events: events, Schema: "enginehealth", Workflows: []Workflow{items}, BatchSize: 1, SettleBatchSize: 1, Log: leadertest.Quiet}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	batches := 0
	r.onBatch = func(batchMode) { batches++ }
	res, err := r.Recover(ctx, o, TriggerManual, Scope{}, nil)
	if err != nil || res.Done() != 2 || batches != 4 {
		t.Fatalf("repaired %d in %d batches (%v); want '0000' and 'zzz' parked in 4 batches of one, '' left waiting", res.Done(), batches, err)
	}
	// A retried row of instance '' whose retry reached an end state.
	db.MustExec(`UPDATE enginehealth.attempts SET state = 'retried', attempt = 1, next_attempt_at = NULL WHERE instance = ''`)
	db.MustExec(`UPDATE app.items SET status = 'Packed' WHERE id = ''`)
	sc, err := r.Settle(ctx, o, res.RunID, false)
	if err != nil || len(sc) != 1 || sc[0].Succeeded != 1 {
		t.Fatalf("settled %+v (%v), want the retry of '' succeeded", sc, err)
	}
}

// TestPlannedCountsLateArrivals: instances that enter the state while a
// task is repaired, beyond the keyset, are repaired by the same run and
// counted as planned: a run never says it did more than it planned
// ("62000 of 60000 instances repaired", outside review).
func TestPlannedCountsLateArrivals(t *testing.T) {
	db := pg.MigratedDB(t)
	r, o := ordersRepairer(t, db)
	cfg := r.cfg
	cfg.BatchSize = 2
	r = testkit.Must(New(cfg))
	db.MustExec(`INSERT INTO app.orders (status) SELECT 'Reserving' FROM generate_series(1, 4)`)
	batches := 0
	r.onBatch = func(batchMode) {
		if batches++; batches == 2 {
			db.MustExec(`INSERT INTO app.orders (status) SELECT 'Reserving' FROM generate_series(1, 3)`)
		}
	}
	res, err := r.Recover(context.Background(), o, TriggerManual, Scope{}, nil)
	if err != nil || res.Done() != 7 || res.Tasks[0].Planned != 7 {
		t.Fatalf("repaired %d, task planned %d (%v); want 7 and 7", res.Done(), res.Tasks[0].Planned, err)
	}
	var planned, done int64
	if err := db.QueryRow(`SELECT planned, done FROM enginehealth.runs WHERE id = $1`, res.RunID).Scan(&planned, &done); err != nil || planned != 7 || done != 7 {
		t.Fatalf("the run's row: planned %d, done %d (%v); want 7 and 7", planned, done, err)
	}
}
