// The domain's types as the API sends them: each answer is converted
// into its apitype type here, the one place where the model meets the
// wire. A nil slice stays nil (null) and an empty one empty ([]), as
// encoding/json would have sent the domain's.

package api

import (
	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// wireAll converts each element of s with f: nil when s is nil.
func wireAll[S, T any](s []S, f func(S) T) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s))
	for i, v := range s {
		out[i] = f(v)
	}
	return out
}

// wirePtr converts *p with f: nil when p is nil.
func wirePtr[S, T any](p *S, f func(S) T) *T {
	if p == nil {
		return nil
	}
	v := f(*p)
	return &v
}

func wireNode(n nodes.Node) apitype.Node {
	return apitype.Node{Name: n.Name, Incarnation: n.Incarnation, PreviousIncarnation: n.PreviousIncarnation, Hostname: n.Hostname,
		Status: n.Status, IsMaster: n.IsMaster, LastActive: n.LastActive, ActiveSince: n.ActiveSince, Version: n.Version,
		APIAddress: n.APIAddress, FailoverGrade: n.FailoverGrade, GradeChangedAt: n.GradeChangedAt, GradeSignature: n.GradeSignature,
		GradeReason: n.GradeReason, StatusChangedAt: n.StatusChangedAt, StatusChangedBy: n.StatusChangedBy, StatusReason: n.StatusReason,
		SecondsSinceActive: n.SecondsSinceActive}
}

func wireGradeChange(g nodes.GradeChange) apitype.GradeChange {
	return apitype.GradeChange{Name: g.Name, From: g.From, To: g.To, Reason: g.Reason,
		Signature: wirePtr(g.Signature, func(s nodes.Signature) apitype.Signature {
			return apitype.Signature{Workflow: s.Workflow, Task: s.Task, Instance: s.Instance}
		})}
}

func wireNodeChange(c nodes.Change) apitype.NodeChange {
	return apitype.NodeChange{Name: c.Name, From: c.From, To: c.To}
}

// WirePassStats is p as the API sends it (in GET /v1/leader's answer,
// which the daemon makes of its master's state).
func WirePassStats(p health.PassStats) apitype.PassStats {
	return apitype.PassStats{LastSuccess: p.LastSuccess, LastFailure: p.LastFailure, ConsecutiveFailures: p.ConsecutiveFailures,
		LastError: p.LastError, Disruption: p.Disruption, LastSweep: p.LastSweep, NextSweep: p.NextSweep}
}

func wirePause(p health.Pause) apitype.Pause {
	return apitype.Pause{Paused: p.Paused, Since: p.Since, Actor: p.Actor, Reason: p.Reason, Term: p.Term}
}

func wireCheckResult(r health.CheckResult) apitype.CheckResult {
	return apitype.CheckResult{RunID: r.RunID, Disruption: r.Disruption, DisruptionReason: r.DisruptionReason, Forced: r.Forced,
		Paused: wirePtr(r.Paused, wirePause), Threshold: r.Threshold, NotResponding: wireAll(r.NotResponding, wireNodeChange),
		Revived: wireAll(r.Revived, wireNodeChange), Forgotten: wireAll(r.Forgotten, wireNodeChange), Recovery: wireResult(r.Recovery),
		Failures: wireAll(r.Failures, wireTaskResult), Retries: apitype.DueResult{Retried: r.Retries.Retried, Cancelled: r.Retries.Cancelled},
		Settled: wireAll(r.Settled, wireSettleCounts), Grades: wireAll(r.Grades, wireGradeChange), Stale: r.Stale, Took: r.Took}
}

func wireSettleCounts(c recovery.SettleCounts) apitype.SettleCounts {
	return apitype.SettleCounts{Workflow: c.Workflow, Task: c.Task, Succeeded: c.Succeeded, Failed: c.Failed, Cancelled: c.Cancelled,
		HoldsCancelled: c.HoldsCancelled}
}

func wireResult(r recovery.Result) apitype.RecoveryResult {
	return apitype.RecoveryResult{RunID: r.RunID, ClaimsExpired: r.ClaimsExpired, Sweep: r.Sweep, Tasks: wireAll(r.Tasks, wireTaskResult),
		SkippedLocked: r.SkippedLocked}
}

func wireTaskResult(t recovery.TaskResult) apitype.TaskResult {
	return apitype.TaskResult{Workflow: t.Workflow, Task: t.Task, From: t.From, To: t.To, Effect: t.Effect, Planned: t.Planned,
		Plan: wireAll(t.Plan, func(e recovery.PlannedEffect) apitype.PlannedEffect {
			return apitype.PlannedEffect{Instances: e.Instances, To: e.To, Effect: e.Effect}
		}),
		Done: t.Done, Retried: t.Retried, Scheduled: t.Scheduled, Held: t.Held, Failed: t.Failed, Exhausted: t.Exhausted}
}

func wirePlan(p recovery.WorkflowPlan) apitype.WorkflowPlan {
	return apitype.WorkflowPlan{Workflow: p.Workflow, ClaimsToExpire: p.ClaimsToExpire, Tasks: wireAll(p.Tasks, wireTaskResult)}
}

func wireRun(r recovery.RunRow) apitype.Run {
	return apitype.Run{ID: r.ID, Term: r.Term, Master: r.Master, Kind: r.Kind, Trigger: r.Trigger, Scope: r.Scope,
		ClaimsExpired: r.ClaimsExpired, Planned: r.Planned, Done: r.Done, Status: r.Status, StartedAt: r.StartedAt,
		FinishedAt: r.FinishedAt, Error: r.Error, ResumedFrom: r.ResumedFrom}
}

func wireRunDetail(d recovery.RunDetail) apitype.RunDetail {
	return apitype.RunDetail{Run: wireRun(d.RunRow), Took: d.Took, Counts: wireAll(d.Counts, func(c audit.Count) apitype.EventCount {
		return apitype.EventCount{Workflow: c.Workflow, Task: c.Task, Kind: c.Kind, To: c.To, Count: c.Count}
	})}
}

func wireEvent(e audit.Event) apitype.Event {
	return apitype.Event{ID: e.ID, At: e.At, Kind: e.Kind, Actor: e.Actor, Term: e.Term, RunID: e.RunID, Node: e.Node,
		Workflow: e.Workflow, Instance: e.Instance, Task: e.Task, FromState: e.FromState, ToState: e.ToState, Attempt: e.Attempt,
		Reason: e.Reason, Via: e.Via}
}

func wireRef(r recovery.Ref) apitype.Ref {
	return apitype.Ref{Workflow: r.Workflow, Instance: r.Instance}
}

// domainRef is a request's reference as the domain takes it.
func domainRef(r apitype.Ref) recovery.Ref {
	return recovery.Ref{Workflow: r.Workflow, Instance: r.Instance}
}

func wireHold(h recovery.Hold) apitype.Hold {
	return apitype.Hold{Workflow: h.Workflow, Instance: h.Instance, Task: h.Task, State: h.State, Cause: h.Cause, Since: h.Since,
		Attempts: h.Attempts, Manual: h.Manual, LastNode: h.LastNode, Nodes: h.Nodes, LastError: h.LastError, Reason: h.Reason}
}

func wireWaiting(w recovery.WaitingRetry) apitype.WaitingRetry {
	return apitype.WaitingRetry{Hold: wireHold(w.Hold), Due: w.Due, DueInSeconds: w.DueInSeconds, MaxAttempts: w.MaxAttempts}
}

func wireHoldResult(r recovery.HoldResult) apitype.HoldResult {
	return apitype.HoldResult{Action: r.Action, Decided: r.Decided, NotHeld: wireAll(r.NotHeld, wireRef),
		Cancelled: wireAll(r.Cancelled, func(o recovery.HoldOutcome) apitype.HoldOutcome {
			return apitype.HoldOutcome{Ref: wireRef(o.Ref), Task: o.Task, Reason: o.Reason}
		})}
}

func wireRetryResult(r recovery.RetryResult) apitype.RetryResult {
	return apitype.RetryResult{Ref: wireRef(r.Ref), Task: r.Task, From: r.From, To: r.To, Manual: r.Manual, Attempts: r.Attempts,
		Replaced: r.Replaced}
}

func wireInstance(v recovery.InstanceView) apitype.InstanceView {
	return apitype.InstanceView{Workflow: v.Workflow, Instance: v.Instance, State: v.State, Truncated: v.Truncated,
		Claim: wirePtr(v.Claim, func(c claims.ClaimRow) apitype.Claim {
			return apitype.Claim{Node: c.Node, Token: c.Token, ClaimedAt: c.ClaimedAt, ExpiresAt: c.ExpiresAt, Expired: c.Expired}
		}),
		Attempts: wireAll(v.Attempts, func(a recovery.AttemptView) apitype.Attempt {
			return apitype.Attempt{Task: a.Task, AttemptCount: a.AttemptCount, Manual: a.Manual, State: a.State, InRetry: a.InRetry,
				Cause: a.Cause, LeftIn: a.LeftIn, Since: a.Since, LastAttemptTime: a.LastAttemptTime, NextAttemptTime: a.NextAttemptTime,
				LastNode: a.LastNode, Nodes: a.Nodes, LastReason: a.LastReason, LastError: a.LastError}
		}),
		Events: wireAll(v.Events, wireEvent)}
}

func wireRetryStats(s recovery.RetryStats) apitype.RetryStats {
	return apitype.RetryStats{Workflow: s.Workflow, Task: s.Task, Instances: s.Instances, Retried: s.Retried, Scheduled: s.Scheduled,
		Manual: s.Manual, Waiting: s.Waiting, Succeeded: s.Succeeded, Exhausted: s.Exhausted, Failed: s.Failed, Cancelled: s.Cancelled,
		HoldsOpen: s.HoldsOpen, SuccessRate: s.SuccessRate}
}
