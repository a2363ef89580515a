package recovery

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// WorkflowPlan is what a recovery run would do to one workflow.
type WorkflowPlan struct {
	Workflow       string
	ClaimsToExpire int64
	Tasks          []TaskResult
}

// Plan computes what Recover would do for scope now, and changes nothing:
// per workflow the claims to expire and per task how many instances would
// move and where. It needs no office.
func (r *Repairer) Plan(ctx context.Context, sc Scope) ([]WorkflowPlan, error) {
	wfs, err := r.Claimable(sc)
	if err != nil {
		return nil, err
	}
	plans := []WorkflowPlan{}
	for _, w := range wfs {
		t := w.Claims // Claimable returns only workflows with one
		p := WorkflowPlan{Workflow: w.Name, Tasks: []TaskResult{}}
		var err error
		if p.ClaimsToExpire, err = t.CountExpired(ctx, r.cfg.DB); err != nil {
			return nil, err
		}
		for _, task := range w.Tasks {
			tr := TaskResult{Workflow: w.Name, Task: task.Name, From: task.Interim}
			tr.To, tr.Effect = FirstEffect(task, CauseInterrupt)
			if tr.Plan, err = r.planTask(ctx, w, task); err != nil {
				return nil, fmt.Errorf("plan: %w", err)
			}
			for _, e := range tr.Plan {
				tr.Planned += e.Instances
			}
			p.Tasks = append(p.Tasks, tr)
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// PlannedEffect is what a recovery run would do to some of a task's
// interrupted instances: those with the same history.
type PlannedEffect struct {
	Instances int64
	// To is the state they go to now; empty when they wait or are held.
	To     string
	Effect string
}

// planTask groups the instances of task t a recovery run would decide
// now (in its interim state, unclaimed once expired claims are deleted,
// not parked unless run again since) by what their history makes of them
// (the retries counted as the repair counts them, whether an error
// matches non_retryable), and says what happens to each group, in the
// order of the retries counted.
func (r *Repairer) planTask(ctx context.Context, w Workflow, t Task) ([]PlannedEffect, error) {
	q, err := r.renderPlanTask(w, t)
	if err != nil {
		return nil, fmt.Errorf("%s.%s: %w", w.Name, t.Name, err)
	}
	var groups []struct {
		Prev  int   `db:"prev"`
		Match int   `db:"match"`
		N     int64 `db:"n"`
	}
	if err := sqlx.SelectContext(ctx, r.cfg.DB, &groups, q.SQL, q.Args...); err != nil {
		return nil, fmt.Errorf("%s.%s in %q: %w", w.Name, t.Name, t.Interim, err)
	}
	var out []PlannedEffect
	for _, g := range groups {
		to, e := planned(t, g.Prev, g.Match)
		// Groups that come out the same (retries past max_attempts are
		// all exhausted) are one.
		if n := len(out); n > 0 && out[n-1].Effect == e {
			out[n-1].Instances += g.N
			continue
		}
		out = append(out, PlannedEffect{Instances: g.N, To: to, Effect: e})
	}
	return out, nil
}

// planEach is planTask instance by instance: what a recovery run would
// do now to each instance of task t it would decide, by its id (as
// text). The tests compare it with the run that follows.
func (r *Repairer) planEach(ctx context.Context, w Workflow, t Task) (map[string]InstancePlan, error) {
	q, err := r.renderPlan(w, t, true)
	if err != nil {
		return nil, fmt.Errorf("%s.%s: %w", w.Name, t.Name, err)
	}
	var rows []struct {
		ID    string `db:"id"`
		Prev  int    `db:"prev"`
		Match int    `db:"match"`
		N     int64  `db:"n"`
	}
	if err := sqlx.SelectContext(ctx, r.cfg.DB, &rows, q.SQL, q.Args...); err != nil {
		return nil, fmt.Errorf("%s.%s in %q: %w", w.Name, t.Name, t.Interim, err)
	}
	out := make(map[string]InstancePlan, len(rows))
	for _, x := range rows {
		to, e := planned(t, x.Prev, x.Match)
		out[x.ID] = InstancePlan{To: to, Effect: e, Retries: x.Prev}
	}
	return out, nil
}

// InstancePlan is what a recovery run would do to one instance (planEach).
type InstancePlan struct {
	// To and Effect as in PlannedEffect; Retries: the retries counted.
	To, Effect string
	Retries    int
}

// planned is what a run makes of an instance of t interrupted after prev
// retries whose error matches the non-retryable pattern match (1-based;
// 0: none), as a plan's row says them.
func planned(t Task, prev, match int) (to, effect string) {
	matched := ""
	if match > 0 {
		matched = t.InterruptPolicy().NonRetryable[match-1]
	}
	return effectOf(t, CauseInterrupt, prev, matched)
}

// planTaskSQL is the statement of a dry run's plan of a task
// (sql/plan_task.sql).
var planTaskSQL = load("plan_task")

// planSlots fill planTaskSQL.
type planSlots struct {
	// Table and Status name the instance table and its status column, quoted;
	// ErrorColumn: its error column, quoted, or "".
	Table, Status, ErrorColumn string
	// Patterns means non-retryable patterns are matched against the error.
	Patterns bool
	// HistoryJoin joins b's attempts row as a; RetriesCounted and
	// Decidable read it (the repair's own: retriesCountedSQL,
	// decidableSQL); UnclaimedAfterExpiry: b has no claim but expired
	// ones.
	HistoryJoin, RetriesCounted, Decidable, UnclaimedAfterExpiry string
	// Each: one row per instance (planEach), its id as text (Instance)
	// instead of a count.
	Each     bool
	Instance string
}

// renderPlanTask renders the statement of the plan of task t of the
// claimable workflow w and its parameters.
func (r *Repairer) renderPlanTask(w Workflow, t Task) (sqltext.Statement, error) {
	return r.renderPlan(w, t, false)
}

// renderPlan renders the plan of task t of w: grouped, or instance by
// instance (each).
func (r *Repairer) renderPlan(w Workflow, t Task, each bool) (sqltext.Statement, error) {
	tbl := w.Claims
	// An instance with an expired claim row now is interrupted again
	// once the run deletes it.
	again := "(" + r.againSQL(CauseInterrupt, tbl, "", instanceOf(w), sqltext.Arg("workflow"), sqltext.Arg("from")) + " OR " + tbl.Claimed("b") + ")"
	p := t.InterruptPolicy()
	sl := planSlots{
		Table: claims.Ident(w.Table), Status: claims.Ident(w.StatusColumn),
		Patterns:       w.ErrorColumn != "" && len(p.NonRetryable) > 0,
		RetriesCounted: retriesCountedSQL, Decidable: decidableSQL, UnclaimedAfterExpiry: tbl.UnclaimedAfterExpiry("b"),
	}
	if each {
		sl.Each, sl.Instance = true, instanceOf(w)
	}
	var err error
	if sl.HistoryJoin, err = r.historyJoin(again, instanceOf(w)); err != nil {
		return sqltext.Statement{}, err
	}
	args := sqltext.Args{"workflow": w.Name, "task": t.Name, "from": t.Interim}
	if w.ErrorColumn != "" {
		sl.ErrorColumn = claims.Ident(w.ErrorColumn)
	}
	if sl.Patterns {
		args["patterns"] = p.pgPatterns()
	}
	return planTaskSQL.Render(sl, args)
}
