// Package recovery repairs workflow instances left in an interim state by an
// interrupted task. It is master-only: every write goes through the
// leader.Fence, so a deposed master changes nothing.
//
// A repair pass is a run: a row in the runs table written first (term,
// trigger, scope, planned count), then batches of at most BatchSize
// instances, each one transaction that
//
//   - picks rows still in the interim state with FOR UPDATE SKIP LOCKED,
//   - moves them with an UPDATE that re-asserts the predicate,
//   - writes one event per instance pointing at the run,
//   - adds its count to the run row,
//   - and checks the fencing term,
//
// so each batch is all-or-nothing and a crash between batches loses nothing.
// What an interrupted task becomes is decided in one place, Decide.
package recovery

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/audit"
	"github.com/enginehealth/enginehealth/internal/pgdb"
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

// DefaultBatchSize of a repair transaction.
const DefaultBatchSize = 1000

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
func Decide(t configs.Task) Action {
	if t.AtomicInternal {
		return Action{To: t.Begin, Reason: "interrupted atomic task reverted to its begin state"}
	}
	return Action{To: t.Failed, Reason: "interrupted non-atomic task failed: it may have left external effects"}
}

// Config of a Repairer.
type Config struct {
	DB        *sqlx.DB
	Fence     *leader.Fence
	Schema    string
	Workflows []configs.Workflow
	BatchSize int
	Log       *slog.Logger
}

// Repairer runs repair passes.
type Repairer struct {
	cfg    Config
	runs   string
	events *audit.Log
	log    *slog.Logger
}

// New returns a repairer.
func New(cfg Config) *Repairer {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	return &Repairer{
		cfg:    cfg,
		runs:   pq.QuoteIdentifier(cfg.Schema) + ".runs",
		events: audit.New(cfg.Schema),
		log:    cfg.Log.With("component", "recovery"),
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
	RunID int64        `json:"run_id"`
	Tasks []TaskResult `json:"tasks"`
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
// non-claimable workflow. The caller decides that the cluster is cold.
func (r *Repairer) Startup(ctx context.Context, o *leader.Office) (Result, error) {
	var wfs []configs.Workflow
	for _, w := range r.cfg.Workflows {
		if !w.Claimable {
			wfs = append(wfs, w)
		}
	}
	return r.run(ctx, o, TriggerStartup, wfs)
}

type scope struct {
	Workflows []string `json:"workflows"`
}

func (r *Repairer) run(ctx context.Context, o *leader.Office, trigger string, wfs []configs.Workflow) (Result, error) {
	start := time.Now()
	var res Result
	var planned int64
	for _, w := range wfs {
		for _, t := range w.Tasks {
			n, err := r.count(ctx, w, t)
			if err != nil {
				return res, err
			}
			a := Decide(t)
			res.Tasks = append(res.Tasks, TaskResult{Workflow: w.Name, Task: t.Name, From: t.Interim, To: a.To, Planned: n})
			planned += n
		}
	}
	var sc scope
	for _, w := range wfs {
		sc.Workflows = append(sc.Workflows, w.Name)
	}
	scopeJSON, _ := json.Marshal(sc)
	err := r.cfg.Fence.InTx(ctx, o, func(tx *sqlx.Tx) error {
		return tx.GetContext(ctx, &res.RunID,
			`INSERT INTO `+r.runs+` (term, master, trigger, scope, planned) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
			o.Term, o.Candidate.Name, trigger, string(scopeJSON), planned)
	})
	if err != nil {
		return res, fmt.Errorf("start %s run: %w", trigger, err)
	}
	i := 0
	for _, w := range wfs {
		for _, t := range w.Tasks {
			n, err := r.repairTask(ctx, o, res.RunID, w, t)
			res.Tasks[i].Done = n
			i++
			if err != nil {
				r.finish(ctx, o, res.RunID, err)
				return res, err
			}
		}
	}
	if err := r.finish(ctx, o, res.RunID, nil); err != nil {
		return res, err
	}
	r.log.InfoContext(ctx, "run finished", "run", res.RunID, "trigger", trigger, "planned", planned,
		"repaired", res.Done(), "took", time.Since(start).Round(time.Millisecond))
	return res, nil
}

func (r *Repairer) finish(ctx context.Context, o *leader.Office, run int64, runErr error) error {
	status, msg := "finished", ""
	if runErr != nil {
		status, msg = "failed", runErr.Error()
	}
	err := r.cfg.Fence.InTx(ctx, o, func(tx *sqlx.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE `+r.runs+` SET status = $2, error = $3, finished_at = now() WHERE id = $1`, run, status, msg)
		return err
	})
	if err != nil {
		return fmt.Errorf("finish run %d: %w", run, err)
	}
	return nil
}

func (r *Repairer) count(ctx context.Context, w configs.Workflow, t configs.Task) (int64, error) {
	var n int64
	q := fmt.Sprintf(`SELECT count(*) FROM %s WHERE %s = $1`, pgdb.Ident(w.Table), pgdb.Ident(w.StatusColumn))
	if err := r.cfg.DB.GetContext(ctx, &n, q, t.Interim); err != nil {
		return 0, fmt.Errorf("count %s.%s in %q: %w", w.Name, t.Name, t.Interim, err)
	}
	return n, nil
}

// repairTask repairs every instance of t in its interim state, batch by
// batch, and returns how many it moved.
func (r *Repairer) repairTask(ctx context.Context, o *leader.Office, run int64, w configs.Workflow, t configs.Task) (int64, error) {
	a := Decide(t)
	tbl, id, st := pgdb.Ident(w.Table), pgdb.Ident(w.IDColumn), pgdb.Ident(w.StatusColumn)
	update := fmt.Sprintf(`WITH batch AS (
			SELECT %[2]s FROM %[1]s WHERE %[3]s = $1 LIMIT $2 FOR UPDATE SKIP LOCKED
		)
		UPDATE %[1]s AS t SET %[3]s = $3 FROM batch
		WHERE t.%[2]s = batch.%[2]s AND t.%[3]s = $1
		RETURNING t.%[2]s::text`, tbl, id, st)
	insertEvents := `INSERT INTO ` + pq.QuoteIdentifier(r.cfg.Schema) + `.events
			(kind, actor, term, run_id, workflow, instance, task, from_state, to_state, reason)
		SELECT $1, $2, $3, $4, $5, i, $6, $7, $8, $9 FROM unnest($10::text[]) AS i`
	var total int64
	for {
		var ids []string
		err := r.cfg.Fence.InTx(ctx, o, func(tx *sqlx.Tx) error {
			ids = ids[:0]
			if err := tx.SelectContext(ctx, &ids, update, t.Interim, r.cfg.BatchSize, a.To); err != nil {
				return fmt.Errorf("move batch: %w", err)
			}
			if len(ids) == 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, insertEvents, audit.KindRepair, o.Candidate.Name, o.Term, run,
				w.Name, t.Name, t.Interim, a.To, a.Reason, pq.Array(ids)); err != nil {
				return fmt.Errorf("write events: %w", err)
			}
			_, err := tx.ExecContext(ctx, `UPDATE `+r.runs+` SET done = done + $2 WHERE id = $1`, run, len(ids))
			return err
		})
		if err != nil {
			return total, fmt.Errorf("repair %s.%s: %w", w.Name, t.Name, err)
		}
		total += int64(len(ids))
		if len(ids) < r.cfg.BatchSize {
			return total, nil
		}
	}
}
