package recovery

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// InstanceView is what the sidecar knows of one instance: its state and
// claim now, its attempts rows and its events (GET /v1/instances/...,
// events --instance).
type InstanceView struct {
	Workflow string `json:"workflow"`
	Instance string `json:"instance"`
	// State now; nil when the instance table has no such row (any more).
	State *string `json:"state"`
	// Claim on it now, if any (null when none).
	Claim *claims.ClaimRow `json:"claim"`
	// Attempts: one per task a policy or an operator acted on.
	Attempts []AttemptView `json:"attempts"`
	// Events about the instance, oldest first; Truncated: more than
	// the limit exist (page on with events after the last id).
	Events    []audit.Event `json:"events"`
	Truncated bool          `json:"truncated"`
}

// AttemptView is an attempts row.
type AttemptView struct {
	Task string `db:"task" json:"task"`
	// AttemptCount: retries made by the policy; Manual: by operators.
	AttemptCount int    `db:"attempt" json:"attempt_count"`
	Manual       int    `db:"manual" json:"manual"`
	State        string `db:"state" json:"state"`
	// InRetry: a retry is scheduled (NextAttemptTime).
	InRetry         bool           `db:"in_retry" json:"in_retry"`
	Cause           Cause          `db:"cause" json:"cause"`
	LeftIn          string         `db:"left_in" json:"left_in"`
	Since           time.Time      `db:"since" json:"since"`
	LastAttemptTime *time.Time     `db:"last_attempt_at" json:"last_attempt_time"`
	NextAttemptTime *time.Time     `db:"next_attempt_at" json:"next_attempt_time"`
	LastNode        *string        `db:"last_node" json:"last_node"`
	Nodes           pq.StringArray `db:"nodes" json:"nodes"`
	LastReason      string         `db:"last_reason" json:"last_reason"`
	LastError       *string        `db:"last_error" json:"last_error"`
}

// DefaultInstanceEvents: the events an instance view holds by default.
const DefaultInstanceEvents = 1000

// Instance returns what the sidecar knows of instance ref: ErrScope for
// an unknown workflow, ErrNoInstance when the instance table has no such
// row and no attempts row or event names it. Every read is one index
// probe (the events through their hash index on instance).
func (r *Repairer) Instance(ctx context.Context, ref Ref, limit int) (InstanceView, error) {
	v := InstanceView{Workflow: ref.Workflow, Instance: ref.Instance, Attempts: []AttemptView{}}
	w, err := r.workflow(ref.Workflow)
	if err != nil {
		return v, err
	}
	var row struct {
		ID    string `db:"id"`
		State string `db:"state"`
	}
	err = sqlx.GetContext(ctx, r.cfg.DB, &row, fmt.Sprintf(`SELECT %[3]s::text AS id, %[1]s::text AS state FROM %[2]s WHERE %[3]s = $1`,
		claims.Ident(w.StatusColumn), claims.Ident(w.Table), claims.Ident(w.IDColumn)), ref.Instance)
	switch {
	case err == nil:
		// The id as the database prints it: what the attempts rows and
		// events are keyed by.
		ref.Instance, v.Instance, v.State = row.ID, row.ID, &row.State
	case errors.Is(err, sql.ErrNoRows), isBadInput(err):
	default:
		return v, fmt.Errorf("read %s: %w", ref, err)
	}
	if w.Claims != nil && v.State != nil {
		if v.Claim, err = w.Claims.Lookup(ctx, r.cfg.DB, ref.Instance); err != nil {
			return v, err
		}
	}
	if err := sqlx.SelectContext(ctx, r.cfg.DB, &v.Attempts, `SELECT task, attempt, manual, state, state = 'waiting' AS in_retry,
			cause, left_in, since, last_attempt_at, next_attempt_at, last_node, nodes, last_reason, last_error
		FROM `+r.attempts+` WHERE workflow = $1 AND instance = $2 ORDER BY task`, ref.Workflow, ref.Instance); err != nil {
		return v, fmt.Errorf("read attempts of %s: %w", ref, err)
	}
	limit = cmp.Or(limit, DefaultInstanceEvents)
	v.Events, err = r.cfg.Events.List(ctx, r.cfg.DB, audit.ListParams{Workflow: ref.Workflow, Instance: ref.Instance, Limit: limit + 1})
	if err != nil {
		return v, err
	}
	if len(v.Events) > limit {
		v.Events, v.Truncated = v.Events[:limit], true
	}
	if v.Events == nil {
		v.Events = []audit.Event{}
	}
	if v.State == nil && len(v.Attempts) == 0 && len(v.Events) == 0 {
		return v, fmt.Errorf("%w: workflow %s has no instance %q and nothing was recorded about one", ErrNoInstance, w.Name, ref.Instance)
	}
	return v, nil
}

// Whereabouts is where an instance is now, for the master's watch of the
// work that made a node WARNING (nodes.Store.Grade).
type Whereabouts struct {
	// State of the instance; "" when it is gone.
	State string
	// Claimant: the node whose claim row is on it; "" if none.
	Claimant string
	// Ended: State is an end state of the task.
	Ended bool
	// Left: the instance is gone, in a state outside the task, or its
	// workflow or task is no longer configured.
	Left bool
}

// Whereabouts returns where instance id of workflow is now, with respect
// to task, read with q (the grading transaction): one probe of the
// instance table's primary key and one of the claims table's.
func (r *Repairer) Whereabouts(ctx context.Context, q sqlx.QueryerContext, workflow, task, id string) (Whereabouts, error) {
	w, err := r.workflow(workflow)
	if err != nil {
		return Whereabouts{Left: true}, nil // no longer configured
	}
	ti := slices.IndexFunc(w.Tasks, func(t Task) bool { return t.Name == task })
	if ti < 0 {
		return Whereabouts{Left: true}, nil
	}
	t := w.Tasks[ti]
	claimant := "NULL::text"
	if w.Claims != nil {
		n := w.Claims
		claimant = fmt.Sprintf(`(SELECT c.%s::text FROM %s c WHERE c.%s = i.%s LIMIT 1)`,
			claims.Ident(n.NodeColumn), claims.Ident(n.Claims), claims.Ident(n.InstanceColumn), claims.Ident(w.IDColumn))
	}
	var state, node sql.NullString
	err = q.QueryRowxContext(ctx, fmt.Sprintf(`SELECT i.%s::text, %s FROM %s i WHERE i.%s = $1`,
		claims.Ident(w.StatusColumn), claimant, claims.Ident(w.Table), claims.Ident(w.IDColumn)), id).Scan(&state, &node)
	switch {
	case errors.Is(err, sql.ErrNoRows), isBadInput(err):
		return Whereabouts{Left: true}, nil
	case err != nil:
		return Whereabouts{}, fmt.Errorf("where is %s/%s: %w", workflow, id, err)
	}
	wa := Whereabouts{State: state.String, Claimant: node.String, Ended: slices.Contains(t.Ends, state.String)}
	wa.Left = !wa.Ended && !slices.Contains([]string{t.Begin, t.Interim, t.Failed}, state.String)
	return wa, nil
}
