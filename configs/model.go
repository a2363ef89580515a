package configs

import (
	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/recovery"
)

// RecoveryWorkflows maps the workflows of the file onto recovery's model.
func (c *Config) RecoveryWorkflows() []recovery.Workflow {
	out := make([]recovery.Workflow, 0, len(c.Workflows))
	for _, w := range c.Workflows {
		out = append(out, w.model())
	}
	return out
}

func (w Workflow) model() recovery.Workflow {
	m := recovery.Workflow{
		Name: w.Name, Table: w.Table, IDColumn: w.IDColumn, StatusColumn: w.StatusColumn, ErrorColumn: w.ErrorColumn,
		UpdatedColumn: w.UpdatedColumn,
	}
	if t, ok := w.ClaimsTable(); ok {
		m.Claims = &t
	}
	for _, t := range w.Tasks {
		t.applyPolicyDefaults() // a no-op on a loaded configuration
		m.Tasks = append(m.Tasks, recovery.Task{
			Task: claims.Task{
				Name: t.Name, Begin: t.Begin, Interim: t.Interim, Ends: t.EndStates(), Failed: t.Failed, Timeout: t.ClaimTimeout,
			},
			AtomicInternal: t.AtomicInternal, OnInterrupt: t.OnInterrupt.model(), OnFailure: t.OnFailure.model(),
		})
	}
	return m
}

// ClaimsTable returns the claims table of a claimable workflow, as the
// claim protocol names it; false when the workflow is not claimable.
func (w Workflow) ClaimsTable() (claims.Table, bool) {
	if !w.Claimable || w.Claims == nil {
		return claims.Table{}, false
	}
	c := w.Claims
	return claims.Table{
		Instances: w.Table, IDColumn: w.IDColumn, StatusColumn: w.StatusColumn,
		Claims: c.Table, InstanceColumn: c.InstanceColumn, NodeColumn: c.NodeColumn,
		TokenColumn: c.TokenColumn, ClaimedAtColumn: c.ClaimedAtColumn, ExpiresAtColumn: c.ExpiresAtColumn,
	}, true
}

// ClaimTasks returns the workflow's tasks as the claim protocol sees them.
func (w Workflow) ClaimTasks() []claims.Task { return w.model().ClaimTasks() }

func (p Policy) model() recovery.Policy {
	return recovery.Policy{
		Strategy: p.Strategy, MaxAttempts: p.MaxAttempts, NonRetryable: p.NonRetryable,
		Backoff: recovery.Backoff{
			Kind: p.Backoff.Kind, Base: *p.Backoff.Base, MaxDelay: p.Backoff.MaxDelay,
			Jitter: *p.Backoff.Jitter, Multiplier: p.Backoff.Multiplier, Schedule: p.Backoff.Schedule,
		},
	}
}
