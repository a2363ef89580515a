// Package recovery repairs workflow instances left in an interim state by an
// interrupted task. It is master-only: every write goes through the
// leader.Fence, so a deposed master changes nothing.
//
// A repair pass is a run: a row in the runs table written first (term,
// trigger, scope, planned count), then batches of at most BatchSize
// instances, each one transaction that
//
//   - picks rows still in the interim state (without row locks; should a
//     row be locked, again under FOR NO KEY UPDATE SKIP LOCKED),
//   - moves them with an UPDATE that re-asserts the predicate,
//   - writes one event per instance pointing at the run,
//   - adds its count to the run row,
//   - and checks the fencing term,
//
// so each batch is all-or-nothing and a crash between batches loses nothing.
// What an interrupted task becomes is decided in one place, Decide.
package recovery

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"golang.org/x/sync/semaphore"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/faultinject"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/leader"
)

// Trigger is what began a run.
type Trigger string

// Run triggers.
const (
	TriggerStartup  Trigger = "startup"
	TriggerPeriodic Trigger = "periodic"
	TriggerManual   Trigger = "manual"
)

// Triggers are the triggers a run may have.
var Triggers = []Trigger{TriggerStartup, TriggerPeriodic, TriggerManual}

// Valid reports whether t is one of Triggers.
func (t Trigger) Valid() bool { return slices.Contains(Triggers, t) }

// String returns the trigger as the runs table and the API write it.
func (t Trigger) String() string { return string(t) }

// DefaultBatchSize of a repair transaction, chosen from BenchmarkRepair:
// against one bare UPDATE, batches of 1,000 reached 0.51 in our runs, of
// 10,000 0.57–0.58, and larger ones no more (before retry policies; with
// them, 0.09 and 0.23: a batch's fixed cost weighs more). A batch holds only
// rows no engine works on (interim, unclaimed), and the term row FOR
// SHARE for tens of milliseconds.
const DefaultBatchSize = 10000

// MinSettleBatchSize is the least SettleBatchSize by default. An outside
// review ran recovery.batch_size 1 with 17,000 retries at once still
// open: every idle check pass settled them one transaction each, and
// took 40–50 s of a 15 s schedule.
const MinSettleBatchSize = 1000

// Reader reads without a transaction: a pool. It has no Exec, so code of
// this package writes only in the fenced transactions of Fence.
type Reader interface {
	sqlx.QueryerContext
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Config of a Repairer.
type Config struct {
	// DB is read outside the fence (plans, counts, runs); every write
	// goes through Fence, in a leader.Tx. A *sqlx.DB.
	DB    Reader
	Fence *leader.Fence
	// Events is the event log (the one the fence and the node store use).
	Events    *audit.Log
	Schema    string
	Workflows []Workflow
	BatchSize int
	// SettleBatchSize bounds the settle step's transactions, which write
	// only the sidecar's rows (attempts rows, events) and lock no
	// instance: 0 is BatchSize, but at least MinSettleBatchSize, so that
	// a small BatchSize (short locks on the engine's rows) does not make
	// every check pass settle its open cases one transaction each.
	SettleBatchSize int
	Log             *slog.Logger
	// EventRetries reports whether every node of the fleet runs a
	// release that counts an instance's retries at once from their
	// events (schema version 17 and later): only then does a retry at
	// once of an interruption go without its attempts row. Nil: it does.
	EventRetries func(ctx context.Context) (bool, error)
}

// EventRetriesSchema is the first schema version whose releases count
// retries at once from their events (Config.EventRetries).
const EventRetriesSchema = 17

// Repairer runs repair passes.
type Repairer struct {
	cfg Config
	// st holds the statements over the sidecar's own tables (statements.go).
	st statements
	// runs, attempts, interruptions (nodes' failover grades): the
	// sidecar's tables, quoted, for the statements rendered at each use.
	runs, attempts, interruptions, cursors string
	log                                    *slog.Logger
	// noEvents leaves out the repair events: set by BenchmarkRepair only,
	// to measure what the audit trail costs.
	noEvents bool
	// lockWait, when set, replaces the constant (tests).
	lockWait time.Duration
	// caseHorizon is how long settleEvents follows a case of retries at
	// once in the events (eventCaseHorizon; tests shorten it).
	caseHorizon time.Duration
	// unended holds runs of this process whose end could not be written (the
	// database failed then), ended again before the next run begins, as
	// long as their term holds office; a later master closes them
	// otherwise (Unfinished).
	mu      sync.Mutex
	unended []unendedRun
	// parkedAt says where each task's next look at its parked rows starts
	// (settleParked), by workflow, task and state.
	parkedAt map[string]parkedCursor
	// events is held shared (a weight of 1) by repair batches while
	// their transaction runs, the settle pass of retries at once
	// (settleEvents) holds it whole (eventsWhole), so that no repair's
	// events are uncommitted below an id the pass goes past (a master's
	// runs are its process's; an earlier master's transactions ended
	// before this term was recorded). A semaphore, not a sync.RWMutex, so
	// that waiting for it ends with the context (a manual recover beside
	// a settle pass).
	events *semaphore.Weighted
	// taskLocks serialise the repairs of each task in this process
	// (repairTask), by workflow and task name: a batch reads the retries
	// at once written before its task's repair began (histWindow), so no
	// other repair of the task may write one while it runs. A
	// chan struct{} of capacity 1 each, so that waiting for one ends
	// with the context.
	taskLocks sync.Map
	// onTaskWait, when set, is told that a repair waits for a task's
	// lock (tests).
	onTaskWait func(workflow, task string)
	// onBatch, when set, is told each repair batch's mode before the
	// batch begins (tests, benchmarks).
	onBatch func(batchMode)
	// openCases are, by task, the cases of retries at once the last
	// settle pass left open (settleEvents, which reads and writes them
	// holding events whole).
	openCases map[[2]string]openCases
	// onSettleEvents, when set, is told how many events each settle
	// pass read of each task (tests).
	onSettleEvents func(workflow, task string, looked int)
}

// New returns a repairer. It fails without a pool (a nil *sqlx.DB in
// the interface among them), a fence or an event log, with a negative
// batch size, or with a policy whose strategy or backoff kind is not one
// of Strategies or BackoffKinds (a misspelt strategy would otherwise fail
// every instance it meets).
func New(cfg Config) (*Repairer, error) {
	switch {
	case cfg.DB == nil || isNilPointer(cfg.DB):
		return nil, errors.New("recovery: a repairer needs a database pool (Config.DB)")
	case cfg.Fence == nil:
		return nil, errors.New("recovery: a repairer needs the fence (Config.Fence): it writes only in fenced transactions")
	case cfg.Events == nil:
		return nil, errors.New("recovery: a repairer needs the event log (Config.Events)")
	case cfg.BatchSize < 0:
		return nil, fmt.Errorf("recovery: batch size %d may not be negative", cfg.BatchSize)
	case cfg.SettleBatchSize < 0:
		return nil, fmt.Errorf("recovery: settle batch size %d may not be negative", cfg.SettleBatchSize)
	}
	if err := validPolicies(cfg.Workflows); err != nil {
		return nil, err
	}
	cfg.BatchSize = cmp.Or(cfg.BatchSize, DefaultBatchSize)
	cfg.SettleBatchSize = cmp.Or(cfg.SettleBatchSize, max(cfg.BatchSize, MinSettleBatchSize))
	cfg.Schema = cmp.Or(cfg.Schema, pgdb.DefaultSchema)
	cfg.Log = cmp.Or(cfg.Log, slog.New(slog.DiscardHandler))
	return &Repairer{
		cfg:           cfg,
		st:            newStatements(cfg.Schema),
		runs:          sqltext.Ident(cfg.Schema, "runs"),
		attempts:      sqltext.Ident(cfg.Schema, "attempts"),
		interruptions: sqltext.Ident(cfg.Schema, "interruptions"),
		cursors:       sqltext.Ident(cfg.Schema, "settle_cursors"),
		log:           cfg.Log.With("component", "recovery"),

		caseHorizon: eventCaseHorizon,
		openCases:   map[[2]string]openCases{},
		events:      semaphore.NewWeighted(eventsWhole),
	}, nil
}

// isNilPointer reports whether v is a nil pointer held by an interface
// (which is not == nil).
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// validPolicies returns an error naming the first workflow task whose
// policy has a strategy or backoff kind that is set and not known (unset:
// the defaults of Decide).
func validPolicies(wfs []Workflow) error {
	for _, wf := range wfs {
		for _, t := range wf.Tasks {
			for _, p := range []struct {
				name string
				pol  Policy
			}{{"on_interrupt", t.OnInterrupt}, {"on_failure", t.OnFailure}} {
				switch {
				case p.pol.Strategy != "" && !p.pol.Strategy.Valid():
					return fmt.Errorf("recovery: workflow %s, task %s: %s strategy %q is not one of %v", wf.Name, t.Name, p.name, p.pol.Strategy, Strategies)
				case p.pol.Backoff.Kind != "" && !p.pol.Backoff.Kind.Valid():
					return fmt.Errorf("recovery: workflow %s, task %s: %s backoff kind %q is not one of %v", wf.Name, t.Name, p.name, p.pol.Backoff.Kind, BackoffKinds)
				}
			}
		}
	}
	return nil
}

// eventsWhole is the weight of Repairer.events: held whole by the
// settle pass, by one repair batch each.
const eventsWhole = 1 << 20

// eventRetries reports whether retries at once may go without their
// attempts rows (Config.EventRetries); when the fleet's versions cannot
// be read, they are written, as every release reads them.
func (r *Repairer) eventRetries(ctx context.Context) bool {
	if r.cfg.EventRetries == nil {
		return true
	}
	ok, err := r.cfg.EventRetries(ctx)
	if err != nil {
		r.log.WarnContext(ctx, "the fleet's schema versions are unknown: retries at once write their attempts rows", slog.Any("err", err))
		return false
	}
	return ok
}

// TaskResult counts the repairs of one task.
type TaskResult struct {
	Workflow string
	Task     string
	From     string
	// To is where a first interruption goes (the task's begin or failed
	// state; empty when it waits or is held), and
	// Effect says it in words (e.g. "→ Created, retry 1 of 10 at once").
	To      string
	Effect  string
	Planned int64
	// Plan (a dry run): what happens to the planned instances, by what
	// their history makes of them; null when not a dry run.
	Plan []PlannedEffect
	// Done counts instances handled, of which Retried went back to begin,
	// Scheduled wait for a retry, Held wait for an operator and Failed
	// went to the failed state.
	Done      int64
	Retried   int64
	Scheduled int64
	Held      int64
	Failed    int64
	// Exhausted counts, of Failed, those failed for good after the policy's
	// last retry.
	Exhausted int64
	// Lost counts the instances decided but changed by someone else
	// before their repair was written, left alone (the protocol doctor's
	// late writes).
	Lost int64
}

// Result of a run.
type Result struct {
	RunID         int64
	ClaimsExpired int64
	// Sweep means every interrupted instance was looked for, not only those
	// whose claims the run expired.
	Sweep bool
	Tasks []TaskResult
	// SkippedLocked means a row to repair was locked and left for a later
	// pass (which should sweep).
	SkippedLocked bool
}

// Done returns the number of instances repaired.
func (r Result) Done() int64 {
	var n int64
	for _, t := range r.Tasks {
		n += t.Done
	}
	return n
}

// Startup repairs every instance in an interim state of a task of a
// non-claimable workflow, in a run of its own. The caller decides that the
// cluster is cold.
func (r *Repairer) Startup(ctx context.Context, o *leader.Office, resumedFrom *int64) (Result, error) {
	var wfs []Workflow
	for _, w := range r.cfg.Workflows {
		if !w.Claimable() {
			wfs = append(wfs, w)
		}
	}
	spec := RunSpec{Kind: KindRecovery, Trigger: TriggerStartup, Scope: ScopeOf(wfs), ResumedFrom: resumedFrom}
	return r.inRun(ctx, o, spec, func(run int64) (Result, error) {
		return r.repair(ctx, o, repairParams{run: run, workflows: wfs, sweep: true})
	})
}

// Recover expires claims and repairs interrupted instances of the
// claimable workflows in scope (all when empty), in a run of its own.
func (r *Repairer) Recover(ctx context.Context, o *leader.Office, trigger Trigger, sc Scope, resumedFrom *int64) (Result, error) {
	wfs, err := r.Claimable(sc)
	if err != nil {
		return Result{}, err
	}
	spec := RunSpec{Kind: KindRecovery, Trigger: trigger, Scope: ScopeOf(wfs), ResumedFrom: resumedFrom}
	return r.inRun(ctx, o, spec, func(run int64) (Result, error) {
		return r.Repair(ctx, o, run, wfs, resumedFrom != nil, true)
	})
}

// Repair expires the claims and repairs the unclaimed interrupted
// instances of the given claimable workflows, inside run; resumed says
// that run resumes one a previous master left unfinished.
//
// With sweep (or resumed), every interrupted instance is looked for.
// Without, only the instances whose claims this run expired: in a
// claimable workflow an instance is left in an interim state when its
// engine's claim expires, so that is where new interruptions come from,
// and a pass need not walk the instances parked by a policy (waiting for
// a retry, held) however many there are. The caller sweeps on the first
// pass of an office, after a failed pass and now and then, for whatever
// else leaves an instance interim without a claim (a master that died
// between expiring claims and repairing, claims deleted by hand).
func (r *Repairer) Repair(ctx context.Context, o *leader.Office, run int64, wfs []Workflow, resumed, sweep bool) (Result, error) {
	return r.repair(ctx, o, repairParams{run: run, workflows: wfs, claimable: true, resumed: resumed, sweep: sweep || resumed})
}

// ErrScope means the scope names an unknown or non-claimable workflow.
var ErrScope = errors.New("recovery: bad scope")

// Claimable returns the claimable workflows of scope (all when empty),
// each once however often the scope names it.
func (r *Repairer) Claimable(sc Scope) ([]Workflow, error) {
	var wfs []Workflow
	for _, name := range sc.Workflows {
		i := slices.IndexFunc(r.cfg.Workflows, func(w Workflow) bool { return w.Name == name })
		switch {
		case slices.ContainsFunc(wfs, func(w Workflow) bool { return w.Name == name }):
			continue
		case i < 0:
			return nil, fmt.Errorf("%w: no workflow named %q", ErrScope, name)
		case !r.cfg.Workflows[i].Claimable():
			return nil, fmt.Errorf("%w: workflow %q is not claimable: it is repaired only by start-up recovery on a cold cluster", ErrScope, name)
		}
		wfs = append(wfs, r.cfg.Workflows[i])
	}
	if len(sc.Workflows) == 0 {
		for _, w := range r.cfg.Workflows {
			if w.Claimable() {
				wfs = append(wfs, w)
			}
		}
	}
	return wfs, nil
}

// ScopeOf returns the scope covering the given workflows.
func ScopeOf(wfs []Workflow) Scope {
	sc := Scope{Workflows: []string{}}
	for _, w := range wfs {
		sc.Workflows = append(sc.Workflows, w.Name)
	}
	return sc
}

// inRun runs a recovery in a run (InRun) and logs its outcome.
func (r *Repairer) inRun(ctx context.Context, o *leader.Office, spec RunSpec, work func(run int64) (Result, error)) (Result, error) {
	start := time.Now()
	var res Result
	run, err := r.InRun(ctx, o, spec, func(run int64) error {
		var err error
		res, err = work(run)
		return err
	})
	res.RunID = run
	if err != nil {
		return res, err
	}
	r.log.InfoContext(ctx, "run finished", "run", run, "trigger", spec.Trigger, "scope", spec.Scope.Workflows,
		"claims_expired", res.ClaimsExpired, "repaired", res.Done(), "took", time.Since(start).Round(time.Millisecond))
	return res, nil
}

// repairParams says what a repair covers and how it looks for work.
type repairParams struct {
	// run is the run the repair belongs to.
	run int64
	// workflows are the workflows it repairs.
	workflows []Workflow
	// claimable means the workflows take claims: their expired claims
	// go first (false: start-up recovery of the workflows without).
	claimable bool
	// resumed means the run resumes one a previous master left
	// unfinished.
	resumed bool
	// sweep means every interrupted instance is looked for, not only
	// those whose claims the run expired.
	sweep bool
}

// repair handles each workflow: its expired claims first (claimable only),
// then each task's interrupted instances.
func (r *Repairer) repair(ctx context.Context, o *leader.Office, params repairParams) (Result, error) {
	run, wfs, claimable, resumed, sweep := params.run, params.workflows, params.claimable, params.resumed, params.sweep
	res := Result{Sweep: sweep}
	// Whether retries at once go without their rows: asked once a run,
	// when a first task has instances to repair.
	var rowless, asked bool
	// The runs whose expired claims the repairs are attributed to: this
	// one, and those it resumes (a claim they expired, not an older
	// one: an instance interrupted again since, without a claim, is
	// nobody's interruption).
	runs := []int64{run}
	if resumed && claimable {
		var err error
		if runs, err = r.runChain(ctx, run); err != nil {
			return res, err
		}
	}
	for _, w := range wfs {
		var tbl *claims.Table
		// attr.on: a repair event names the node whose claim on the
		// instance expired. Only instances whose claim this run (or the
		// run it resumes) expired can have one: when there is none, the
		// events are written without looking it up for each instance.
		var attr attribution
		var expired []string // without sweep: the instances to look at
		if claimable {
			if w.Claims == nil {
				return res, fmt.Errorf("recovery: workflow %s is not claimable", w.Name)
			}
			tbl = w.Claims
			ids, err := r.expire(ctx, o, run, w, *tbl)
			res.ClaimsExpired += int64(len(ids))
			if err != nil {
				return res, err
			}
			attr = attribution{on: len(ids) > 0 || resumed, runs: runs, expired: ids}
			if !sweep {
				expired = ids
				if len(ids) == 0 {
					continue
				}
			}
		}
		for _, t := range w.Tasks {
			// The count and the repair under the task's lock: a run that
			// waited for another's repair of the task counts what is
			// left of it.
			tr, skipped, err := r.withTask(ctx, w, t, func() (TaskResult, bool, error) {
				planned, err := r.count(ctx, w, t, tbl, expired)
				if err != nil {
					return TaskResult{}, false, err
				}
				tr := TaskResult{Workflow: w.Name, Task: t.Name, From: t.Interim, Planned: planned}
				tr.To, tr.Effect = FirstEffect(t, CauseInterrupt)
				if planned == 0 {
					return tr, false, nil
				}
				if err := r.addPlanned(ctx, o, run, planned); err != nil {
					return tr, false, err
				}
				if !asked {
					rowless, asked = r.eventRetries(ctx), true
				}
				skipped, err := r.repairTask(ctx, o, taskParams{run: run, workflow: w, task: t, cause: CauseInterrupt, claims: tbl, attr: attr,
					start: cursor{ids: expired}, rowless: rowless}, &tr)
				return tr, skipped, err
			})
			res.SkippedLocked = res.SkippedLocked || skipped
			if tr.Task != "" {
				res.Tasks = append(res.Tasks, tr)
			}
			if err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// expireRecordSQL is the statement that records the events of the claims expire deletes, claims'
// statement's Record (sql/expire_record.sql).
var expireRecordSQL = load("expire_record")

// expireRecord renders the events of the claims expire deletes over the
// relation expired (expire_record.sql): its parameters follow claims'
// statement's $1 (kind, run, workflow).
func (r *Repairer) expireRecord(expired string) (string, error) {
	return expireRecordSQL.Fragment(struct{ Events, Expired string }{r.cfg.Events.Table(), expired})
}

// expire deletes the workflow's expired claims, batch by batch, and returns
// their instances.
func (r *Repairer) expire(ctx context.Context, o *leader.Office, run int64, w Workflow, t claims.Table) ([]string, error) {
	var all []string
	for {
		var ids []string
		err := r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
			var err, renderErr error
			ids, err = t.Expire(ctx, tx, claims.ExpireParams{Limit: r.cfg.BatchSize,
				Record: func(expired string) (string, []any) {
					var record string
					record, renderErr = r.expireRecord(expired)
					return record, []any{audit.KindClaimExpired, run, w.Name}
				},
			})
			if err == nil {
				err = renderErr
			}
			if err != nil || len(ids) == 0 {
				return err
			}
			_, err = r.st.addClaimsExpired.Exec(ctx, tx, sqltext.Args{"run": run, "n": len(ids)})
			return err
		})
		if err != nil {
			return all, err
		}
		all = append(all, ids...)
		if len(ids) < r.cfg.BatchSize {
			return all, nil
		}
	}
}

// count returns how many instances of t are in its interim state, not
// parked by a policy (waiting for a retry or held) unless run again
// since, and unclaimed (tbl: the workflow's claims; nil when it takes
// none); of the instances ids only, when ids is not nil.
func (r *Repairer) count(ctx context.Context, w Workflow, t Task, tbl *claims.Table, ids []string) (int64, error) {
	q, err := r.renderCount(w, t, tbl, ids)
	if err != nil {
		return 0, fmt.Errorf("count %s.%s in %q: %w", w.Name, t.Name, t.Interim, err)
	}
	var n int64
	if err := sqlx.GetContext(ctx, r.cfg.DB, &n, q.SQL, q.Args...); err != nil {
		return 0, fmt.Errorf("count %s.%s in %q: %w", w.Name, t.Name, t.Interim, err)
	}
	return n, nil
}

// countTaskSQL is the statement of count (sql/count_task.sql).
var countTaskSQL = load("count_task")

// countSlots fill countTaskSQL.
type countSlots struct {
	// Table, ID and Status name the instance table and its columns, quoted.
	Table, ID, Status string
	// IDs selects only the instances ids.
	IDs bool
	// Attempts is the attempts table, quoted; Again: the SQL condition
	// that the instance of a parked row a ran again since (againSQL,
	// over a.instance); Unclaimed: b has no claim (TRUE for a workflow
	// without claims), Claimed: it has one (FALSE without claims).
	Attempts, Again, Unclaimed, Claimed string
}

// renderCount renders count's statement and its parameters.
func (r *Repairer) renderCount(w Workflow, t Task, tbl *claims.Table, ids []string) (sqltext.Statement, error) {
	sl := countSlots{Table: claims.Ident(w.Table), ID: claims.Ident(w.IDColumn), Status: claims.Ident(w.StatusColumn), IDs: ids != nil,
		Attempts: r.attempts, Unclaimed: "TRUE", Claimed: "FALSE",
		Again: r.againSQL(CauseInterrupt, tbl, "", "a.instance", sqltext.Arg("workflow"), sqltext.Arg("from"))}
	if tbl != nil && !faultinject.Off(faultinject.Predicate) {
		sl.Unclaimed, sl.Claimed = tbl.Unclaimed("b"), tbl.Claimed("b")
	}
	args := sqltext.Args{"workflow": w.Name, "task": t.Name, "from": t.Interim}
	if ids != nil {
		args["ids"] = pq.Array(ids)
	}
	return countTaskSQL.Render(sl, args)
}

// lockWait bounds how long a repair batch waits for a row lock before it
// is done again skipping locked rows: next to nothing. A batch that waited
// for a row would move it after the other transaction ends, judged by the
// statement's snapshot, which cannot see a claim that transaction inserted
// without changing the row; the pick under FOR NO KEY UPDATE SKIP LOCKED
// leaves such a row alone.
const lockWait = time.Millisecond

// batchWorkMem is the work_mem, in kilobytes, a repair batch of size
// instances asks for at least (batch_settings.sql): 2 kB an instance,
// so that what its statement holds of them (the pick, the decisions,
// the instances kept, a few hundred bytes each, more with long errors)
// stays in memory, from PostgreSQL's default of 4 MB to 128 MB (a batch
// of 64k and more). PostgreSQL takes only what the rows need.
func batchWorkMem(size int) int64 { return min(max(2*int64(size), 4096), 128<<10) }

// lockWaitOf is the repairer's lockWait (tests lengthen it).
func (r *Repairer) lockWaitOf() time.Duration { return cmp.Or(r.lockWait, lockWait) }

// taskParams is one task's repair in a run.
type taskParams struct {
	run      int64
	workflow Workflow
	task     Task
	cause    Cause
	// claims is the workflow's claims table (nil: it takes none).
	claims *claims.Table
	// attr says whether and to which nodes the repairs are attributed.
	attr attribution
	// start is where the first batch picks from.
	start cursor
	// rowless means an interruption retried at once writes no attempts
	// row (eventRetries).
	rowless bool
}

// lockTask takes the task's lock (taskLocks), waiting for it as long as
// ctx allows, and returns its release.
func (r *Repairer) lockTask(ctx context.Context, workflow, task string) (func(), error) {
	l, _ := r.taskLocks.LoadOrStore([2]string{workflow, task}, make(chan struct{}, 1))
	ch := l.(chan struct{})
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	default:
	}
	if r.onTaskWait != nil {
		r.onTaskWait(workflow, task)
	}
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// withTask runs work holding task t's lock (lockTask); waiting for it
// fails as "repair w.t".
func (r *Repairer) withTask(ctx context.Context, w Workflow, t Task, work func() (TaskResult, bool, error)) (TaskResult, bool, error) {
	unlock, err := r.lockTask(ctx, w.Name, t.Name)
	if err != nil {
		return TaskResult{}, false, fmt.Errorf("repair %s.%s: %w", w.Name, t.Name, err)
	}
	defer unlock()
	return work()
}

// histWindow is where a task's repair batches look for the retries at
// once of instances without an attempts row (policy_batch's known, and
// touched when the window is read whole):
// the events after the task's settle cursor (an instance's latest such
// retry is never before it: settleEvents goes past a case only once it
// has its row), up to the newest event when the task's repair began. A
// repair holds the task's lock (lockTask), so the task's retries written
// after that are its own, of instances it picked before the batch's
// (keyset order), which the batch does not pick again. Without a cursor
// (cursor false) the window is empty: the task's first retry without a
// row writes it (policy_batch's started), and the repair's batches after
// that one render no started (batchCounts.cursor).
type histWindow struct {
	after, upto int64
	cursor      bool
}

// histWindowOf reads task t's history window now.
func (r *Repairer) histWindowOf(ctx context.Context, w Workflow, t Task) (histWindow, error) {
	cursors, err := r.settleCursors(ctx)
	if err != nil {
		return histWindow{}, err
	}
	c, ok := cursors[[2]string{w.Name, t.Name}]
	if !ok {
		return histWindow{}, nil
	}
	return histWindow{after: c.After, upto: c.Upto, cursor: true}, nil
}

// repairTask handles the task's unclaimed instances in its interim state
// (CauseInterrupt) or its failed state from params.start (CauseFailure), batch
// by batch (policyBatch), counts them in tr and reports whether a locked
// row was skipped. The caller holds the task's lock (withTask).
//
// Keyset batches in id order: each batch starts after the last id of the
// one before, so it does not re-walk the index entries of rows already
// handled (an index on (status, id) makes this index-driven). Batches are
// applied by tuple id, re-asserting the predicate (still interim, still
// unclaimed), so a row changed since the pick is left alone; the task goes
// on while the pick was full, whatever was applied. Engines that follow the
// claim protocol never lock an unclaimed interim row, so the pick takes no
// row locks (a lock per row cost about 0.025 of the ratio to a bare
// UPDATE) and the batch does not wait for one (lockWait): should a row be
// locked, the batch is done again with the pick under FOR NO KEY UPDATE
// SKIP LOCKED (the lock the UPDATE takes; foreign-key checks' KEY SHARE
// locks do not stop it), and so are the batches after. A row changed
// while the batch ran is left for the next pass, as a locked one is.
func (r *Repairer) repairTask(ctx context.Context, o *leader.Office, params taskParams, tr *TaskResult) (bool, error) {
	run, w, t, c, tbl, attr, rowless := params.run, params.workflow, params.task, params.cause, params.claims, params.attr, params.rowless
	hist, err := r.histWindowOf(ctx, w, t)
	if err != nil {
		return false, fmt.Errorf("repair %s.%s: %w", w.Name, t.Name, err)
	}
	skipLocked := false
	cur := params.start
	// maxID: whether max() takes the ids' type (idColumnOf), asked
	// before a second batch (a first one sorts its pick for the cursor).
	var maxID, askedMax bool
	for {
		var bc batchCounts
		m := batchMode{skipLocked: skipLocked, rowless: rowless, hist: hist, maxID: maxID}
		if r.onBatch != nil {
			r.onBatch(m)
		}
		if err := r.events.Acquire(ctx, 1); err != nil {
			return skipLocked, fmt.Errorf("repair %s.%s: %w", w.Name, t.Name, err)
		}
		err := r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
			ms := ""
			if !skipLocked {
				ms = strconv.FormatInt(r.lockWaitOf().Milliseconds(), 10)
			}
			if _, err := r.st.batchSettings.Exec(ctx, tx, sqltext.Args{"ms": ms, "kb": batchWorkMem(r.cfg.BatchSize)}); err != nil {
				return err
			}
			var err error
			bc, err = r.policyBatch(ctx, tx, run, w, t, c, tbl, attr, cur, m)
			return err
		})
		r.events.Release(1)
		if !skipLocked && pgdb.IsLockTimeout(err) {
			r.log.InfoContext(ctx, "a row to repair is locked: picking with SKIP LOCKED", "workflow", w.Name, "task", t.Name, "run", run)
			skipLocked = true
			continue
		}
		if err != nil {
			return skipLocked, fmt.Errorf("repair %s.%s: %w", w.Name, t.Name, err)
		}
		if bc.done() > 0 {
			// One line per batch, with the counts its events hold.
			r.log.InfoContext(ctx, "repair batch", "run", run, "workflow", w.Name, "task", t.Name, "cause", string(c),
				"retried", bc.retried, "scheduled", bc.waiting, "held", bc.held, "failed", bc.failed, "exhausted", bc.exhausted)
		}
		if bc.cursor {
			// The task's settle cursor exists now: the next batches
			// neither write it nor read their events back for it (their
			// history window stays empty: the events after it are this
			// repair's own).
			hist.cursor = true
		}
		tr.Done += bc.done()
		// Instances that entered the state after the count, beyond the
		// cursor, are repaired too: planned, as the run's row says.
		tr.Planned = max(tr.Planned, tr.Done)
		tr.Retried += bc.retried
		tr.Scheduled += bc.waiting
		tr.Held += bc.held
		tr.Failed += bc.failed
		tr.Exhausted += bc.exhausted
		tr.Lost += bc.lost()
		if bc.picked > 0 {
			cur.id, cur.at, cur.set = bc.last.id, bc.last.at, true
		}
		if bc.picked < r.cfg.BatchSize {
			return skipLocked, nil
		}
		if !askedMax && c == CauseInterrupt {
			id, err := r.idColumnOf(ctx, w)
			if err != nil {
				return skipLocked, fmt.Errorf("repair %s.%s: %w", w.Name, t.Name, err)
			}
			maxID = id.HasMax
			askedMax = true
		}
	}
}
