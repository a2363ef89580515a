package recovery

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/internal/testkit/leadertest"
	"github.com/enginehealth/enginehealth/internal/testkit/sqltest"
)

var update = flag.Bool("update", false, "rewrite the golden statements in testdata/ from the templates")

// goldenBatch is one shape of a repair batch's statement.
type goldenBatch struct {
	name, about string
	w           Workflow
	c           Cause
	attr        attribution
	cur         cursor
	mode        batchMode
}

// goldenWorkflows: invoices, claimable, with error and updated columns
// and a task whose policies match non-retryable errors; reports, not
// claimable, without either.
func goldenWorkflows() (invoices, reports Workflow) {
	tbl := &claims.Table{Instances: "app.invoices", IDColumn: "id", StatusColumn: "status",
		Claims: "app.invoice_claim", InstanceColumn: "instance_id", NodeColumn: "node", TokenColumn: "token",
		ClaimedAtColumn: "claimed_at", ExpiresAtColumn: "expires_at"}
	send := Task{Task: claims.Task{Name: "send", Begin: "Created", Interim: "Sending", Ends: []string{"Sent"}, Failed: "SendFailed"},
		OnInterrupt: Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffExponential, Base: time.Second, MaxDelay: time.Minute, Jitter: 0.2},
			NonRetryable: []string{`^card declined`, `\bfatal\b`}},
		OnFailure: Policy{Strategy: StrategyRetry, MaxAttempts: 2, Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}}}
	invoices = Workflow{Name: "invoices", Table: "app.invoices", IDColumn: "id", StatusColumn: "status", Claims: tbl,
		ErrorColumn: "last_error", UpdatedColumn: "updated_at", Tasks: []Task{send}}
	reports = Workflow{Name: "reports", Table: "app.reports", IDColumn: "id", StatusColumn: "state",
		Tasks: []Task{{Task: claims.Task{Name: "render", Begin: "Queued", Interim: "Rendering", Ends: []string{"Done"}, Failed: "Failed"}, AtomicInternal: true}}}
	return invoices, reports
}

// varied is w with its first task's interruption policy p, and its error
// column errs ("" for none: no patterns matched).
func varied(w Workflow, p Policy, errs string) Workflow {
	w.Tasks = slices.Clone(w.Tasks)
	w.Tasks[0].OnInterrupt = p
	w.ErrorColumn = errs
	return w
}

func goldenBatches() []goldenBatch {
	invoices, reports := goldenWorkflows()
	send := invoices.Tasks[0].OnInterrupt
	return []goldenBatch{
		{name: "interrupt_first", about: "the first batch of a claimable task's interruptions, with non-retryable patterns, in a fleet that counts retries at once from their events, the task's first (no settle cursor yet: it writes it)",
			w: invoices, c: CauseInterrupt, mode: batchMode{rowless: true}},
		{name: "interrupt_expired", about: "what a check pass runs after claims expired: the first batch of the instances whose claims the run expired, attributed to their nodes, counted for their failover grades, in a fleet that counts retries at once from their events, some of them not settled yet (a narrow history window: read whole)",
			w: invoices, c: CauseInterrupt, attr: attribution{on: true, expired: []string{"1", "2"}}, cur: cursor{ids: []string{"1", "2", "3"}},
			mode: batchMode{rowless: true, hist: histWindow{after: 100, upto: 200, cursor: true}}},
		{name: "interrupt_attributed", about: "a later batch of the instances whose claims the run expired, attributed to their nodes, beside running engines, with the debug log on",
			w: invoices, c: CauseInterrupt, attr: attribution{on: true, expired: []string{"1", "2"}}, cur: cursor{set: true, id: "2", ids: []string{"1", "2", "3"}}, mode: batchMode{skipLocked: true, debug: true}},
		{name: "failure_first", about: "the first batch of a task's failed instances, from the watermark",
			w: invoices, c: CauseFailure, cur: cursor{at: "2026-11-26 09:00:00+00"}},
		{name: "failure_cursor", about: "a later batch of failed instances, after the last (updated, id) picked",
			w: invoices, c: CauseFailure, cur: cursor{at: "2026-11-26 09:00:00+00", set: true, id: "17"}},
		{name: "not_claimable", about: "an atomic task of a workflow without claims or an error column, in a fleet that counts retries at once from their events, every one settled (an empty history window: nothing to read), whose ids' type max takes (the cursor read with it)",
			w: reports, c: CauseInterrupt, cur: cursor{set: true, id: "9"}, mode: batchMode{rowless: true, hist: histWindow{after: 200, upto: 200, cursor: true}, maxID: true}},
		{name: "no_error_column", about: "a later batch of a claimable task's interruptions, retried with a backoff, in a workflow without an error column (no pattern matched), some retries at once not settled yet in a wide history window (probed instance by instance)",
			w: varied(invoices, send, ""), c: CauseInterrupt, cur: cursor{set: true, id: "9"}, mode: batchMode{rowless: true, hist: histWindow{after: 100, upto: 1_000_000, cursor: true}, maxID: true}},
		{name: "not_claimable_error_column", about: "the first batch of a task without claims whose workflow has an error column: retried at once, up to 2 times, but for non-retryable errors",
			w: varied(reports, Policy{Strategy: StrategyRetry, MaxAttempts: 2, NonRetryable: []string{`\bfatal\b`}}, "last_error"), c: CauseInterrupt,
			mode: batchMode{rowless: true, hist: histWindow{cursor: true}}},
		{name: "strategy_none", about: "a later batch of a claimable task's interruptions under strategy none (each instance failed, its attempts row, if it has one, closed)",
			w: varied(invoices, Policy{Strategy: StrategyNone}, "last_error"), c: CauseInterrupt, cur: cursor{set: true, id: "9"}, mode: batchMode{rowless: true, hist: histWindow{cursor: true}, maxID: true}},
		{name: "strategy_hold", about: "the first batch of a claimable task's interruptions under strategy hold (each instance held for an operator: an attempts row each, the instances left where they are)",
			w: varied(invoices, Policy{Strategy: StrategyHold}, "last_error"), c: CauseInterrupt, mode: batchMode{rowless: true, hist: histWindow{cursor: true}}},
	}
}

// decisionTable prints the decision table a policy_batch statement is
// bound to (its parameters known … hi, one array per column), a row per
// line, so that a reviewer of the golden file reads what each history
// leads to beside the statement that applies it.
func decisionTable(t *testing.T, st sqltext.Statement) string {
	t.Helper()
	col := func(name string) any {
		i := slices.Index(st.Names, name)
		if i < 0 {
			t.Fatalf("policy_batch without parameter %s", name)
		}
		return st.Args[i]
	}
	known, prev, match := col("known").(pq.BoolArray), col("prev").(pq.Int64Array), col("match").(pq.Int64Array)
	kind, to, state, reason := col("kind").(pq.StringArray), col("to_state").(pq.StringArray), col("state").(pq.StringArray), col("reason").(pq.StringArray)
	lo, hi := col("lo").(pq.Float64Array), col("hi").(pq.Float64Array)
	var b strings.Builder
	fmt.Fprintf(&b, "The decision table (known … hi; max_attempts %v, cap %.0f ms, jitter %v): history known, retries made, pattern matched → kind, to_state, attempts row state, delay interval (ms, before the cap and the jitter), reason\n",
		col("max_attempts"), col("cap_ms"), col("jitter"))
	for i := range known {
		delay := "—" // (a delay only for a retry that waits)
		if kind[i] == ActWait {
			delay = fmt.Sprintf("%g–%g", lo[i], hi[i])
		}
		fmt.Fprintf(&b, "  %-5v %2d %d → %-5s %-12q %-11q %-11s %s\n", known[i], prev[i], match[i], kind[i], to[i], state[i], delay, reason[i])
	}
	return strings.TrimRight(b.String(), "\n")
}

func goldenRepairer() *Repairer {
	invoices, reports := goldenWorkflows()
	events := audit.New("enginehealth")
	return offline(Config{Events: events, Schema: "enginehealth", Workflows: []Workflow{invoices, reports}, BatchSize: 500, Log: leadertest.Quiet})
}

// shapes collects the golden shapes of the statements, each rendered
// for a fixed configuration (goldenRepairer's): a render that fails
// fails the test.
type shapes struct {
	t   *testing.T
	all []sqltest.Shape
}

// add renders the shape name of statement (about: what it is for) and
// keeps it, with the indexes its plan uses with sequential scans off, by
// a prefix of their names (the engine tables' indexes of
// TestStatementsPlan are named table_column_…_idx).
func (s *shapes) add(statement, name, about string, indexes []string, render func() (sqltext.Statement, error)) {
	s.t.Helper()
	st, err := render()
	if err != nil {
		s.t.Fatalf("%s %s: %v", statement, name, err)
	}
	s.all = append(s.all, sqltest.Shape{Statement: statement, Name: name, About: about, Rendered: st, Indexes: indexes})
}

// prepared keeps the shape sh of the statement p, prepared once for the
// schema, bound to args (of the types the code gives them).
func (s *shapes) prepared(p sqltext.Prepared, args sqltext.Args, sh sqltest.Shape) {
	s.t.Helper()
	st, err := p.Statement(args)
	if err != nil {
		s.t.Fatal(err)
	}
	sh.Statement, sh.Rendered = sqltest.Name(p), st
	s.all = append(s.all, sh)
}

// rendered keeps the shape sh of the statement tpl over the engines'
// tables rendered with slots, bound to args.
func (s *shapes) rendered(tpl *sqltext.Template, slots any, args sqltext.Args, sh sqltest.Shape) {
	s.t.Helper()
	p, err := tpl.Prepare(slots)
	if err != nil {
		s.t.Fatal(err)
	}
	s.prepared(p, args, sh)
}

// goldens: every shape of every statement with a golden rendering.
func goldens(t *testing.T) []sqltest.Shape {
	r := goldenRepairer()
	gs := &shapes{t: t}
	ownStatements(gs, r.st)
	catalogShapes(gs)
	engineStatements(gs, r)
	for _, g := range goldenBatches() {
		table := strings.TrimPrefix(g.w.Table, "app.")
		st, err := r.renderBatch(g.w, g.w.Tasks[0], g.c, g.w.Claims, g.attr, g.cur, g.mode, 42)
		if err != nil {
			t.Fatalf("policy_batch %s: %v", g.name, err)
		}
		gs.add("policy_batch", g.name, g.about+"\n\n"+decisionTable(t, st),
			// The pick, through the index on the status column.
			[]string{table + "_" + g.w.StatusColumn + "_"},
			func() (sqltext.Statement, error) { return st, nil })
	}
	invoices, reports := goldenWorkflows()
	for _, g := range []struct {
		name, about string
		w           Workflow
		after       *string
	}{
		{"invoices", "the first batch of a claimable task with an on_failure policy (which decides a failed retry)", invoices, nil},
		{"reports", "a later batch of a task without claims or an on_failure policy", reports, new("17")},
	} {
		gs.add("settle_batch", g.name, g.about,
			// The instances, through the primary key.
			[]string{"attempts_retried_idx", strings.TrimPrefix(g.w.Table, "app.") + "_pkey"},
			func() (sqltext.Statement, error) {
				return r.renderSettleBatch(g.w, g.w.Tasks[0], "bigint", g.after, 42)
			})
	}
	for _, g := range []struct {
		name, about string
		w           Workflow
		pick        eventsPick
	}{
		{"invoices", "the first batch of a claimable task with an on_failure policy (which decides a failed retry)", invoices, eventsPick{upto: 1000}},
		{"reports", "a later batch of a task without claims or an on_failure policy", reports, eventsPick{after: 17, upto: 1000}},
		{"open", "a later pass's batch of the cases the pass before left open", invoices, eventsPick{open: []int64{18, 25, 311}}},
	} {
		gs.add("settle_events", g.name, g.about,
			// The events in id order (or by id), the instances through
			// the primary key.
			[]string{"events_pkey", strings.TrimPrefix(g.w.Table, "app.") + "_pkey"},
			func() (sqltext.Statement, error) {
				return r.renderSettleEvents(g.w, g.w.Tasks[0], "bigint", g.pick, 42)
			})
	}
	for _, g := range []struct {
		name, about string
		w           Workflow
		state       string
		cur         parkedCursor
		close       bool
	}{
		{"held_look", "the first look at a task's holds", invoices, AttemptHeld, parkedCursor{}, false},
		{"held_close", "closing the holds found after the slice before", invoices, AttemptHeld, parkedCursor{"2026-11-26 09:00:00+00", "17"}, true},
		{"waiting_look", "a sweep's look at a task's waiting retries after the slice before", reports, AttemptWaiting, parkedCursor{"2026-11-26 09:00:00+00", "17"}, false},
		{"waiting_close", "closing the waiting retries found in the first slice", reports, AttemptWaiting, parkedCursor{}, true},
	} {
		index := "attempts_held_idx"
		if g.state == AttemptWaiting {
			index = "attempts_due_idx"
		}
		gs.add("settle_parked", g.name, g.about, []string{index, strings.TrimPrefix(g.w.Table, "app.") + "_pkey"},
			func() (sqltext.Statement, error) {
				return r.renderSettleParked(g.w, g.w.Tasks[0], "bigint", g.state, g.cur, g.close, 42)
			})
	}
	decision := func(action string) HoldDecision {
		return HoldDecision{Action: action, By: audit.By{Actor: "alice", Via: "cli"}, Reason: "card replaced"}
	}
	for _, g := range []struct {
		name, about string
		m           parkedMove
	}{
		{"due_retry", "due retries of a claimable task's interruptions, in a run", dueMove(invoices, invoices.Tasks[0], "Sending", CauseInterrupt, 42)},
		{"due_retry_failure", "due retries of failed instances of a task without claims, in a run", dueMove(reports, reports.Tasks[0], "Failed", CauseFailure, 42)},
		{"hold_retry", "an operator's retry of a claimable task's holds", holdMove(invoices, invoices.Tasks[0], "Sending", decision(DecideRetry), 7)},
		{"hold_fail", "an operator's failing of holds of a task without claims", holdMove(reports, reports.Tasks[0], "Rendering", decision(DecideFail), 7)},
	} {
		gs.add("move_parked", g.name, g.about,
			// The instances through the primary key.
			[]string{strings.TrimPrefix(g.m.w.Table, "app.") + "_pkey"},
			func() (sqltext.Statement, error) { return r.renderMoveParked(g.m, []string{"1", "2"}) })
	}
	gs.add("cancel_stale", "retries", "waiting retries the task's policy no longer allows", nil,
		func() (sqltext.Statement, error) {
			return r.renderCancelStale(invoices.Name, invoices.Tasks[0], []string{"1", "2"},
				"retry cancelled: the task's on_interrupt max_attempts is 1 now", 42)
		})
	for _, g := range []struct {
		name, about string
		w           Workflow
		ids         []string
	}{
		{"sweep", "a sweep's count of a claimable task's interrupted instances", invoices, nil},
		{"expired", "the count of the instances whose claims the run expired", invoices, []string{"1", "2"}},
		{"not_claimable", "a start-up run's count of a task without claims", reports, nil},
	} {
		gs.add("count_task", g.name, g.about,
			// Through the index on the status column.
			[]string{strings.TrimPrefix(g.w.Table, "app.") + "_" + g.w.StatusColumn + "_"},
			func() (sqltext.Statement, error) { return r.renderCount(g.w, g.w.Tasks[0], g.w.Claims, g.ids) })
	}
	noError := invoices
	noError.ErrorColumn = ""
	for _, g := range []struct {
		name, about string
		w           Workflow
	}{
		{"patterns", "a claimable task whose on_interrupt policy matches errors against non-retryable patterns", invoices},
		{"no_error_column", "the same task of a workflow without an error column", noError},
	} {
		gs.add("plan_task", g.name, g.about,
			// The pick, through the index on the status column; the
			// attempts rows and claims through their primary keys.
			[]string{"invoices_status_", "attempts_pkey", "invoice_claim_pkey"},
			func() (sqltext.Statement, error) { return r.renderPlanTask(g.w, g.w.Tasks[0]) })
	}
	gs.add("plan_task", "each", "the plan of the same task instance by instance (planEach: the tests compare it with the run)",
		[]string{"invoices_status_", "attempts_pkey", "invoice_claim_pkey"},
		func() (sqltext.Statement, error) { return r.renderPlan(invoices, invoices.Tasks[0], true) })
	return gs.all
}

// ownStatements adds the shapes of the statements over the sidecar's own
// tables, each with parameters of the types the repairer gives them.
func ownStatements(gs *shapes, st statements) {
	run := sqltext.Args{"run": int64(42)}
	// Runs.
	gs.prepared(st.beginRun, sqltext.Args{"term": int64(3), "master": "a", "kind": KindRecovery, "trigger": TriggerManual,
		"scope": `{"workflows":[]}`, "resumed_from": (*int64)(nil)}, sqltest.Shape{})
	gs.prepared(st.endRun, sqltext.Args{"run": int64(42), "status": "failed", "error": "timeout"}, sqltest.Shape{Indexes: []string{"runs_pkey"}})
	gs.prepared(st.addPlanned, sqltext.Args{"run": int64(42), "n": int64(7)}, sqltest.Shape{Indexes: []string{"runs_pkey"}})
	gs.prepared(st.addClaimsExpired, sqltext.Args{"run": int64(42), "n": 7}, sqltest.Shape{Indexes: []string{"runs_pkey"}})
	gs.prepared(st.unfinishedRuns, sqltext.Args{"term": int64(3)}, sqltest.Shape{Indexes: []string{"runs_unfinished_idx"}})
	gs.prepared(st.interruptRun, sqltext.Args{"run": int64(42), "note": "resumed by run 43"}, sqltest.Shape{Indexes: []string{"runs_unfinished_idx"}})
	gs.prepared(st.getRun, run, sqltest.Shape{Indexes: []string{"runs_pkey"}})
	gs.prepared(st.runChain, run, sqltest.Shape{Indexes: []string{"runs_pkey"}})
	gs.prepared(st.clock, nil, sqltest.Shape{})
	gs.prepared(st.listRuns, sqltext.Args{"limit": 20}, sqltest.Shape{Name: "all", About: "the latest runs", Indexes: []string{"runs_pkey"}})
	gs.prepared(st.actedRuns, sqltext.Args{"limit": 20}, sqltest.Shape{Name: "acted", About: "the latest runs that did something or did not finish well",
		Indexes: []string{"runs_pkey"}})
	gs.prepared(st.batchSettings, sqltext.Args{"ms": "1", "kb": 20000}, sqltest.Shape{})

	// Attempts rows.
	key := sqltext.Args{"workflow": "invoices", "instance": "17", "task": "send"}
	gs.prepared(st.due, sqltext.Args{"workflows": pq.Array([]string{"invoices"}), "tasks": pq.Array([]string{"send"}), "limit": 500},
		sqltest.Shape{Indexes: []string{"attempts_due_idx"}})
	gs.prepared(st.listHeld, sqltext.Args{"workflow": "", "limit": DefaultHoldsLimit}, sqltest.Shape{Name: "held", About: "the open holds",
		Indexes: []string{"attempts_held_idx"}})
	gs.prepared(st.listWaiting, sqltext.Args{"workflow": "invoices", "limit": DefaultHoldsLimit}, sqltest.Shape{Name: "waiting",
		About: "the retries waiting for their time", Indexes: []string{"attempts_due_idx"}})
	filters := sqltext.Args{"workflow": "invoices", "task": "send", "node": "node-3", "cause": string(CauseInterrupt), "age_s": 60.0, "limit": 200}
	gs.prepared(st.listHeldFiltered, filters, sqltest.Shape{Name: "held_filtered", About: "the open holds a console list filters, and their count",
		Indexes: []string{"attempts_held_idx"}})
	gs.prepared(st.listWaitingFiltered, filters, sqltest.Shape{Name: "waiting_filtered",
		About: "the retries waiting a console list filters, and their count", Indexes: []string{"attempts_"}})
	gs.prepared(st.holdsOpen, nil, sqltest.Shape{Indexes: []string{"attempts_held_idx"}})
	gs.prepared(st.lockAllHolds, sqltext.Args{"workflow": "", "limit": 500}, sqltest.Shape{Name: "all", About: "a batch of every open hold",
		Indexes: []string{"attempts_held_idx"}})
	gs.prepared(st.lockHolds, sqltext.Args{"workflows": pq.Array([]string{"invoices"}), "instances": pq.Array([]string{"17"})},
		sqltest.Shape{Name: "named", About: "the holds of the instances named", Indexes: []string{"attempts_"}})
	gs.prepared(st.lockAttempt, key, sqltest.Shape{Indexes: []string{"attempts_pkey"}})
	retry := sqltext.Args{"cause": CauseInterrupt, "left_in": "Sending", "reason": "manual retry 1 by an operator (not counted against max_attempts)"}
	maps.Copy(retry, key)
	insert := maps.Clone(retry)
	insert["attempt"], insert["nodes"], insert["last_node"] = 2, pq.StringArray{"node-a"}, "node-a"
	gs.prepared(st.insertRetry, insert, sqltest.Shape{})
	retry = maps.Clone(retry)
	retry["attempt"], retry["manual"], retry["state"] = 2, 0, AttemptHeld
	// Through an index (the planner picks the state's partial index for a
	// held row).
	gs.prepared(st.updateRetry, retry, sqltest.Shape{Indexes: []string{"attempts_"}})
	gs.prepared(st.instanceAttempts, sqltext.Args{"workflow": "invoices", "instance": "17"}, sqltest.Shape{Indexes: []string{"attempts_pkey"}})
	task := sqltext.Args{"workflow": "invoices", "task": "send"}
	gs.prepared(st.retriedExist, task, sqltest.Shape{Indexes: []string{"attempts_retried_idx"}})
	gs.prepared(st.heldExist, task, sqltest.Shape{Name: "held", About: "whether a task has holds", Indexes: []string{"attempts_held_idx"}})
	gs.prepared(st.waitingExist, task, sqltest.Shape{Name: "waiting", About: "whether a task has waiting retries"})
	// A row per task, read whole; the newest event, through the primary
	// key.
	gs.prepared(st.settleCursor, sqltext.Args{"workflows": pq.Array([]string{"invoices"}), "tasks": pq.Array([]string{"send"})},
		sqltest.Shape{Scans: []string{"settle_cursors"}, Indexes: []string{"events_pkey"}})
	gs.prepared(st.moveSettleCursor, sqltext.Args{"after": 17, "workflow": "invoices", "task": "send"},
		sqltest.Shape{Indexes: []string{"settle_cursors_pkey"}})
	gs.prepared(st.instanceCases, sqltext.Args{"workflow": "invoices", "instance": "17"}, sqltest.Shape{Indexes: []string{"events_instance_", "attempts_pkey"}})

	// The protocol doctor's findings.
	gs.prepared(st.doctorRun, sqltext.Args{"run": 42, "workflows": pq.Array([]string{"invoices"}), "interims": pq.Array([]string{"Sending"})},
		sqltest.Shape{Indexes: []string{"events_at_brin", "runs_pkey"}})
	gs.prepared(st.doctorLate, sqltext.Args{"workflow": "invoices", "run": 42, "count": 3, "detail": "3 instances"}, sqltest.Shape{})
	gs.prepared(st.doctorPrune, nil, sqltest.Shape{Indexes: []string{"protocol_violations_at_idx"}})
	gs.prepared(st.doctorSummary, sqltext.Args{"since": "2026-11-26 09:00:00+00"}, sqltest.Shape{Indexes: []string{"protocol_violations_at_idx"}})
	gs.prepared(st.doctorExamples, sqltext.Args{"since": "2026-11-26 09:00:00+00", "per_kind": 10},
		sqltest.Shape{Indexes: []string{"protocol_violations_at_idx"}})

	// Failure marks.
	gs.prepared(st.insertMark, task, sqltest.Shape{})
	gs.prepared(st.moveMark, sqltext.Args{"workflow": "invoices", "task": "send", "lag_ms": markLag.Milliseconds()},
		sqltest.Shape{Indexes: []string{"failure_marks_pkey"}})
	// A row per task with a policy: read whole.
	gs.prepared(st.readMarks, sqltext.Args{"stale_ms": 2 * markLag.Milliseconds()}, sqltest.Shape{Scans: []string{"failure_marks"}})
	gs.prepared(st.dropMarks, sqltext.Args{"workflows": pq.Array([]string{"invoices"}), "tasks": pq.Array([]string{"send"})},
		sqltest.Shape{Indexes: []string{"failure_marks_pkey"}})
}

// catalogShapes adds the shapes of the queries of PostgreSQL's
// catalogs.
func catalogShapes(gs *shapes) {
	table := sqltext.Args{"table": `"app"."invoices"`}
	gs.prepared(catalog.tableExists, table, sqltest.Shape{})
	gs.prepared(catalog.tableColumns, table, sqltest.Shape{})
	gs.prepared(catalog.patternCompiles, sqltext.Args{"pattern": `^card declined`}, sqltest.Shape{})
	gs.prepared(catalog.updatedColumn, sqltext.Args{"table": `"app"."invoices"`, "status": "status", "updated": "updated_at"}, sqltest.Shape{})
	gs.prepared(catalog.idType, sqltext.Args{"table": `"app"."invoices"`, "column": "id"}, sqltest.Shape{})
}

// engineStatements adds the shapes of the statements over an engine's
// instance table that a repairer renders for a workflow.
func engineStatements(gs *shapes, r *Repairer) {
	invoices, reports := goldenWorkflows()
	instance := sqltext.Args{"instance": "063"}
	for _, w := range []Workflow{invoices, reports} {
		table := strings.TrimPrefix(w.Table, "app.")
		about, indexes := "a workflow without claims", []string{table + "_pkey"}
		if w.Claims != nil {
			about, indexes = "a claimable workflow", append(indexes, "invoice_claim_pkey")
		}
		gs.rendered(lockInstanceSQL, lockSlotsOf(w), instance, sqltest.Shape{Name: w.Name, About: about, Indexes: indexes})
		gs.rendered(whereaboutsSQL, whereSlotsOf(w), instance, sqltest.Shape{Name: w.Name, About: about, Indexes: indexes})
	}
	// The master's expiry of claims: claims' statement with the events
	// it records (expire_record.sql), numbered by hand.
	record, err := r.expireRecord("expired")
	if err != nil {
		gs.t.Fatal(err)
	}
	expire, err := invoices.Claims.ExpireStatement(record)
	if err != nil {
		gs.t.Fatal(err)
	}
	gs.all = append(gs.all, sqltest.Shape{Statement: "expire_record", About: "claims' expiry of a claimable workflow with the events it records",
		Rendered: sqltext.Statement{SQL: expire, Args: []any{500, audit.KindClaimExpired, 42, invoices.Name}, Names: []string{"limit", "kind", "run", "workflow"}},
		Indexes:  []string{"invoice_claim_expires_at"}})
	// The protocol doctor's look at the claims: the claims table whole
	// (a row per instance in flight), the instances and nodes through an
	// index (by key, or hashed).
	gs.rendered(doctorClaimsSQL, doctorSlotsOf(invoices, "enginehealth"), sqltext.Args{"interims": pq.Array([]string{"Sending"}),
		"timeouts_s": pq.Array([]float64{60}), "workflow": "invoices", "run": 42},
		sqltest.Shape{Scans: []string{"invoice_claim"}, Indexes: []string{"invoices_", "nodes_pkey"}})
	pkey := []string{"invoices_pkey"}
	// Through an index (the primary key, or the one on (status, id)).
	gs.rendered(retryInstanceSQL, rowOf(invoices), sqltext.Args{"instance": "63", "to": "Created", "from": "SendFailed"},
		sqltest.Shape{Indexes: []string{"invoices_"}})
	gs.rendered(canonicalIDSQL, idSlotsOf(invoices), instance, sqltest.Shape{Indexes: pkey})
	gs.rendered(instanceStateSQL, rowOf(invoices), instance, sqltest.Shape{Indexes: pkey})
	gs.rendered(failuresExistSQL, failureSlotsOf(invoices), sqltext.Args{"failed": "SendFailed", "mark": "2026-11-26 09:00:00+00"},
		// Through the index on (status, updated).
		sqltest.Shape{Indexes: []string{"invoices_status_updated_at_"}})
	stats, err := r.statsSlots(invoices, "bigint")
	if err != nil {
		gs.t.Fatal(err)
	}
	gs.rendered(retryStatsSQL, stats,
		sqltext.Args{"workflow": "invoices", "task": "send", "ends": pq.Array([]string{"Sent"}), "after": 17},
		// The events after the cursor through their primary key, each
		// instance's later ones through the index on instance.
		sqltest.Shape{Indexes: []string{"attempts_pkey", "invoices_pkey", "events_pkey", "events_instance_"}})
}

// TestGoldenStatements: each shape of each statement, as it runs, is
// committed in testdata/<statement>.sql, or testdata/<statement>/ for a
// statement of several shapes (go test ./recovery -run
// TestGoldenStatements -update rewrites them): a change to a statement
// shows in the diff as the SQL that will run.
func TestGoldenStatements(t *testing.T) {
	sqltest.GoldenShapes(t, "testdata", goldens(t), *update)
}

// TestStatementsPlan: every golden statement plans on real PostgreSQL,
// with sequential scans off: none is left in its plan (every table it
// reads has an index that serves it), and it uses the indexes it is
// written for (a repair batch's pick, the index on the status column).
func TestStatementsPlan(t *testing.T) {
	t.Parallel()
	db := pg.MigratedDB(t)
	db.MustExec(goldenDDL)
	sqltest.PlanShapes(t, db, goldens(t))
}

// TestEveryFileIsUsed: every file of sql/ is a statement with golden
// shapes or a fragment of some (no file is left behind when its
// statement goes), and every statement prepared for the schema has a
// golden shape.
func TestEveryFileIsUsed(t *testing.T) {
	st := newStatements("enginehealth")
	gs := goldens(t)
	used := append(slices.Clone(st.set.Fragments), sqltest.Name(historyJoinSQL), sqltest.Name(settleOutcomeSQL), sqltest.Name(settleReasonSQL), sqltest.Name(openCaseSQL), sqltest.Name(caseRetriesSQL), sqltest.Name(sampleDelaySQL))
	for _, g := range gs {
		used = append(used, g.Statement)
	}
	sqltest.FilesUsed(t, files, used)
	for _, p := range append(st.set.All, catalog.set.All...) {
		if !slices.ContainsFunc(gs, func(g sqltest.Shape) bool { return g.Rendered.SQL == p.SQL }) {
			t.Errorf("%s: a shape without a golden file", p.Name())
		}
	}
}

// goldenDDL: the engine tables of goldenWorkflows, with the indexes the
// sidecar asks for (catalog.go): (status, id), and (status, updated, id)
// for on_failure.
const goldenDDL = `CREATE SCHEMA app;
	CREATE TABLE app.invoices (id bigserial PRIMARY KEY, status text NOT NULL, last_error text, updated_at timestamptz NOT NULL DEFAULT now());
	CREATE INDEX ON app.invoices (status, id);
	CREATE INDEX ON app.invoices (status, updated_at, id);
	CREATE TABLE app.invoice_claim (instance_id bigint PRIMARY KEY, node text NOT NULL, token text NOT NULL,
		claimed_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL);
	CREATE INDEX ON app.invoice_claim (expires_at);
	CREATE TABLE app.reports (id bigserial PRIMARY KEY, state text NOT NULL, last_error text);
	CREATE INDEX ON app.reports (state, id);`
