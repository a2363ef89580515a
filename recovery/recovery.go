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
	"slices"
	"time"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Run triggers.
const (
	TriggerStartup  = "startup"
	TriggerPeriodic = "periodic"
	TriggerManual   = "manual"
)

// DefaultBatchSize of a repair transaction, chosen from BenchmarkRepair:
// against one bare UPDATE, batches of 1,000 reached 0.51 in our runs, of
// 10,000 0.57–0.58, and larger ones no more. A batch holds only
// rows no engine works on (interim, unclaimed), and the term row FOR
// SHARE for tens of milliseconds.
const DefaultBatchSize = 10000

// Action is what happens to an interrupted instance.
type Action struct {
	// To is the state the instance moves to.
	To string
	// Reason is recorded in the event.
	Reason string
}

// Decide returns what an interrupted instance of task becomes: back to
// begin for an atomic_internal task (it left nothing behind), otherwise to
// the failed state. Retry policies plug in here.
func Decide(t Task) Action {
	if t.AtomicInternal {
		return Action{To: t.Begin, Reason: "interrupted atomic task reverted to its begin state"}
	}
	return Action{To: t.Failed, Reason: "interrupted non-atomic task failed: it may have left external effects"}
}

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
	Log       *slog.Logger
}

// Repairer runs repair passes.
type Repairer struct {
	cfg  Config
	runs string
	log  *slog.Logger
	// noEvents leaves out the repair events: set by BenchmarkRepair only,
	// to measure what the audit trail costs.
	noEvents bool
	// lockWait, when set, replaces the constant (tests).
	lockWait time.Duration
}

// New returns a repairer.
func New(cfg Config) *Repairer {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	return &Repairer{
		cfg:  cfg,
		runs: pq.QuoteIdentifier(cfg.Schema) + ".runs",
		log:  cfg.Log.With("component", "recovery"),
	}
}

// TaskResult counts the repairs of one task.
type TaskResult struct {
	Workflow string `json:"workflow"`
	Task     string `json:"task"`
	From     string `json:"from"`
	To       string `json:"to"`
	Planned  int64  `json:"planned"`
	Done     int64  `json:"done"`
}

// Result of a run.
type Result struct {
	RunID         int64        `json:"run_id"`
	ClaimsExpired int64        `json:"claims_expired"`
	Tasks         []TaskResult `json:"tasks"`
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
		return r.repair(ctx, o, run, wfs, false, false)
	})
}

// Recover expires claims and repairs interrupted instances of the
// claimable workflows in scope (all when empty), in a run of its own.
func (r *Repairer) Recover(ctx context.Context, o *leader.Office, trigger string, sc Scope, resumedFrom *int64) (Result, error) {
	wfs, err := r.Claimable(sc)
	if err != nil {
		return Result{}, err
	}
	spec := RunSpec{Kind: KindRecovery, Trigger: trigger, Scope: ScopeOf(wfs), ResumedFrom: resumedFrom}
	return r.inRun(ctx, o, spec, func(run int64) (Result, error) {
		return r.Repair(ctx, o, run, wfs, resumedFrom != nil)
	})
}

// Repair expires the claims and repairs the unclaimed interrupted
// instances of the given claimable workflows, inside run; resumed says
// that run resumes one a previous master left unfinished.
func (r *Repairer) Repair(ctx context.Context, o *leader.Office, run int64, wfs []Workflow, resumed bool) (Result, error) {
	return r.repair(ctx, o, run, wfs, true, resumed)
}

// ErrScope: the scope names an unknown or non-claimable workflow.
var ErrScope = errors.New("recovery: bad scope")

// Claimable returns the claimable workflows of scope (all when empty).
func (r *Repairer) Claimable(sc Scope) ([]Workflow, error) {
	var wfs []Workflow
	for _, name := range sc.Workflows {
		i := slices.IndexFunc(r.cfg.Workflows, func(w Workflow) bool { return w.Name == name })
		switch {
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

// repair handles each workflow: its expired claims first (claimable only),
// then each task's interrupted instances.
func (r *Repairer) repair(ctx context.Context, o *leader.Office, run int64, wfs []Workflow, claimable, resumed bool) (Result, error) {
	var res Result
	for _, w := range wfs {
		var tbl *claims.Table
		// attribute: a repair event names the node whose claim on the
		// instance expired. Only instances whose claim this run (or the
		// run it resumes) expired can have one: when there is none, the
		// events are written without looking it up for each instance.
		attribute := false
		if claimable {
			if w.Claims == nil {
				return res, fmt.Errorf("recovery: workflow %s is not claimable", w.Name)
			}
			tbl = w.Claims
			n, err := r.expire(ctx, o, run, w, *tbl)
			res.ClaimsExpired += n
			if err != nil {
				return res, err
			}
			attribute = n > 0 || resumed
		}
		for _, t := range w.Tasks {
			unclaimed := "TRUE"
			if tbl != nil {
				unclaimed = tbl.Unclaimed("t")
			}
			planned, err := r.count(ctx, w, t, unclaimed)
			if err != nil {
				return res, err
			}
			a := Decide(t)
			tr := TaskResult{Workflow: w.Name, Task: t.Name, From: t.Interim, To: a.To, Planned: planned}
			if planned > 0 {
				if err := r.addPlanned(ctx, o, run, planned); err != nil {
					return res, err
				}
				tr.Done, err = r.repairTask(ctx, o, run, w, t, tbl, attribute)
			}
			res.Tasks = append(res.Tasks, tr)
			if err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

func (r *Repairer) expire(ctx context.Context, o *leader.Office, run int64, w Workflow, t claims.Table) (int64, error) {
	var total int64
	for {
		var n int
		err := r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
			var err error
			n, err = t.Expire(ctx, tx, claims.ExpireParams{Limit: r.cfg.BatchSize,
				Record: func(expired string) (string, []any) {
					return r.cfg.Events.InsertSelect(audit.Columns{Kind: "$2", RunID: "$3", Node: "x.node", Workflow: "$4",
						Instance: "x.instance", FromState: "x.state",
						Reason: `'claim ' || x.token || ' of node ' || x.node || ' expired at ' || x.expires_at`,
					}, expired+" x"), []any{audit.KindClaimExpired, run, w.Name}
				},
			})
			if err != nil || n == 0 {
				return err
			}
			_, err = tx.ExecContext(ctx, `UPDATE `+r.runs+` SET claims_expired = claims_expired + $2 WHERE id = $1`, run, n)
			return err
		})
		if err != nil {
			return total, err
		}
		total += int64(n)
		if n < r.cfg.BatchSize {
			return total, nil
		}
	}
}

// count returns how many instances of t are in its interim state and
// satisfy unclaimed (an SQL condition on alias t; "TRUE" when the workflow
// takes no claims).
func (r *Repairer) count(ctx context.Context, w Workflow, t Task, unclaimed string) (int64, error) {
	var n int64
	q := fmt.Sprintf(`SELECT count(*) FROM %s AS t WHERE %s = $1 AND %s`, claims.Ident(w.Table), claims.Ident(w.StatusColumn), unclaimed)
	if err := sqlx.GetContext(ctx, r.cfg.DB, &n, q, t.Interim); err != nil {
		return 0, fmt.Errorf("count %s.%s in %q: %w", w.Name, t.Name, t.Interim, err)
	}
	return n, nil
}

// lockWait bounds how long a repair batch waits for a row lock before it
// is done again skipping locked rows: next to nothing. A batch that waited
// for a row would move it after the other transaction ends, judged by the
// statement's snapshot, which cannot see a claim that transaction inserted
// without changing the row; the pick under FOR NO KEY UPDATE SKIP LOCKED
// leaves such a row alone.
const lockWait = time.Millisecond

// lockWaitOf is the repairer's lockWait (tests lengthen it).
func (r *Repairer) lockWaitOf() time.Duration { return cmp.Or(r.lockWait, lockWait) }

// repairTask repairs the task's unclaimed instances in its interim state,
// batch by batch, and returns how many it moved.
func (r *Repairer) repairTask(ctx context.Context, o *leader.Office, run int64, w Workflow, t Task, tbl *claims.Table, attribute bool) (int64, error) {
	a := Decide(t)
	node := ""
	if attribute {
		node = r.cfg.Events.LatestExpiryNode("$6", "m.moved_id::text")
	}
	ti, id, st := claims.Ident(w.Table), claims.Ident(w.IDColumn), claims.Ident(w.StatusColumn)
	pred, predB := "TRUE", "TRUE"
	if tbl != nil {
		pred, predB = tbl.Unclaimed("t"), tbl.Unclaimed("b")
	}
	// One statement per batch moves the instances, writes one event each
	// (naming the node whose claim on the instance expired last, if any)
	// and counts them in the run.
	//
	// Keyset batches in id order: each batch starts after the last id of
	// the one before, so it does not re-walk the index entries of rows
	// already moved (an index on (status, id) makes this index-driven). The
	// batch is moved by tuple id; the UPDATE re-asserts the predicate
	// (still interim, still unclaimed), so a row changed since the pick is
	// left alone (the task goes on while the pick was full, whatever the
	// UPDATE moved; the cursor is the pick's last id). Engines that follow
	// the claim protocol never lock an unclaimed interim row, so the pick
	// takes no row locks (a lock per row cost about 0.025 of the ratio to a
	// bare UPDATE) and the batch does not wait for one (lockWait): should a row be locked, the batch is done
	// again with the pick under FOR NO KEY UPDATE SKIP LOCKED (the lock the
	// UPDATE takes; foreign-key checks' KEY SHARE locks do not stop it), and
	// so are the batches after. A row changed while the batch ran is left
	// for the next pass, as a locked one is.
	ev := r.cfg.Events.InsertSelect(audit.Columns{Kind: "$4", RunID: "$5", Node: node, Workflow: "$6",
		Instance: "m.moved_id::text", Task: "$7", FromState: "$1", ToState: "$3", Reason: "$8"}, "moved m")
	if r.noEvents {
		ev = "SELECT $4::text, $6::text, $7::text, $8::text"
	}
	batchSQL := func(after, skipLocked bool) string {
		cursor, lock := "", ""
		if after {
			cursor = fmt.Sprintf("AND b.%s > $9", id)
		}
		if skipLocked {
			lock = "FOR NO KEY UPDATE SKIP LOCKED"
		}
		return fmt.Sprintf(`WITH pick AS MATERIALIZED (
				SELECT b.ctid AS tid, b.%[2]s AS id FROM %[1]s AS b WHERE b.%[3]s = $1 %[5]s AND %[6]s
				ORDER BY b.%[2]s LIMIT $2 %[9]s
			), moved AS (
				UPDATE %[1]s AS t SET %[3]s = $3
				WHERE t.ctid = ANY (ARRAY(SELECT p.tid FROM pick p))
				  AND t.%[3]s = $1 AND %[4]s
				RETURNING t.%[2]s AS moved_id
			), ev AS (
				%[7]s
			), batch AS (
				SELECT (SELECT count(*) FROM moved) AS n, (SELECT count(*) FROM pick) AS picked,
					(SELECT p.id FROM pick p ORDER BY p.id DESC LIMIT 1)::text AS last
			), counted AS (
				UPDATE %[8]s SET done = done + (SELECT n FROM batch) WHERE id = $5
			)
			SELECT n, picked, coalesce(last, '') FROM batch`,
			ti, id, st, pred, cursor, predB, ev, r.runs, lock)
	}
	skipLocked := false
	var total int64
	var cursor string
	for {
		var n, picked int
		var last string
		err := r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
			if !skipLocked {
				if _, err := tx.ExecContext(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = %d`, r.lockWaitOf().Milliseconds())); err != nil {
					return err
				}
			}
			args := []any{t.Interim, r.cfg.BatchSize, a.To, audit.KindRepair, run, w.Name, t.Name, a.Reason}
			q := batchSQL(cursor != "", skipLocked)
			if cursor != "" {
				args = append(args, cursor)
			}
			if err := tx.QueryRowContext(ctx, q, args...).Scan(&n, &picked, &last); err != nil {
				return fmt.Errorf("move batch: %w", err)
			}
			return nil
		})
		if !skipLocked && pgdb.IsLockTimeout(err) {
			r.log.InfoContext(ctx, "a row to repair is locked: picking with SKIP LOCKED", "workflow", w.Name, "task", t.Name, "run", run)
			skipLocked = true
			continue
		}
		if err != nil {
			return total, fmt.Errorf("repair %s.%s: %w", w.Name, t.Name, err)
		}
		total += int64(n)
		if picked < r.cfg.BatchSize {
			return total, nil
		}
		cursor = last
	}
}
