package recovery

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// InstanceView is what the sidecar knows of one instance: its state and
// claim now, its attempts rows and its events (GET /v1/instances/...,
// events --instance).
type InstanceView struct {
	Workflow string
	Instance string
	// State now; nil when the instance table has no such row (any more).
	State *string
	// FailedIn names the tasks whose failed state State is (an
	// operator may retry it in those).
	FailedIn []string
	// Claim on it now, if any (nil when none).
	Claim *claims.ClaimRow
	// Attempts holds one per task a policy or an operator acted on.
	Attempts []AttemptView
	// Events about the instance, oldest first (newest first with
	// InstanceParams.Newest); Truncated: more than the limit exist (page
	// on with events after the last id, or before it).
	Events    []audit.Event
	Truncated bool
}

// InstanceParams says which of an instance's events Instance returns.
type InstanceParams struct {
	// Limit of events; DefaultInstanceEvents when 0.
	Limit int
	// Newest returns the newest events first; BeforeID, when set, those
	// with a smaller id (the next page of a timeline read back in time).
	Newest   bool
	BeforeID int64
}

// AttemptView is an attempts row.
type AttemptView struct {
	Task string `db:"task"`
	// AttemptCount counts retries made by the policy; Manual: by operators.
	AttemptCount int    `db:"attempt"`
	Manual       int    `db:"manual"`
	State        string `db:"state"`
	// InRetry means a retry is scheduled (NextAttemptTime).
	InRetry         bool           `db:"in_retry"`
	Cause           Cause          `db:"cause"`
	LeftIn          string         `db:"left_in"`
	Since           time.Time      `db:"since"`
	LastAttemptTime *time.Time     `db:"last_attempt_at"`
	NextAttemptTime *time.Time     `db:"next_attempt_at"`
	LastNode        *string        `db:"last_node"`
	Nodes           pq.StringArray `db:"nodes"`
	LastReason      string         `db:"last_reason"`
	LastError       *string        `db:"last_error"`
}

// DefaultInstanceEvents is the number of events an instance view holds by default.
const DefaultInstanceEvents = 1000

// Instance returns what the sidecar knows of instance ref: ErrScope for
// an unknown workflow, ErrNoInstance when the instance table has no such
// row and no attempts row or event names it. Every read is one index
// probe (the events through their hash index on instance).
func (r *Repairer) Instance(ctx context.Context, ref Ref, p InstanceParams) (InstanceView, error) {
	v := InstanceView{Workflow: ref.Workflow, Instance: ref.Instance, Attempts: []AttemptView{}}
	w, err := r.workflow(ref.Workflow)
	if err != nil {
		return v, err
	}
	var row struct {
		ID    string `db:"id"`
		State string `db:"state"`
	}
	err = getRendered(ctx, r.cfg.DB, &row, instanceStateSQL, rowOf(w), sqltext.Args{"instance": ref.Instance})
	switch {
	case err == nil:
		// The id as the database prints it: what the attempts rows and
		// events are keyed by.
		ref.Instance, v.Instance, v.State = row.ID, row.ID, &row.State
		for _, t := range w.Tasks {
			if t.Failed == row.State {
				v.FailedIn = append(v.FailedIn, t.Name)
			}
		}
	case errors.Is(err, sql.ErrNoRows), isBadInput(err):
	default:
		return v, fmt.Errorf("read %s: %w", ref, err)
	}
	if w.Claims != nil && v.State != nil {
		if v.Claim, err = w.Claims.Lookup(ctx, r.cfg.DB, ref.Instance); err != nil {
			return v, err
		}
	}
	if err := r.st.instanceAttempts.Select(ctx, r.cfg.DB, &v.Attempts, sqltext.Args{"workflow": ref.Workflow, "instance": ref.Instance}); err != nil {
		return v, fmt.Errorf("read attempts of %s: %w", ref, err)
	}
	cases, err := eventCases(ctx, r.cfg.DB, r.st, ref.Workflow, ref.Instance)
	if err != nil {
		return v, fmt.Errorf("read attempts of %s: %w", ref, err)
	}
	if len(cases) > 0 {
		v.Attempts = append(v.Attempts, cases...)
		slices.SortFunc(v.Attempts, func(a, b AttemptView) int { return cmp.Compare(a.Task, b.Task) })
	}
	limit := cmp.Or(p.Limit, DefaultInstanceEvents)
	v.Events, err = r.cfg.Events.List(ctx, r.cfg.DB, audit.ListParams{Workflow: ref.Workflow, Instance: ref.Instance, Limit: limit + 1,
		Newest: p.Newest, BeforeID: p.BeforeID})
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

// caseEvent is one retry at once of an instance's open case
// (sql/instance_cases.sql).
type caseEvent struct {
	Task      string    `db:"task"`
	Attempt   int       `db:"attempt"`
	Node      *string   `db:"node"`
	At        time.Time `db:"at"`
	Reason    string    `db:"reason"`
	FromState string    `db:"from_state"`
}

// eventCases returns, for each task where instance has no attempts row
// but retries at once (which write none until their case ends), what a
// row would say of its open case: retried, the retries made (the last's
// attempt), the nodes it was interrupted on, in order, each once.
func eventCases(ctx context.Context, q sqlx.QueryerContext, st statements, workflow, instance string) ([]AttemptView, error) {
	var evs []caseEvent
	if err := st.instanceCases.Select(ctx, q, &evs, sqltext.Args{"workflow": workflow, "instance": instance}); err != nil {
		return nil, err
	}
	var out []AttemptView
	at := map[string]int{} // task → index in out
	for _, e := range evs {
		i, ok := at[e.Task]
		if !ok {
			i = len(out)
			at[e.Task] = i
			out = append(out, AttemptView{Task: e.Task, Cause: CauseInterrupt, Nodes: pq.StringArray{}})
		}
		v := &out[i]
		made := e.At
		v.AttemptCount, v.State, v.LeftIn, v.Since, v.LastAttemptTime, v.LastReason = e.Attempt, AttemptRetried, e.FromState, e.At, &made, e.Reason
		if e.Node != nil {
			v.LastNode = e.Node
			if !slices.Contains(v.Nodes, *e.Node) {
				v.Nodes = append(v.Nodes, *e.Node)
			}
		}
	}
	return out, nil
}

// Whereabouts is where an instance is now, for the master's watch of the
// work that made a node WARNING (nodes.Store.Grade).
type Whereabouts struct {
	// State of the instance; "" when it is gone.
	State string
	// Claimant is the node whose claim row is on it; "" if none.
	Claimant string
	// Ended reports whether State is an end state of the task.
	Ended bool
	// Left reports whether the instance is gone, in a state outside the task, or its
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
	i := slices.IndexFunc(w.Tasks, func(t Task) bool { return t.Name == task })
	if i < 0 {
		return Whereabouts{Left: true}, nil
	}
	t := w.Tasks[i]
	var row struct {
		State sql.NullString `db:"state"`
		Node  sql.NullString `db:"node"`
	}
	err = getRendered(ctx, q, &row, whereaboutsSQL, whereSlotsOf(w), sqltext.Args{"instance": id})
	switch {
	case errors.Is(err, sql.ErrNoRows), isBadInput(err):
		return Whereabouts{Left: true}, nil
	case err != nil:
		return Whereabouts{}, fmt.Errorf("where is %s/%s: %w", workflow, id, err)
	}
	wa := Whereabouts{State: row.State.String, Claimant: row.Node.String, Ended: slices.Contains(t.Ends, row.State.String)}
	wa.Left = !wa.Ended && !slices.Contains([]string{t.Begin, t.Interim, t.Failed}, wa.State)
	return wa, nil
}

// The statements of Instance and Whereabouts over the instance table
// (sql/instance_state.sql, sql/whereabouts.sql).
var (
	instanceStateSQL = load("instance_state")
	whereaboutsSQL   = load("whereabouts")
)

// rowSlots fill the statements that read or move one instance row by its
// id: the instance table and its columns, quoted.
type rowSlots struct{ Table, ID, Status string }

func rowOf(w Workflow) rowSlots {
	return rowSlots{Table: claims.Ident(w.Table), ID: claims.Ident(w.IDColumn), Status: claims.Ident(w.StatusColumn)}
}

// idSlots fill the statements that read an instance row's id only.
type idSlots struct{ Table, ID string }

func idSlotsOf(w Workflow) idSlots {
	return idSlots{Table: claims.Ident(w.Table), ID: claims.Ident(w.IDColumn)}
}

// whereSlots fill whereaboutsSQL: the instance row's, and the claims
// table with its node and instance columns, quoted ("" for a workflow
// without claims).
type whereSlots struct {
	rowSlots
	Claims, Node, Instance string
}

func whereSlotsOf(w Workflow) whereSlots {
	sl := whereSlots{rowSlots: rowOf(w)}
	if c := w.Claims; c != nil {
		sl.Claims, sl.Node, sl.Instance = claims.Ident(c.Claims), claims.Ident(c.NodeColumn), claims.Ident(c.InstanceColumn)
	}
	return sl
}
