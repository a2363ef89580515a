package apitype

import (
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/jsonx"
	"github.com/enginehealth/enginehealth/recovery"
)

// Run is one check pass or recovery run: the items of GET /v1/runs.
type Run struct {
	ID      int64            `json:"id"`
	Term    int64            `json:"term"`
	Master  string           `json:"master"`
	Kind    recovery.RunKind `json:"kind"`
	Trigger recovery.Trigger `json:"trigger"`
	// Scope is the workflows it covered, as JSON text.
	Scope string `json:"scope"`
	// ClaimsExpired counts expired claims deleted by the run.
	ClaimsExpired int64 `json:"claims_expired"`
	// Planned and Done count instances to repair and repaired.
	Planned    int64      `json:"planned"`
	Done       int64      `json:"done"`
	Status     string     `json:"status"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// Error is a failed run's class of failure; null when none.
	Error       string `json:"error" null:"zero"`
	ResumedFrom *int64 `json:"resumed_from"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (r Run) MarshalJSON() ([]byte, error) { return jsonx.Marshal(r) }

// RunDetail is the body of GET /v1/runs/{id}: one run with what it did
// per workflow task.
type RunDetail struct {
	Run
	// Took is the time from start to finish (to now while it runs).
	Took time.Duration `json:"took_ns"`
	// Counts holds its events about workflow tasks, by workflow, task, kind
	// and the state instances went to.
	Counts []EventCount `json:"counts"`
}

// MarshalJSON sends every field, the run's in place (as without it: the
// Run's MarshalJSON would otherwise be promoted and send the run alone).
func (d RunDetail) MarshalJSON() ([]byte, error) { return jsonx.Marshal(d) }

// EventCount is a number of events of one kind about one workflow task.
type EventCount struct {
	Workflow string `json:"workflow"`
	// Task is null for a kind about no task (an expired claim).
	Task string     `json:"task" null:"zero"`
	Kind audit.Kind `json:"kind"`
	// To is the state the instances went to, when the kind moves them
	// (null when it does not).
	To    string `json:"to" null:"zero"`
	Count int64  `json:"count"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (c EventCount) MarshalJSON() ([]byte, error) { return jsonx.Marshal(c) }

// Event is one event of the audit trail: the items of GET /v1/events.
// Optional fields are null when they have no value.
type Event struct {
	ID        int64      `json:"id"`
	At        time.Time  `json:"at"`
	Kind      audit.Kind `json:"kind"`
	Actor     string     `json:"actor"`
	Term      *int64     `json:"term"`
	RunID     *int64     `json:"run_id"`
	Node      *string    `json:"node"`
	Workflow  *string    `json:"workflow"`
	Instance  *string    `json:"instance"`
	Task      *string    `json:"task"`
	FromState *string    `json:"from_state"`
	ToState   *string    `json:"to_state"`
	Attempt   *int       `json:"attempt"`
	Reason    string     `json:"reason"`
	// Via is the node that took an operator's request; null on every
	// other event.
	Via *string `json:"via"`
}
