package recovery

import (
	"context"
	"fmt"
	"time"

	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/leader"
)

// markLag is how far a task's failure mark trails the database clock after
// a pass. An engine's transaction stamps updated_column with its start
// time and becomes visible when it commits: a failure committed up to
// markLag after its timestamp is still found by the next pass.
const markLag = 10 * time.Second

// FailureTasks returns the tasks of wfs whose on_failure policy is not
// none, by workflow.
func FailureTasks(wfs []Workflow) []Workflow {
	var out []Workflow
	for _, w := range wfs {
		var ts []Task
		for _, t := range w.Tasks {
			if t.FailurePolicy().Strategy != StrategyNone {
				ts = append(ts, t)
			}
		}
		if len(ts) > 0 {
			w.Tasks = ts
			out = append(out, w)
		}
	}
	return out
}

// Failures applies the on_failure policies of the configured workflows
// inside run: for each task whose policy is not none, the instances an
// engine moved to the task's failed state at or after the task's mark
// (written, as the database clock, when the policy is first applied: older
// failures are never retried automatically) and not decided since the
// engine last changed them, in batches as interrupted instances are
// (policyBatch), read in updated_column order through the engine's index
// on (status, updated_column). After a task's batches its mark moves up to
// markLag before the pass, unless a locked row was skipped. A pass that
// finds no failure at or after a mark writes nothing, but to move a mark
// more than twice markLag old. The marks of tasks without a policy are
// deleted.
func (r *Repairer) Failures(ctx context.Context, o *leader.Office, run int64) ([]TaskResult, error) {
	wfs := FailureTasks(r.cfg.Workflows)
	marks, err := r.marks(ctx, o, wfs)
	if err != nil {
		return nil, err
	}
	var res []TaskResult
	for _, w := range wfs {
		for _, t := range w.Tasks {
			m, ok := marks[[2]string{w.Name, t.Name}]
			if !ok {
				// First applied: from now on.
				err := r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
					_, err := r.st.insertMark.Exec(ctx, tx, sqltext.Args{"workflow": w.Name, "task": t.Name})
					return err
				})
				if err != nil {
					return res, fmt.Errorf("failure mark of %s.%s: %w", w.Name, t.Name, err)
				}
				continue
			}
			var work bool
			if err := getRendered(ctx, r.cfg.DB, &work, failuresExistSQL, failureSlotsOf(w), sqltext.Args{"failed": t.Failed, "mark": m.mark}); err != nil {
				return res, fmt.Errorf("look for failures of %s.%s: %w", w.Name, t.Name, err)
			}
			skipped := false
			if work {
				tr := TaskResult{Workflow: w.Name, Task: t.Name, From: t.Failed}
				tr.To, tr.Effect = FirstEffect(t, CauseFailure)
				tr, skipped, err = r.withTask(ctx, w, t, func() (TaskResult, bool, error) {
					skipped, err := r.repairTask(ctx, o, taskParams{run: run, workflow: w, task: t, cause: CauseFailure, claims: w.Claims,
						start: cursor{at: m.mark}}, &tr)
					return tr, skipped, err
				})
				if err == nil && tr.Done > 0 {
					err = r.addPlanned(ctx, o, run, tr.Done)
				}
				if tr.Done > 0 {
					res = append(res, tr)
				}
				if err != nil {
					return res, fmt.Errorf("failures of %s.%s: %w", w.Name, t.Name, err)
				}
			}
			if skipped || (!work && !m.stale) {
				continue
			}
			err := r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
				_, err := r.st.moveMark.Exec(ctx, tx, sqltext.Args{"workflow": w.Name, "task": t.Name, "lag_ms": markLag.Milliseconds()})
				return err
			})
			if err != nil {
				return res, fmt.Errorf("move failure mark of %s.%s: %w", w.Name, t.Name, err)
			}
		}
	}
	return res, nil
}

// failureMark is a task's mark as PostgreSQL prints it, and whether it is
// more than twice markLag old.
type failureMark struct {
	mark  string
	stale bool
}

// marks reads the failure marks of the tasks of wfs, deleting those of
// tasks without a policy (any more).
func (r *Repairer) marks(ctx context.Context, o *leader.Office, wfs []Workflow) (map[[2]string]failureMark, error) {
	want := map[[2]string]bool{}
	for _, w := range wfs {
		for _, t := range w.Tasks {
			want[[2]string{w.Name, t.Name}] = true
		}
	}
	var rows []struct {
		Workflow string `db:"workflow"`
		Task     string `db:"task"`
		Mark     string `db:"mark"`
		Stale    bool   `db:"stale"`
	}
	if err := r.st.readMarks.Select(ctx, r.cfg.DB, &rows, sqltext.Args{"stale_ms": 2 * markLag.Milliseconds()}); err != nil {
		return nil, fmt.Errorf("read failure marks: %w", err)
	}
	marks := map[[2]string]failureMark{}
	var goneW, goneT []string
	for _, m := range rows {
		k := [2]string{m.Workflow, m.Task}
		if !want[k] {
			goneW, goneT = append(goneW, m.Workflow), append(goneT, m.Task)
			continue
		}
		marks[k] = failureMark{m.Mark, m.Stale}
	}
	if len(goneW) > 0 {
		err := r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
			_, err := r.st.dropMarks.Exec(ctx, tx, sqltext.Args{"workflows": pq.Array(goneW), "tasks": pq.Array(goneT)})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("drop failure marks: %w", err)
		}
	}
	return marks, nil
}

// failuresExistSQL is the look for failures at or after a task's mark
// (sql/failures_exist.sql).
var failuresExistSQL = load("failures_exist")

// failureSlots fill failuresExistSQL: the instance table and its status
// and updated columns, quoted.
type failureSlots struct{ Table, Status, Updated string }

func failureSlotsOf(w Workflow) failureSlots {
	return failureSlots{Table: claims.Ident(w.Table), Status: claims.Ident(w.StatusColumn), Updated: claims.Ident(w.UpdatedColumn)}
}
