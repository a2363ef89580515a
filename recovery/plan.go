package recovery

import (
	"context"
	"fmt"
)

// WorkflowPlan is what a recovery run would do to one workflow.
type WorkflowPlan struct {
	Workflow       string       `json:"workflow"`
	ClaimsToExpire int64        `json:"claims_to_expire"`
	Tasks          []TaskResult `json:"tasks"`
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
			n, err := r.count(ctx, w, task, t.UnclaimedAfterExpiry("t"), r.againSQL(CauseInterrupt, w, t, "t", "$2", "$1"), nil)
			if err != nil {
				return nil, fmt.Errorf("plan: %w", err)
			}
			tr := TaskResult{Workflow: w.Name, Task: task.Name, From: task.Interim, Planned: n}
			tr.To, tr.Effect = FirstEffect(task, CauseInterrupt)
			p.Tasks = append(p.Tasks, tr)
		}
		plans = append(plans, p)
	}
	return plans, nil
}
