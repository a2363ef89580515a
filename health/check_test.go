package health

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/leadertest"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

func takeOffice(t testing.TB, b bundle, name string) *leader.Office {
	t.Helper()
	return leadertest.Office(t, b.db, etcd.Endpoint, "enginehealth", name)
}

func newChecker(b bundle, cfg CheckConfig) *Checker {
	fence := testkit.Must(leader.NewFence(leader.FenceConfig{DB: b.db, Schema: "enginehealth", Events: audit.New("enginehealth")}))
	cfg.Fence, cfg.Nodes, cfg.Events, cfg.Log = fence, b.nodes, audit.New("enginehealth"), quiet
	cfg.Pauses = testkit.Must(NewPauses(PausesConfig{DB: b.db, Events: cfg.Events}))
	if cfg.Recovery == nil {
		cfg.Recovery = testkit.Must(recovery.New(recovery.Config{DB: b.db, Fence: fence, Events: audit.New("enginehealth"), Schema: "enginehealth", Workflows: workflows, BatchSize: 2, Log: quiet}))
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	return testkit.Must(NewChecker(cfg))
}

// register adds node name whose last heartbeat was age ago.
func register(t testing.TB, b bundle, name string, age time.Duration) {
	t.Helper()
	if _, err := b.nodes.Register(context.Background(), nodes.Registration{Name: name, Incarnation: uuid.NewString(), Hostname: name}); err != nil {
		t.Fatal(err)
	}
	b.db.MustExec(`UPDATE enginehealth.nodes SET status = 'Ready', last_active = now() - make_interval(secs => $2) WHERE name = $1`, name, age.Seconds())
}

func status(t *testing.T, b bundle, name string) nodes.Status {
	t.Helper()
	n, err := b.nodes.Get(context.Background(), name)
	if err != nil {
		return nodes.Status("(" + err.Error() + ")")
	}
	return n.Status
}

func kinds(t *testing.T, b bundle, kind audit.Kind) []audit.Event {
	t.Helper()
	var es []audit.Event
	if err := b.db.Select(&es, `SELECT id, at, kind, actor, term, run_id, node, workflow, instance, task, from_state, to_state, attempt, reason, via
		FROM enginehealth.event_log WHERE kind = $1 ORDER BY id`, kind); err != nil {
		t.Fatal(err)
	}
	return es
}

func TestNodesActionMarksStaleAndForgets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := takeOffice(t, b, "m")
	register(t, b, "fresh", 0)
	register(t, b, "stale", time.Minute)
	register(t, b, "ancient", 48*time.Hour)
	b.db.MustExec(`UPDATE enginehealth.nodes SET status = 'Not responding' WHERE name = 'ancient'`)
	register(t, b, "back", 0)
	b.db.MustExec(`UPDATE enginehealth.nodes SET status = 'Not responding' WHERE name = 'back'`)
	register(t, b, "fresh2", 0)

	c := newChecker(b, CheckConfig{NotRespondingAfter: 30 * time.Second, ForgetAfter: 24 * time.Hour})
	c.begin()
	res, err := c.RunOnce(context.Background(), o, recovery.TriggerManual, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Disruption {
		t.Fatalf("disruption with 1 of 6 stale: %+v", res)
	}
	if got := status(t, b, "stale"); got != nodes.StatusNotResponding {
		t.Fatalf("stale node: %s", got)
	}
	if got := status(t, b, "fresh"); got != nodes.StatusReady {
		t.Fatalf("fresh node: %s", got)
	}
	if got := status(t, b, "back"); got != nodes.StatusReady {
		t.Fatalf("node whose heartbeats resumed: %s", got)
	}
	if _, err := b.nodes.Get(context.Background(), "ancient"); !errors.Is(err, nodes.ErrNotFound) {
		t.Fatalf("node unresponsive for 48h not forgotten: %v", err)
	}
	ev := kinds(t, b, audit.KindNodeStatus)
	var marked bool
	for _, e := range ev {
		if *e.Node == "stale" && *e.ToState == string(nodes.StatusNotResponding) && *e.RunID == res.RunID && *e.Term == o.Term {
			marked = true
		}
	}
	if !marked {
		t.Fatalf("no event for the stale node in run %d: %+v", res.RunID, ev)
	}
	if f := kinds(t, b, audit.KindNodeForgotten); len(f) != 1 || *f[0].Node != "ancient" {
		t.Fatalf("forgotten events: %+v", f)
	}
}

func TestDisruptionGuard(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := takeOffice(t, b, "m") // the master, fresh: 1 of 4
	for _, n := range []string{"x", "y", "z"} {
		register(t, b, n, time.Minute) // 3 of 4 stale at once
	}
	// Something to expire and repair, which must be left alone too.
	b.db.MustExec(`INSERT INTO app.invoice (id, status) VALUES (1000, 'Sending'), (1001, 'Sending')`)
	b.db.MustExec(`INSERT INTO app.invoice_claim VALUES (1000, 'x', 't', now() - interval '1h', now() - interval '1m')`)

	c := newChecker(b, CheckConfig{NotRespondingAfter: 30 * time.Second})
	c.begin()
	for pass := range 2 {
		res, err := c.RunOnce(context.Background(), o, recovery.TriggerPeriodic, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Disruption {
			t.Fatalf("pass %d: 3 of 4 nodes stale and no disruption mode: %+v", pass, res)
		}
	}
	for _, n := range []string{"x", "y", "z"} {
		if got := status(t, b, n); got != nodes.StatusReady {
			t.Fatalf("node %s marked %s in disruption mode", n, got)
		}
	}
	var claimsLeft, sending int
	if err := b.db.Get(&claimsLeft, `SELECT count(*) FROM app.invoice_claim`); err != nil {
		t.Fatal(err)
	}
	if err := b.db.Get(&sending, `SELECT count(*) FROM app.invoice WHERE id >= 1000 AND status = 'Sending'`); err != nil {
		t.Fatal(err)
	}
	if claimsLeft != 1 || sending != 2 {
		t.Fatalf("disruption mode expired %d claims / repaired %d instances", 1-claimsLeft, 2-sending)
	}
	if d := kinds(t, b, audit.KindDisruption); len(d) != 1 {
		t.Fatalf("want one disruption event for two passes, got %d", len(d))
	}
	if !c.Disrupted() {
		t.Fatal("checker does not report disruption mode")
	}

	// 2 of 5 is below the fraction: marked.
	register(t, b, "w", 0)
	b.db.MustExec(`UPDATE enginehealth.nodes SET last_active = now() WHERE name = 'x'`)
	res, err := c.RunOnce(context.Background(), o, recovery.TriggerPeriodic, nil)
	if err != nil || res.Disruption {
		t.Fatalf("2 of 5 stale: %+v %v", res, err)
	}
	if status(t, b, "y") != nodes.StatusNotResponding || status(t, b, "z") != nodes.StatusNotResponding {
		t.Fatal("stale nodes not marked after leaving disruption mode")
	}
}

func TestPausedMasterWidensThreshold(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := takeOffice(t, b, "m")
	register(t, b, "a", 0)
	register(t, b, "slow", 90*time.Second) // stale by 60s over the 30s threshold
	register(t, b, "c", 0)
	register(t, b, "d", 0)

	c := newChecker(b, CheckConfig{NotRespondingAfter: 30 * time.Second, Interval: 15 * time.Second})
	c.begin()
	// The master itself was away for two minutes since its last pass.
	away := 2 * time.Minute
	c.now = func() time.Time { return time.Now().Add(away) }
	res, err := c.RunOnce(context.Background(), o, recovery.TriggerPeriodic, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := 30*time.Second + away - 15*time.Second; res.Threshold < want-time.Second || res.Threshold > want+time.Second {
		t.Fatalf("threshold %s, want about %s", res.Threshold, want)
	}
	if got := status(t, b, "slow"); got != nodes.StatusReady {
		t.Fatalf("a paused master condemned a node for its own hiccup: %s", got)
	}
	// The next pass, on time, uses the plain threshold.
	c.now = func() time.Time { return time.Now().Add(away + time.Second) }
	res, err = c.RunOnce(context.Background(), o, recovery.TriggerPeriodic, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Threshold != 30*time.Second || status(t, b, "slow") != nodes.StatusNotResponding {
		t.Fatalf("on-time pass: threshold %s, slow is %s", res.Threshold, status(t, b, "slow"))
	}
}

// TestFailingStepDoesNotWidenThreshold: a pass whose claims or repair
// step fails still judged the nodes; the next pass must not count the
// time since the last whole success as the master's own absence, or a
// dead node would never be marked while the failure lasts.
func TestFailingStepDoesNotWidenThreshold(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := takeOffice(t, b, "m")
	for _, n := range []string{"a", "b", "c"} {
		register(t, b, n, 0)
	}
	b.db.MustExec(`ALTER TABLE app.invoice_claim RENAME TO invoice_claim_gone`)
	c := newChecker(b, CheckConfig{NotRespondingAfter: 30 * time.Second, Interval: 15 * time.Second})
	c.begin()
	ctx := context.Background()
	for i := range 3 {
		// Each pass comes on time, 15 s after the one before, and fails.
		c.now = func() time.Time { return time.Now().Add(time.Duration(i) * 15 * time.Second) }
		res, err := c.RunOnce(ctx, o, recovery.TriggerPeriodic, nil)
		if err == nil {
			t.Fatal("a pass over a missing claims table succeeded")
		}
		if res.Threshold > 31*time.Second {
			t.Fatalf("pass %d after failed passes: threshold %s, want 30s", i, res.Threshold)
		}
	}
	// A node that died is marked although every pass fails later on.
	b.db.MustExec(`UPDATE enginehealth.nodes SET last_active = now() - interval '5 minutes' WHERE name = 'c'`)
	c.now = func() time.Time { return time.Now().Add(45 * time.Second) }
	if _, err := c.RunOnce(ctx, o, recovery.TriggerPeriodic, nil); err == nil {
		t.Fatal("the pass succeeded")
	}
	if got := status(t, b, "c"); got != nodes.StatusNotResponding {
		t.Fatalf("dead node is %s while the claims step fails", got)
	}
}

func TestClaimsExpireAndInstancesRepair(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := takeOffice(t, b, "m")
	b.db.MustExec(`DELETE FROM app.invoice`)
	// 10: interim, claim expired (node-x died); 11: interim, live claim;
	// 12: interim, no claim at all; 13: begin; 14: end.
	b.db.MustExec(`INSERT INTO app.invoice (id, status) VALUES (10, 'Sending'), (11, 'Sending'), (12, 'Sending'), (13, 'Created'), (14, 'Sent')`)
	b.db.MustExec(`INSERT INTO app.invoice_claim VALUES
		(10, 'node-x', 'tok10', now() - interval '10m', now() - interval '1s'),
		(11, 'node-y', 'tok11', now(), now() + interval '1h')`)

	c := newChecker(b, CheckConfig{})
	c.begin()
	plan, err := c.cfg.Recovery.Plan(context.Background(), recovery.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 || plan[0].ClaimsToExpire != 1 || plan[0].Tasks[0].Planned != 2 || plan[0].Tasks[0].To != "SendFailed" {
		t.Fatalf("dry-run plan %+v, want 1 claim to expire and 2 instances to fail", plan)
	}
	if st := states(t, b.db, "invoice", "status"); st["Sending"] != 3 {
		t.Fatalf("dry run changed something: %v", st)
	}

	res, err := c.RunOnce(context.Background(), o, recovery.TriggerManual, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		ID     int    `db:"id"`
		Status string `db:"status"`
	}
	if err := b.db.Select(&rows, `SELECT id, status FROM app.invoice ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	got := map[int]string{}
	for _, r := range rows {
		got[r.ID] = r.Status
	}
	want := map[int]string{10: "SendFailed", 11: "Sending", 12: "SendFailed", 13: "Created", 14: "Sent"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("instances %v, want %v", got, want)
	}
	if res.Recovery.ClaimsExpired != 1 || res.Recovery.Done() != 2 {
		t.Fatalf("result %+v", res.Recovery)
	}
	exp := kinds(t, b, audit.KindClaimExpired)
	if len(exp) != 1 || *exp[0].Node != "node-x" || *exp[0].Instance != "10" || *exp[0].RunID != res.RunID || *exp[0].FromState != "Sending" {
		t.Fatalf("claim_expired events %+v", exp)
	}
	// How long the attempt held its claim (claimed 10 min ago, expired
	// 1 s ago).
	if !strings.Contains(exp[0].Reason, "held 00:09:59)") || !strings.Contains(exp[0].Reason, "claimed at ") {
		t.Fatalf("claim_expired reason does not say how long the claim was held: %s", exp[0].Reason)
	}
	rep := kinds(t, b, audit.KindRepair)
	if len(rep) != 2 {
		t.Fatalf("repair events %+v", rep)
	}
	// Run events leave out the master and its term (their run has them);
	// they are read back whole.
	for _, e := range append(exp, rep...) {
		if e.Actor != "m" || e.Term == nil || *e.Term != o.Term {
			t.Fatalf("event of the run does not name its master and term: %+v", e)
		}
	}
	var stored int
	if err := b.db.Get(&stored, `SELECT count(*) FROM enginehealth.events WHERE run_id = $1 AND (actor IS NOT NULL OR term IS NOT NULL)`, res.RunID); err != nil || stored != 0 {
		t.Fatalf("%d events of the run store actor or term (%v)", stored, err)
	}
	for _, e := range rep {
		switch *e.Instance {
		case "10":
			if e.Node == nil || *e.Node != "node-x" {
				t.Fatalf("repair of 10 does not name the node whose claim expired: %+v", e)
			}
		case "12":
			if e.Node != nil {
				t.Fatalf("repair of 12 names a node: %+v", e)
			}
		default:
			t.Fatalf("unexpected repair %+v", e)
		}
	}
	var run recovery.RunRow
	if err := b.db.Get(&run, `SELECT id, term, master, kind, trigger, scope::text AS scope, claims_expired, planned, done, status, started_at, finished_at, error, resumed_from
		FROM enginehealth.runs WHERE id = $1`, res.RunID); err != nil {
		t.Fatal(err)
	}
	// Claims and instances are counted apart.
	if run.Kind != recovery.KindCheck || run.Trigger != recovery.TriggerManual || run.Status != "finished" ||
		run.ClaimsExpired != 1 || run.Planned != 2 || run.Done != 2 {
		t.Fatalf("run row %+v", run)
	}
}

func TestUnfinishedRunIsFinishedByNextMaster(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.db.MustExec(`DELETE FROM app.invoice`)
	b.db.MustExec(`INSERT INTO app.invoice (id, status) VALUES (20, 'Sending')`)
	// A run left running by a master of an older term that crashed.
	var old int64
	if err := b.db.Get(&old, `INSERT INTO enginehealth.runs (term, master, kind, trigger, scope) VALUES (1, 'gone', 'recovery', 'manual', '{"workflows":["invoice"]}') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	fence := testkit.Must(leader.NewFence(leader.FenceConfig{DB: b.db, Schema: "enginehealth", Events: audit.New("enginehealth")}))
	rep := testkit.Must(recovery.New(recovery.Config{DB: b.db, Fence: fence, Events: audit.New("enginehealth"), Schema: "enginehealth", Workflows: workflows, Log: quiet}))
	m := testkit.Must(NewMaster(MasterConfig{Fence: fence, Nodes: b.nodes, Recovery: rep, Tick: 20 * time.Millisecond, Log: quiet}))
	o := takeOffice(t, b, "m")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if !m.resume(ctx, o, quiet) {
		t.Fatal("resume reported failure")
	}
	var rows []recovery.RunRow
	if err := b.db.Select(&rows, `SELECT id, term, master, kind, trigger, scope::text AS scope, planned, done, status, started_at, finished_at, error, resumed_from
		FROM enginehealth.runs ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Status != "interrupted" || rows[1].ResumedFrom == nil || *rows[1].ResumedFrom != old ||
		rows[1].Status != "finished" || rows[1].Done != 1 {
		t.Fatalf("runs after resumption: %+v", rows)
	}
	if st := states(t, b.db, "invoice", "status"); st["SendFailed"] != 1 {
		t.Fatalf("the resumed run did not repair: %v", st)
	}
}

// TestFailedResumptionDoesNotBlockTheMaster: when the run that resumes an
// interrupted one fails (here: the claims table is gone), the old run is
// closed with a note and the master goes on; it does not retry, writing a
// failed run each tick, while its other duties wait.
func TestFailedResumptionDoesNotBlockTheMaster(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var old int64
	if err := b.db.Get(&old, `INSERT INTO enginehealth.runs (term, master, kind, trigger, scope) VALUES (1, 'gone', 'check', 'periodic', '{"workflows":["invoice"]}') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	b.db.MustExec(`ALTER TABLE app.invoice_claim RENAME TO invoice_claim_gone`)
	c := newChecker(b, CheckConfig{NotRespondingAfter: 30 * time.Second})
	m := testkit.Must(NewMaster(MasterConfig{Fence: c.cfg.Fence, Nodes: b.nodes, Recovery: c.cfg.Recovery, Checker: c, Tick: 20 * time.Millisecond, Log: quiet}))
	o := takeOffice(t, b, "m")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if !m.resume(ctx, o, quiet) {
		t.Fatal("a failed resumption held the master up")
	}
	var rows []recovery.RunRow
	if err := b.db.Select(&rows, `SELECT id, term, master, kind, trigger, scope::text AS scope, planned, done, status, started_at, finished_at, error, resumed_from
		FROM enginehealth.runs ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Status != "interrupted" || rows[1].Status != "failed" || rows[1].ResumedFrom == nil || *rows[1].ResumedFrom != old {
		t.Fatalf("runs after a failed resumption: %+v", rows)
	}
	// The failed run's row, which API clients read, says what class of
	// failure it was, not the database's text.
	if rows[1].Error != "database error 42P01 (undefined_table)" {
		t.Fatalf("error of the failed run: %q", rows[1].Error)
	}
	if !strings.Contains(rows[0].Error, fmt.Sprintf("resumption by run %d failed", rows[1].ID)) {
		t.Fatalf("the old run does not say its resumption failed: %+v", rows[0])
	}
	// Nothing is left to resume: the next office starts its duties at once.
	if !m.resume(ctx, o, quiet) {
		t.Fatal("second resume")
	}
	var n int
	if err := b.db.Get(&n, `SELECT count(*) FROM enginehealth.runs`); err != nil || n != 2 {
		t.Fatalf("%d runs after a second resume (%v), want 2", n, err)
	}
}

// TestUnexpectedShutdownIsLeftToTheOperator: a node in Unexpected shutdown
// is never marked Not responding, revived or forgotten by a pass, whatever
// its heartbeats, and does not count for the disruption guard.
func TestUnexpectedShutdownIsLeftToTheOperator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := takeOffice(t, b, "m")
	register(t, b, "crashed-stale", time.Minute)
	register(t, b, "crashed-ancient", 48*time.Hour)
	register(t, b, "crashed-fresh", 0)
	b.db.MustExec(`UPDATE enginehealth.nodes SET status = 'Unexpected shutdown' WHERE name LIKE 'crashed-%'`)
	register(t, b, "ready", 0)
	register(t, b, "stale", time.Minute)

	c := newChecker(b, CheckConfig{NotRespondingAfter: 30 * time.Second, ForgetAfter: 24 * time.Hour})
	c.begin()
	for range 2 { // a second pass: nothing to revive either
		res, err := c.RunOnce(context.Background(), o, recovery.TriggerManual, nil)
		if err != nil {
			t.Fatal(err)
		}
		// 1 stale of 3 in service (m, ready, stale): no disruption; had the
		// two stale crashed nodes counted, 3 of 6 would be.
		if res.Disruption {
			t.Fatalf("disruption: %+v", res)
		}
	}
	for _, name := range []string{"crashed-stale", "crashed-ancient", "crashed-fresh"} {
		if got := status(t, b, name); got != nodes.StatusUnexpectedShutdown {
			t.Fatalf("%s moved to %s without an ack", name, got)
		}
	}
	if got := status(t, b, "stale"); got != nodes.StatusNotResponding {
		t.Fatalf("stale node in service: %s", got)
	}
}

// TestCheckRunsDueRetries: under a retry policy, the pass that finds an
// interrupted instance schedules its retry and leaves it where it is; a
// later pass, once the delay has passed, moves it back to begin.
func TestCheckRunsDueRetries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := takeOffice(t, b, "m")
	b.db.MustExec(`DELETE FROM app.invoice; INSERT INTO app.invoice (id, status) VALUES (12, 'Sending')`)
	wfs := slices.Clone(workflows)
	wfs[1].Tasks = slices.Clone(wfs[1].Tasks)
	wfs[1].Tasks[0].OnInterrupt = recovery.Policy{Strategy: recovery.StrategyRetry, MaxAttempts: 1,
		Backoff: recovery.Backoff{Kind: recovery.BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}}
	fence := testkit.Must(leader.NewFence(leader.FenceConfig{DB: b.db, Schema: "enginehealth", Events: audit.New("enginehealth")}))
	c := newChecker(b, CheckConfig{Recovery: testkit.Must(recovery.New(recovery.Config{DB: b.db, Fence: fence, Events: audit.New("enginehealth"),
		Schema: "enginehealth", Workflows: wfs, Log: quiet}))})
	c.begin()
	res, err := c.RunOnce(context.Background(), o, recovery.TriggerPeriodic, nil)
	if err != nil || res.Recovery.Tasks[0].Scheduled != 1 || res.Retries.Retried != 0 {
		t.Fatalf("first pass %+v %v, want a retry scheduled", res, err)
	}
	if st := states(t, b.db, "invoice", "status"); st["Sending"] != 1 {
		t.Fatalf("waiting instance moved: %v", st)
	}
	if res, err := c.RunOnce(context.Background(), o, recovery.TriggerPeriodic, nil); err != nil || res.Retries.Retried != 0 {
		t.Fatalf("a pass before the delay: %+v %v, want the retry left waiting", res, err)
	}
	// The hour passes (a delay short enough to wait for would let a slow
	// pass run the retry it just scheduled).
	b.db.MustExec(`UPDATE enginehealth.attempts SET next_attempt_at = now() WHERE state = 'waiting'`)
	if res, err := c.RunOnce(context.Background(), o, recovery.TriggerPeriodic, nil); err != nil || res.Retries.Retried != 1 {
		t.Fatalf("the pass after the delay: %+v %v, want the retry run", res, err)
	}
	if st := states(t, b.db, "invoice", "status"); st["Created"] != 1 {
		t.Fatalf("after the retry: %v", st)
	}
}

// TestPassesSweepNowAndThen: between sweeps a pass repairs only the
// instances whose claims it expired, however many others are interim
// without a claim; the first pass of an office, a manual pass, the pass
// after the sweep interval and the pass after a failed one look at all.
func TestPassesSweepNowAndThen(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := takeOffice(t, b, "m")
	ctx := context.Background()
	c := newChecker(b, CheckConfig{SweepInterval: time.Hour})
	now := time.Now()
	c.now = func() time.Time { return now }
	c.begin()
	pass := func(trigger recovery.Trigger) CheckResult {
		t.Helper()
		res, err := c.RunOnce(ctx, o, trigger, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	sending := func() int { return states(t, b.db, "invoice", "status")["Sending"] }
	if res := pass(recovery.TriggerPeriodic); !res.Recovery.Sweep || sending() != 0 {
		t.Fatalf("first pass of the office: sweep %v, %d left in Sending", res.Recovery.Sweep, sending())
	}
	// Instance 1 is interim without a claim (deleted by hand); instance 2
	// under a claim that has expired.
	b.db.MustExec(`UPDATE app.invoice SET status = 'Sending' WHERE id IN (1, 2);
		INSERT INTO app.invoice_claim VALUES (2, 'n1', 't', now() - interval '1h', now() - interval '1s')`)
	res := pass(recovery.TriggerPeriodic)
	if res.Recovery.Sweep || res.Recovery.ClaimsExpired != 1 || res.Recovery.Done() != 1 {
		t.Fatalf("pass between sweeps: %+v", res.Recovery)
	}
	if s := states(t, b.db, "invoice", "status"); s["Sending"] != 1 {
		t.Fatalf("after the pass between sweeps: %v, want only the expired claim's instance repaired", s)
	}
	now = now.Add(time.Hour)
	if res := pass(recovery.TriggerPeriodic); !res.Recovery.Sweep || res.Recovery.Done() != 1 || sending() != 0 {
		t.Fatalf("pass after the sweep interval: %+v", res.Recovery)
	}
	if res := pass(recovery.TriggerPeriodic); res.Recovery.Sweep {
		t.Fatal("the pass after a sweep swept again")
	}
	if res := pass(recovery.TriggerManual); !res.Recovery.Sweep {
		t.Fatal("a manual pass did not sweep")
	}
	// A failed pass: the next one sweeps.
	b.db.MustExec(`ALTER TABLE app.invoice RENAME TO invoice_gone`)
	if _, err := c.RunOnce(ctx, o, recovery.TriggerPeriodic, nil); err == nil {
		t.Fatal("a pass without its table succeeded")
	}
	b.db.MustExec(`ALTER TABLE app.invoice_gone RENAME TO invoice`)
	if res := pass(recovery.TriggerPeriodic); !res.Recovery.Sweep {
		t.Fatal("the pass after a failed one did not sweep")
	}
}

// TestSweepIntervalAndNextSweep: the scheduled pass nearest to the sweep
// interval sweeps, though it starts a few milliseconds sooner after its
// firing than the pass that swept (it used to wait for the pass after,
// so with sweep_interval = the schedule's period only every other pass
// swept); Stats says when the last sweep began and when the next is
// expected, and expects none while paused.
func TestSweepIntervalAndNextSweep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := takeOffice(t, b, "m")
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		sweep time.Duration
	}{{"ten periods", 10 * time.Minute}, {"one period", time.Minute}} {
		c := newChecker(b, CheckConfig{Interval: time.Minute, SweepInterval: tc.sweep})
		t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
		now := t0
		c.now = func() time.Time { return now }
		if st := c.Stats(); !st.LastSweep.IsZero() || !st.NextSweep.IsZero() {
			t.Fatalf("%s: before any office: %+v", tc.name, st)
		}
		c.begin()
		if st := c.Stats(); !st.LastSweep.IsZero() || !st.NextSweep.Equal(t0.Add(time.Minute)) {
			t.Fatalf("%s: in office, before the first pass: last %v, next %v; want none and the next pass", tc.name, st.LastSweep, st.NextSweep)
		}
		// Each pass starts a little after its firing: 5 ms for the
		// first, 1 ms for the later ones.
		pass := func(at time.Time, trigger recovery.Trigger) CheckResult {
			t.Helper()
			now = at
			res, err := c.RunOnce(ctx, o, trigger, nil)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		first := t0.Add(time.Minute + 5*time.Millisecond)
		if res := pass(first, recovery.TriggerPeriodic); !res.Recovery.Sweep {
			t.Fatalf("%s: the first pass of the office did not sweep", tc.name)
		}
		st := c.Stats()
		want := first.Add(tc.sweep)
		if !st.LastSweep.Equal(first) || !st.NextSweep.Equal(want) {
			t.Fatalf("%s: last sweep %v, next %v; want %v and %v", tc.name, st.LastSweep, st.NextSweep, first, want)
		}
		for at := t0.Add(2 * time.Minute); at.Before(t0.Add(time.Minute + tc.sweep)); at = at.Add(time.Minute) {
			if res := pass(at.Add(time.Millisecond), recovery.TriggerPeriodic); res.Recovery.Sweep {
				t.Fatalf("%s: the pass at %v swept, %v after the last sweep", tc.name, at, at.Sub(first))
			}
		}
		// tc.sweep after the first firing, 4 ms short of tc.sweep after
		// the first pass's start: the pass nearest to the interval.
		due := t0.Add(time.Minute + tc.sweep + time.Millisecond)
		if res := pass(due, recovery.TriggerPeriodic); !res.Recovery.Sweep {
			t.Fatalf("%s: the pass %v after the last sweep did not sweep", tc.name, due.Sub(first))
		}
		if st := c.Stats(); !st.LastSweep.Equal(due) || !st.NextSweep.Equal(due.Add(tc.sweep)) {
			t.Fatalf("%s: after the second sweep: last %v, next %v", tc.name, st.LastSweep, st.NextSweep)
		}
		// Paused: no sweep is expected; after the resume, the next pass.
		if _, err := c.SetPause(ctx, o, true, audit.By{Actor: "op"}, "sweep test"); err != nil {
			t.Fatal(err)
		}
		if st := c.Stats(); !st.NextSweep.IsZero() || !st.LastSweep.Equal(due) {
			t.Fatalf("%s: paused: last %v, next %v; want the last and none", tc.name, st.LastSweep, st.NextSweep)
		}
		if res := pass(due.Add(time.Minute), recovery.TriggerPeriodic); res.Paused == nil || res.Recovery.Sweep {
			t.Fatalf("%s: paused pass: %+v", tc.name, res)
		}
		if st := c.Stats(); !st.NextSweep.IsZero() {
			t.Fatalf("%s: after a paused pass: next sweep %v, want none", tc.name, st.NextSweep)
		}
		if _, err := c.SetPause(ctx, o, false, audit.By{Actor: "op"}, "sweep test done"); err != nil {
			t.Fatal(err)
		}
		if st := c.Stats(); !st.NextSweep.Equal(due.Add(2 * time.Minute)) {
			t.Fatalf("%s: resumed: next sweep %v, want the next pass, %v", tc.name, st.NextSweep, due.Add(2*time.Minute))
		}
	}
}

// TestDisruptedAnswersDuringAPass: Disrupted (read by /metrics and
// status) answers while a pass waits on the database; it used to wait
// for the pass's lock, so a frozen database froze the scrape too (second
// outside review: /metrics 503 for the first 30 s of a freeze).
func TestDisruptedAnswersDuringAPass(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := takeOffice(t, b, "m")
	c := newChecker(b, CheckConfig{})
	c.begin()
	// A pass that waits: the node registry is locked.
	tx := b.db.MustBegin()
	defer tx.Rollback()
	tx.MustExec(`LOCK TABLE enginehealth.nodes IN ACCESS EXCLUSIVE MODE`)
	passed := make(chan error, 1)
	go func() {
		_, err := c.RunOnce(context.Background(), o, recovery.TriggerPeriodic, nil)
		passed <- err
	}()
	testkit.Eventually(t, 10*time.Second, "the pass waiting on the lock", func() (bool, error) {
		var n int
		err := b.db.Get(&n, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`)
		return n > 0, err
	})
	answered := make(chan bool, 1)
	go func() { answered <- c.Disrupted() }()
	select {
	case d := <-answered:
		if d {
			t.Fatal("disrupted before any pass judged the nodes")
		}
	case <-time.After(5 * time.Second): // a deadline: it waits for the pass
		t.Fatal("Disrupted waited for the pass in flight")
	}
	tx.Rollback()
	if err := <-passed; err != nil {
		t.Fatalf("the pass, once the lock went: %v", err)
	}
}

// TestDatabaseFailoverGrace: a node whose heartbeats stopped with the
// database's (it failed over, or was down) is not marked Not responding
// until the nodes had not_responding_after to reconnect; nor while the
// database's record says the master itself is silent (its heartbeats
// were lost in an asynchronous failover).
func TestDatabaseFailoverGrace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := takeOffice(t, b, "m")
	register(t, b, "m", 0)
	register(t, b, "a", 0)
	register(t, b, "slow", time.Minute)
	register(t, b, "c", 0)
	register(t, b, "d", 0)
	var back time.Time
	c := newChecker(b, CheckConfig{NotRespondingAfter: 30 * time.Second, DatabaseBack: func() time.Time { return back }})
	c.begin()
	pass := func() CheckResult {
		t.Helper()
		res, err := c.RunOnce(context.Background(), o, recovery.TriggerManual, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// The database came back 5 s ago: slow may still be reconnecting.
	back = time.Now().Add(-5 * time.Second)
	if res := pass(); !slices.Equal(res.Stale, []string{"slow"}) || status(t, b, "slow") != nodes.StatusReady {
		t.Fatalf("5 s after the database came back: stale %v, slow is %s; want seen stale, not marked", res.Stale, status(t, b, "slow"))
	}
	// The master's own record is stale: the database lost heartbeats.
	back = time.Time{}
	b.db.MustExec(`UPDATE enginehealth.nodes SET last_active = now() - interval '1 minute' WHERE name = 'm'`)
	pass()
	if got := status(t, b, "slow"); got != nodes.StatusReady {
		t.Fatalf("with the master's own record stale, slow is %s; want Ready", got)
	}
	if got := status(t, b, "m"); got != nodes.StatusReady {
		t.Fatalf("the master marked itself: %s", got)
	}
	// The master's heartbeats are recorded again, and the database has
	// been back for longer than not_responding_after: slow is judged.
	b.db.MustExec(`UPDATE enginehealth.nodes SET last_active = now() WHERE name = 'm'`)
	back = time.Now().Add(-31 * time.Second)
	pass()
	if got := status(t, b, "slow"); got != nodes.StatusNotResponding {
		t.Fatalf("31 s after the database came back, slow is %s; want %s", got, nodes.StatusNotResponding)
	}
}

// TestGraceIsBounded: a database that keeps failing over or restarting
// (it came back a moment ago at every pass) spares the stale nodes for at
// most 3 × not_responding_after in a row; then a node whose record stays
// old (dead while the database flapped) is marked (outside review F4).
func TestGraceIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := takeOffice(t, b, "m")
	register(t, b, "m", 0)
	register(t, b, "a", 0)
	register(t, b, "dead", time.Minute)
	register(t, b, "c", 0)
	register(t, b, "d", 0)
	var clock time.Duration // the fake clock's advance
	now := func() time.Time { return time.Now().Add(clock) }
	c := newChecker(b, CheckConfig{NotRespondingAfter: 30 * time.Second, Interval: 20 * time.Second,
		DatabaseBack: func() time.Time { return now().Add(-5 * time.Second) }})
	c.now = now
	c.begin()
	for step := 0; ; step++ {
		clock = time.Duration(step) * 10 * time.Second
		b.db.MustExec(`UPDATE enginehealth.nodes SET last_active = now() WHERE name <> 'dead'`) // the live nodes beat between outages
		if _, err := c.RunOnce(context.Background(), o, recovery.TriggerManual, nil); err != nil {
			t.Fatal(err)
		}
		marked := status(t, b, "dead") == nodes.StatusNotResponding
		switch {
		case marked && clock < 3*30*time.Second:
			t.Fatalf("marked %s into the grace run, want spared until 3 × not_responding_after", clock)
		case marked:
			for _, n := range []string{"m", "a", "c", "d"} {
				if got := status(t, b, n); got != nodes.StatusReady {
					t.Fatalf("live node %s is %s, want Ready", n, got)
				}
			}
			return
		case clock > 3*30*time.Second:
			t.Fatalf("still spared %s into the grace run", clock)
		}
	}
}
