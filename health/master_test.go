package health

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/etcdtest"
	"github.com/enginehealth/enginehealth/internal/testkit/leadertest"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

var (
	pg   *pgtest.Server
	etcd *etcdtest.Etcd
)

func TestMain(m *testing.M) {
	testkit.Main(m, func(m *testing.M) int { return leadertest.Main(m, &pg, &etcd) })
}

var quiet = leadertest.Quiet

// workflows: a non-claimable workflow with an atomic and a non-atomic
// task, and a claimable one that start-up recovery must leave alone.
var workflows = []recovery.Workflow{
	{
		Name: "report", Table: "app.report", IDColumn: "id", StatusColumn: "state",
		Tasks: []recovery.Task{
			{Task: claims.Task{Name: "render", Begin: "Queued", Interim: "Rendering", Ends: []string{"Rendered"}, Failed: "RenderFailed"}, AtomicInternal: true},
			{Task: claims.Task{Name: "publish", Begin: "Rendered", Interim: "Publishing", Ends: []string{"Published"}, Failed: "PublishFailed"}},
		},
	},
	{
		Name: "invoice", Table: "app.invoice", IDColumn: "id", StatusColumn: "status",
		Claims: &claims.Table{Instances: "app.invoice", IDColumn: "id", StatusColumn: "status",
			Claims: "app.invoice_claim", InstanceColumn: "instance_id", NodeColumn: "node",
			TokenColumn: "token", ClaimedAtColumn: "claimed_at", ExpiresAtColumn: "expires_at"},
		Tasks: []recovery.Task{{Task: claims.Task{Name: "send", Begin: "Created", Interim: "Sending", Ends: []string{"Sent"}, Failed: "SendFailed"}}},
	},
}

type bundle struct {
	db    *sqlx.DB
	nodes *nodes.Store
}

func setup(t testing.TB) bundle {
	t.Helper()
	db := pg.MigratedDB(t)
	db.MustExec(`CREATE SCHEMA app;
		CREATE TABLE app.report (id bigserial PRIMARY KEY, state text NOT NULL);
		CREATE TABLE app.invoice (id bigserial PRIMARY KEY, status text NOT NULL);
		CREATE INDEX ON app.invoice (status, id);
		CREATE TABLE app.invoice_claim (
			instance_id bigint PRIMARY KEY REFERENCES app.invoice (id),
			node text NOT NULL, token text NOT NULL,
			claimed_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL);`)
	insert := func(table, col, state string, n int) {
		db.MustExec(fmt.Sprintf(`INSERT INTO app.%s (%s) SELECT $1 FROM generate_series(1, $2)`, table, col), state, n)
	}
	insert("report", "state", "Rendering", 5)
	insert("report", "state", "Publishing", 7)
	insert("report", "state", "Queued", 3)
	insert("report", "state", "Published", 2)
	insert("invoice", "status", "Sending", 4)
	return bundle{db: db, nodes: testkit.Must(nodes.NewStore(nodes.StoreConfig{DB: db, Schema: "enginehealth", Events: audit.New("enginehealth")}))}
}

func states(t *testing.T, db *sqlx.DB, table, col string) map[string]int {
	t.Helper()
	rows, err := db.Query(fmt.Sprintf(`SELECT %s, count(*) FROM app.%s GROUP BY 1`, col, table))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		m[s] = n
	}
	return m
}

// lead registers node name and runs it as the only candidate with the
// master's duties until the test ends.
func lead(t *testing.T, b bundle, name string) {
	t.Helper()
	leadWith(t, b, name, Schedule{})
}

// leadWith is lead with a checker on sched (none when zero); then, when
// given, runs after the node registered, before it campaigns.
func leadWith(t *testing.T, b bundle, name string, sched Schedule, then ...func()) {
	t.Helper()
	inc := uuid.NewString()
	if _, err := b.nodes.Register(context.Background(), nodes.Registration{Name: name, Incarnation: inc, Hostname: name}); err != nil {
		t.Fatal(err)
	}
	for _, f := range then {
		f()
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	fence := testkit.Must(leader.NewFence(leader.FenceConfig{DB: b.db, Schema: "enginehealth", Events: audit.New("enginehealth")}))
	rep := testkit.Must(recovery.New(recovery.Config{DB: b.db, Fence: fence, Events: audit.New("enginehealth"), Schema: "enginehealth", Workflows: workflows, BatchSize: 3, Log: quiet}))
	var checker *Checker
	if !sched.IsZero() {
		checker = newChecker(b, CheckConfig{Recovery: rep, Interval: sched.Period()})
	}
	m := testkit.Must(NewMaster(MasterConfig{
		Fence: fence, Nodes: b.nodes, Recovery: rep, Checker: checker, Schedule: sched,
		Tick: 50 * time.Millisecond, Log: quiet,
	}))
	el := testkit.Must(leader.New(leader.Config{Client: cli, Prefix: "/" + t.Name() + "/", TTL: leader.MinLeaseTTL, TrustMargin: 500 * time.Millisecond,
		Candidate: leader.Candidate{Name: name, Incarnation: inc}, Log: quiet}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = el.Run(ctx, m.Lead) }()
	t.Cleanup(func() { cancel(); <-done; cli.Close() })
}

func waitStatus(t *testing.T, b bundle, name string, status nodes.Status) {
	t.Helper()
	testkit.Eventually(t, 15*time.Second, fmt.Sprintf("node %s in status %q", name, status), func() (bool, error) {
		n, err := b.nodes.Get(context.Background(), name)
		if err != nil {
			return false, err
		}
		return n.Status == status, fmt.Errorf("status %q", n.Status)
	})
}

func TestStartupRecoveryOnColdCluster(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Another node that registered but is not Ready yet: engines wait.
	if _, err := b.nodes.Register(context.Background(), nodes.Registration{Name: "b", Incarnation: uuid.NewString(), Hostname: "b"}); err != nil {
		t.Fatal(err)
	}
	// A flag left by an earlier master: taking office moves it (SetMaster,
	// in the fenced transaction of TakeOffice).
	b.db.MustExec(`UPDATE enginehealth.nodes SET is_master = true WHERE name = 'b'`)
	lead(t, b, "a")
	waitStatus(t, b, "a", nodes.StatusReady)
	waitStatus(t, b, "b", nodes.StatusReady)
	var flagged []string
	if err := b.db.Select(&flagged, `SELECT name FROM enginehealth.nodes WHERE is_master`); err != nil || len(flagged) != 1 || flagged[0] != "a" {
		t.Fatalf("master flags %v (%v), want [a]", flagged, err)
	}

	got := states(t, b.db, "report", "state")
	want := map[string]int{"Queued": 3 + 5, "PublishFailed": 7, "Published": 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("report states %v, want %v", got, want)
	}
	if inv := states(t, b.db, "invoice", "status"); inv["Sending"] != 4 {
		t.Fatalf("start-up recovery touched a claimable workflow: %v", inv)
	}

	var run struct {
		ID      int64            `db:"id"`
		Trigger recovery.Trigger `db:"trigger"`
		Status  string           `db:"status"`
		Planned int64            `db:"planned"`
		Done    int64            `db:"done"`
	}
	if err := b.db.Get(&run, `SELECT id, trigger, status, planned, done FROM enginehealth.runs`); err != nil {
		t.Fatalf("want exactly one run: %v", err)
	}
	if run.Trigger != recovery.TriggerStartup || run.Status != "finished" || run.Planned != 12 || run.Done != 12 {
		t.Fatalf("run %+v", run)
	}
	var events []audit.Event
	if err := b.db.Select(&events, `SELECT id, at, kind, actor, term, run_id, node, workflow, instance, task, from_state, to_state, attempt, reason
		FROM enginehealth.event_log WHERE kind = $1`, audit.KindRepair); err != nil {
		t.Fatal(err)
	}
	perInstance := map[string]int{}
	for _, e := range events {
		perInstance[*e.Instance]++
		if *e.RunID != run.ID || e.Term == nil || e.Actor != "a" {
			t.Fatalf("event not tied to the run, term and master: %+v", e)
		}
		switch *e.Task {
		case "render":
			if *e.FromState != "Rendering" || *e.ToState != "Queued" {
				t.Fatalf("atomic task event %+v", e)
			}
		case "publish":
			if *e.FromState != "Publishing" || *e.ToState != "PublishFailed" {
				t.Fatalf("non-atomic task event %+v", e)
			}
		default:
			t.Fatalf("event for task %q", *e.Task)
		}
	}
	if len(events) != 12 || len(perInstance) != 12 {
		t.Fatalf("%d repair events for %d instances, want one each for 12", len(events), len(perInstance))
	}
}

// TestStartupRecoveryWaitsWhilePaused: on a cold, paused cluster the
// master checks (marking only) but defers start-up recovery, and nodes
// stay Recovering, until a resume.
func TestStartupRecoveryWaitsWhilePaused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.db.MustExec(`UPDATE enginehealth.pause SET paused = true, actor = 'op', reason = 'hands off'`)
	sched, err := ParseSchedule("@every 1s")
	if err != nil {
		t.Fatal(err)
	}
	leadWith(t, b, "a", sched)
	testkit.Eventually(t, 15*time.Second, "two check passes while paused", func() (bool, error) {
		var n int
		err := b.db.Get(&n, `SELECT count(*) FROM enginehealth.runs WHERE kind = 'check' AND status = 'finished'`)
		return n >= 2, err
	})
	if got := status(t, b, "a"); got != nodes.StatusRecovering {
		t.Fatalf("node %s while start-up recovery waits, want Recovering", got)
	}
	if st := states(t, b.db, "report", "state"); st["Rendering"] != 5 || st["Publishing"] != 7 {
		t.Fatalf("start-up recovery ran while paused: %v", st)
	}
	if inv := states(t, b.db, "invoice", "status"); inv["Sending"] != 4 {
		t.Fatalf("a paused check repaired: %v", inv)
	}
	b.db.MustExec(`UPDATE enginehealth.pause SET paused = false`)
	waitStatus(t, b, "a", nodes.StatusReady)
	want := map[string]int{"Queued": 3 + 5, "PublishFailed": 7, "Published": 2}
	if got := states(t, b.db, "report", "state"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("report states after resume %v, want %v", got, want)
	}
}

func TestStartupRecoverySkippedOnWarmCluster(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A node whose engines are running: Ready and active.
	if _, err := b.nodes.Register(context.Background(), nodes.Registration{Name: "w", Incarnation: uuid.NewString(), Hostname: "w"}); err != nil {
		t.Fatal(err)
	}
	b.db.MustExec(`UPDATE enginehealth.nodes SET status = 'Ready' WHERE name = 'w'`)
	before := states(t, b.db, "report", "state")
	lead(t, b, "a")
	waitStatus(t, b, "a", nodes.StatusReady)
	if after := states(t, b.db, "report", "state"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("warm cluster: instances changed %v → %v", before, after)
	}
	var runs int
	if err := b.db.Get(&runs, `SELECT count(*) FROM enginehealth.runs`); err != nil || runs != 0 {
		t.Fatalf("warm cluster: %d runs (%v), want none", runs, err)
	}
}

// TestStartupRecoverySkippedWhenTheMasterIsReady: a node that takes
// office while it is Ready itself (a lone node re-elected after an etcd
// outage longer than its lease: its engine never stopped) is a warm
// cluster: start-up recovery must not fail the instances its own engine
// is working on (outside review: a lone node's re-election failed a live
// instance of a non-claimable workflow).
func TestStartupRecoverySkippedWhenTheMasterIsReady(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A joiner, Recovering: promoted once the master has decided about
	// start-up recovery (the signal that it did).
	if _, err := b.nodes.Register(context.Background(), nodes.Registration{Name: "j", Incarnation: uuid.NewString(), Hostname: "j"}); err != nil {
		t.Fatal(err)
	}
	before := states(t, b.db, "report", "state")
	leadWith(t, b, "a", Schedule{}, func() {
		b.db.MustExec(`UPDATE enginehealth.nodes SET status = 'Ready' WHERE name = 'a'`)
	})
	waitStatus(t, b, "j", nodes.StatusReady)
	if after := states(t, b.db, "report", "state"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the master was Ready: instances changed %v → %v", before, after)
	}
	var runs int
	if err := b.db.Get(&runs, `SELECT count(*) FROM enginehealth.runs`); err != nil || runs != 0 {
		t.Fatalf("the master was Ready: %d runs (%v), want none", runs, err)
	}
}

// TestHungResumptionDoesNotHoldUpReadiness: a run a previous master left
// unfinished is resumed in the background; while that resumption waits on
// a lock, joining nodes still become Ready.
func TestHungResumptionDoesNotHoldUpReadiness(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var old int64
	if err := b.db.Get(&old, `INSERT INTO enginehealth.runs (term, master, kind, trigger, scope) VALUES (1, 'gone', 'recovery', 'manual', '{"workflows":["invoice"]}') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	// An engine's migration holds the claims table: the resumption's
	// expiry step waits on it.
	lock, err := b.db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Rollback() })
	if _, err := lock.Exec(`LOCK TABLE app.invoice_claim IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.nodes.Register(context.Background(), nodes.Registration{Name: "b", Incarnation: uuid.NewString(), Hostname: "b"}); err != nil {
		t.Fatal(err)
	}
	// A flag left by an earlier master: taking office moves it (SetMaster,
	// in the fenced transaction of TakeOffice).
	b.db.MustExec(`UPDATE enginehealth.nodes SET is_master = true WHERE name = 'b'`)
	lead(t, b, "a")
	waitStatus(t, b, "a", nodes.StatusReady)
	waitStatus(t, b, "b", nodes.StatusReady)
	var flagged []string
	if err := b.db.Select(&flagged, `SELECT name FROM enginehealth.nodes WHERE is_master`); err != nil || len(flagged) != 1 || flagged[0] != "a" {
		t.Fatalf("master flags %v (%v), want [a]", flagged, err)
	}
	var status string
	if err := b.db.Get(&status, `SELECT status FROM enginehealth.runs WHERE id = $1`, old); err != nil || status != "running" {
		t.Fatalf("the old run is %q (%v) while its resumption waits on the lock", status, err)
	}
	// The lock goes: the resumption finishes and closes the old run.
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, "the old run closed", func() (bool, error) {
		err := b.db.Get(&status, `SELECT status FROM enginehealth.runs WHERE id = $1`, old)
		return status == "interrupted", err
	})
}
