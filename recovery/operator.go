package recovery

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/leader"
)

// Operators' decisions: holds released or failed, manual retries. Each
// runs in fenced transactions of the master, guarded by the attempts row
// it read, with one event per instance naming the operator.

// ErrRefused means the instance's state does not allow the operator's request
// now; the error says why.
var ErrRefused = errors.New("refused")

// ErrNoInstance means the workflow has no instance with that id.
var ErrNoInstance = errors.New("no such instance")

// Decisions on a hold.
const (
	DecideRetry = "retry"
	DecideFail  = "fail"
)

// Ref names an instance.
type Ref struct {
	Workflow string
	Instance string
}

// String returns the reference as workflow/instance.
func (r Ref) String() string { return r.Workflow + "/" + r.Instance }

// Hold is an instance held for an operator's decision.
type Hold struct {
	Workflow string `db:"workflow"`
	Instance string `db:"instance"`
	Task     string `db:"task"`
	// State the instance waits in (interim, or failed).
	State string    `db:"left_in"`
	Cause Cause     `db:"cause"`
	Since time.Time `db:"since"`
	// Attempts counts retries made by the policy; Manual: by operators.
	Attempts  int            `db:"attempt"`
	Manual    int            `db:"manual"`
	LastNode  *string        `db:"last_node"`
	Nodes     pq.StringArray `db:"nodes"`
	LastError *string        `db:"last_error"`
	Reason    string         `db:"last_reason"`
}

// DefaultHoldsLimit is the number of holds listed when no limit is given.
const DefaultHoldsLimit = 1000

// Holds lists open holds, oldest first per workflow (of workflow only,
// when set), at most limit (default DefaultHoldsLimit).
func (r *Repairer) Holds(ctx context.Context, workflow string, limit int) ([]Hold, error) {
	rows, err := r.parked(ctx, AttemptHeld, workflow, limit)
	if err != nil {
		return nil, err
	}
	hs := make([]Hold, len(rows))
	for i, row := range rows {
		hs[i] = row.Hold
	}
	return hs, nil
}

// WaitingRetry is an instance whose retry waits for its time: a policy
// scheduled it with a delay, and the first check pass from Due runs it.
type WaitingRetry struct {
	// Hold's fields say where it waits, why (Cause, Reason), since when,
	// the retries made (Attempts: this one is retry Attempts+1) and on
	// which nodes it was interrupted.
	Hold
	// Due is when the retry runs; DueInSeconds: how long until then on the
	// database clock (≤ 0: the next pass runs it).
	Due          time.Time
	DueInSeconds float64
	// MaxAttempts is the number of retries the task's policy for Cause allows (0 when
	// the task is no longer configured).
	MaxAttempts int
}

// Waiting lists the retries waiting for their time, soonest due first
// (of workflow only, when set), at most limit (default
// DefaultHoldsLimit): the read of Holds, over the waiting rows.
func (r *Repairer) Waiting(ctx context.Context, workflow string, limit int) ([]WaitingRetry, error) {
	rows, err := r.parked(ctx, AttemptWaiting, workflow, limit)
	if err != nil {
		return nil, err
	}
	ws := make([]WaitingRetry, len(rows))
	for i, row := range rows {
		ws[i] = r.waitingOf(row)
	}
	return ws, nil
}

// parkedRow is an attempts row a policy parked: held for an operator, or
// waiting for its retry (Due, and DueIn seconds on the database clock).
type parkedRow struct {
	Hold
	Due   *time.Time `db:"next_attempt_at"`
	DueIn *float64   `db:"due_in"`
	// Total counts the rows that match a filtered list (Parked).
	Total int64 `db:"total"`
}

// ParkedFilter selects the parked instances a list shows (Parked).
type ParkedFilter struct {
	// State is AttemptHeld or AttemptWaiting.
	State string
	// Workflow, Task, Node (the last node it was interrupted on, or any)
	// and Cause, when set, keep those; OlderThan keeps the instances
	// parked at least that long.
	Workflow, Task, Node string
	Cause                Cause
	OlderThan            time.Duration
	// Limit of rows listed; default DefaultHoldsLimit.
	Limit int
}

// Parked lists the parked instances that f selects, in the order of
// Holds and Waiting, and counts all that match (the list holds at most
// f.Limit). A held instance's Due is zero.
func (r *Repairer) Parked(ctx context.Context, f ParkedFilter) ([]WaitingRetry, int64, error) {
	var list sqltext.Prepared
	switch f.State {
	case AttemptHeld:
		list = r.st.listHeldFiltered
	case AttemptWaiting:
		list = r.st.listWaitingFiltered
	default:
		return nil, 0, fmt.Errorf("recovery: no list of %q attempts", f.State)
	}
	if f.Workflow != "" {
		if _, err := r.workflow(f.Workflow); err != nil {
			return nil, 0, err
		}
	}
	if f.Cause != "" && f.Cause != CauseInterrupt && f.Cause != CauseFailure {
		return nil, 0, fmt.Errorf("%w: no cause %q (interrupt or failure)", ErrScope, f.Cause)
	}
	rows := []parkedRow{}
	if err := list.Select(ctx, r.cfg.DB, &rows, sqltext.Args{"workflow": f.Workflow, "task": f.Task, "node": f.Node, "cause": string(f.Cause),
		"age_s": max(f.OlderThan, 0).Seconds(), "limit": cmp.Or(f.Limit, DefaultHoldsLimit)}); err != nil {
		return nil, 0, fmt.Errorf("list %s attempts: %w", f.State, err)
	}
	out := make([]WaitingRetry, len(rows))
	var total int64
	for i, row := range rows {
		out[i], total = r.waitingOf(row), row.Total
	}
	return out, total, nil
}

// waitingOf is a parked row as a WaitingRetry: when it is due, and the
// retries its task's policy allows.
func (r *Repairer) waitingOf(row parkedRow) WaitingRetry {
	w := WaitingRetry{Hold: row.Hold}
	if row.Due != nil && row.DueIn != nil {
		w.Due, w.DueInSeconds = *row.Due, *row.DueIn
	}
	if wf, err := r.workflow(row.Workflow); err == nil {
		if j := slices.IndexFunc(wf.Tasks, func(t Task) bool { return t.Name == row.Task }); j >= 0 {
			w.MaxAttempts = wf.Tasks[j].Policy(row.Cause).MaxAttempts
		}
	}
	return w
}

// parked lists the attempts rows in state (AttemptHeld or
// AttemptWaiting), of workflow only when set, at most limit (default
// DefaultHoldsLimit), in the order of the state's partial index: held
// oldest first per workflow, waiting soonest due first.
func (r *Repairer) parked(ctx context.Context, state, workflow string, limit int) ([]parkedRow, error) {
	var list sqltext.Prepared
	switch state {
	case AttemptHeld:
		list = r.st.listHeld
	case AttemptWaiting:
		list = r.st.listWaiting
	default:
		return nil, fmt.Errorf("recovery: no list of %q attempts", state)
	}
	if workflow != "" {
		if _, err := r.workflow(workflow); err != nil {
			return nil, err
		}
	}
	rows := []parkedRow{}
	if err := list.Select(ctx, r.cfg.DB, &rows, sqltext.Args{"workflow": workflow, "limit": cmp.Or(limit, DefaultHoldsLimit)}); err != nil {
		return nil, fmt.Errorf("list %s attempts: %w", state, err)
	}
	return rows, nil
}

// HoldsOpen counts the instances held for an operator's decision and
// returns how long the oldest has waited (database clock; 0 when none),
// through the partial index of open holds.
func (r *Repairer) HoldsOpen(ctx context.Context) (n int64, oldest time.Duration, err error) {
	var row struct {
		N   int64   `db:"n"`
		Age float64 `db:"age"`
	}
	if err := r.st.holdsOpen.Get(ctx, r.cfg.DB, &row, nil); err != nil {
		return 0, 0, fmt.Errorf("count open holds: %w", err)
	}
	return row.N, time.Duration(row.Age * float64(time.Second)), nil
}

// Workflows returns the names of the configured workflows, in the
// configuration's order.
func (r *Repairer) Workflows() []string {
	names := make([]string, len(r.cfg.Workflows))
	for i, w := range r.cfg.Workflows {
		names[i] = w.Name
	}
	return names
}

func (r *Repairer) workflow(name string) (Workflow, error) {
	i := slices.IndexFunc(r.cfg.Workflows, func(w Workflow) bool { return w.Name == name })
	if i < 0 {
		return Workflow{}, fmt.Errorf("%w: no workflow named %q", ErrScope, name)
	}
	return r.cfg.Workflows[i], nil
}

// HoldDecision is an operator's decision on holds: the named instances,
// or all open holds (of Workflow, when set).
type HoldDecision struct {
	// Action is DecideRetry (back to begin, counted as a manual retry) or
	// DecideFail (to the task's failed state, for good).
	Action    string
	Instances []Ref
	All       bool
	Workflow  string
	// By and Reason are recorded in each event.
	By     audit.By
	Reason string
}

// HoldOutcome is a hold that was closed without its decision applied.
type HoldOutcome struct {
	Ref
	Task   string
	Reason string
}

// HoldResult is what a decision did.
type HoldResult struct {
	Action string
	// Decided counts holds whose decision was applied.
	Decided int64
	// Cancelled lists holds closed because the instance was no longer where it
	// was left (moved by someone else, gone, claimed), with the reason.
	Cancelled []HoldOutcome
	// NotHeld lists named instances with no open hold (never held, already
	// decided, or being decided by another request).
	NotHeld []Ref
}

// heldRow is an open hold locked by DecideHolds.
type heldRow struct {
	Workflow string `db:"workflow"`
	Instance string `db:"instance"`
	Task     string `db:"task"`
	LeftIn   string `db:"left_in"`
}

// holdMove is how moveParked applies the operator's decision d, in term,
// to the holds of task t of workflow w left in state left.
func holdMove(w Workflow, t Task, left string, d HoldDecision, term int64) parkedMove {
	m := parkedMove{w: w, t: t, left: left, parked: AttemptHeld, kind: audit.KindHoldDecided,
		cancelKind: audit.KindHoldDecided, cancelled: "hold cancelled", by: d.By, term: term}
	if d.Action == DecideRetry {
		m.to, m.done, m.manual = t.Begin, AttemptRetried, true
		m.reason = "hold released by an operator: " + d.Reason
	} else {
		m.to, m.done = t.Failed, AttemptFailed
		m.reason = "hold failed by an operator: " + d.Reason
	}
	return m
}

// DecideHolds applies an operator's decision to open holds, in batches:
// each batch locks its attempts rows (skipping rows another request has
// locked), moves each instance only if it is still where it was left and
// unclaimed (else closes the hold as cancelled, with the reason), and
// writes one hold_decided event each, in one fenced transaction.
func (r *Repairer) DecideHolds(ctx context.Context, o *leader.Office, d HoldDecision) (HoldResult, error) {
	res := HoldResult{Action: d.Action, Cancelled: []HoldOutcome{}, NotHeld: []Ref{}}
	if d.Action != DecideRetry && d.Action != DecideFail {
		return res, fmt.Errorf("%w: decision %q: want retry or fail", ErrScope, d.Action)
	}
	if d.All == (len(d.Instances) > 0) {
		return res, fmt.Errorf("%w: name instances, or all holds; not both, not neither", ErrScope)
	}
	if d.Workflow != "" {
		if _, err := r.workflow(d.Workflow); err != nil {
			return res, err
		}
	}
	var wfs, ids []string
	given := map[Ref]Ref{} // canonical → as named
	for _, ref := range d.Instances {
		w, err := r.workflow(ref.Workflow)
		if err != nil {
			return res, err
		}
		c, err := r.canonical(ctx, w, ref.Instance)
		if err != nil {
			return res, err
		}
		given[Ref{ref.Workflow, c}] = ref
		wfs, ids = append(wfs, ref.Workflow), append(ids, c)
	}
	found := map[Ref]bool{}
	for {
		var n int
		err := r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
			var rows []heldRow
			var err error
			if d.All {
				err = r.st.lockAllHolds.Select(ctx, tx, &rows, sqltext.Args{"workflow": d.Workflow, "limit": r.cfg.BatchSize})
			} else {
				err = r.st.lockHolds.Select(ctx, tx, &rows, sqltext.Args{"workflows": pq.Array(wfs), "instances": pq.Array(ids)})
			}
			if err != nil {
				return fmt.Errorf("read holds: %w", err)
			}
			n = len(rows)
			type key struct{ w, t, left string }
			groups := map[key][]string{}
			var order []key
			for _, h := range rows {
				found[Ref{h.Workflow, h.Instance}] = true
				k := key{h.Workflow, h.Task, h.LeftIn}
				if _, ok := groups[k]; !ok {
					order = append(order, k)
				}
				groups[k] = append(groups[k], h.Instance)
			}
			for _, k := range order {
				w, t := r.task(k.w, k.t)
				m := holdMove(w, t, k.left, d, tx.Term)
				why := m.reason
				moved, gone, err := r.moveParked(ctx, tx, m, groups[k])
				if err != nil {
					return err
				}
				r.logDecision(ctx, tx, d, k.w, k.t, k.left, m.to, why, moved, groups[k], gone)
				res.Decided += moved
				for _, c := range gone {
					res.Cancelled = append(res.Cancelled, HoldOutcome{Ref: Ref{k.w, c.instance}, Task: k.t, Reason: c.reason})
				}
			}
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("holds %s: %w", d.Action, err)
		}
		if !d.All || n < r.cfg.BatchSize {
			break
		}
	}
	for c, ref := range given {
		if !found[c] {
			res.NotHeld = append(res.NotHeld, ref)
		}
	}
	slices.SortFunc(res.NotHeld, func(a, b Ref) int { return strings.Compare(a.String(), b.String()) })
	return res, nil
}

// logDecision logs, once tx commits, an operator's decision on a group of
// holds: one info line with the fields of its hold_decided events and the
// counts, and one debug line per instance.
func (r *Repairer) logDecision(ctx context.Context, tx *leader.Tx, d HoldDecision, workflow, task, left, to, why string, moved int64, ids []string, gone []parkedCancel) {
	tx.AfterCommit(func() {
		r.log.LogAttrs(ctx, slog.LevelInfo, "holds decided", slog.String("decision", d.Action), slog.Int64("moved", moved),
			slog.Int("cancelled", len(gone)), slog.Group("event", append(append([]any{"kind", audit.KindHoldDecided}, d.By.Args()...), "term", tx.Term,
				"workflow", workflow, "task", task, "from_state", left, "to_state", to, "reason", why)...))
		if !r.log.Enabled(ctx, slog.LevelDebug) {
			return
		}
		cancelled := map[string]string{}
		for _, g := range gone {
			cancelled[g.instance] = g.reason
		}
		for _, id := range ids {
			state, reason := to, why
			if w, ok := cancelled[id]; ok {
				state, reason = "", w
			}
			r.log.LogAttrs(ctx, slog.LevelDebug, "hold decided", slog.Group("event", append(append([]any{"kind", audit.KindHoldDecided}, d.By.Args()...),
				"term", tx.Term, "workflow", workflow, "instance", id, "task", task, "from_state", left, "to_state", state, "reason", reason)...))
		}
	})
}

// ManualRetry is an operator's request to retry one instance now.
type ManualRetry struct {
	Ref
	// Task, when set, names the task (needed only when the instance's
	// state is the failed state of several tasks).
	Task string
	// Soon is the span within which a scheduled retry due is not replaced
	// (the request is refused: the check will run it).
	Soon time.Duration
	// Paused means the check runs no retry now, so none is left to it.
	Paused bool
	// By and Reason are recorded in the event.
	By     audit.By
	Reason string
}

// RetryResult is what a manual retry did.
type RetryResult struct {
	Ref
	Task string
	From string
	To   string
	// Manual counts the operators' retries of the instance's task so far, this
	// one included; Attempts: the policy's (unchanged).
	Manual   int
	Attempts int
	// Replaced says what the retry replaced: a scheduled retry or a
	// hold; "" when nothing.
	Replaced string
}

// storedAttempt is an attempts row as a manual retry reads it.
type storedAttempt struct {
	Attempt int        `db:"attempt"`
	Manual  int        `db:"manual"`
	State   string     `db:"state"`
	Cause   Cause      `db:"cause"`
	Next    *time.Time `db:"next_attempt_at"`
	Until   *float64   `db:"until"`
}

// Retry moves a failed, held or exhausted instance (or one waiting for a
// scheduled retry) back to its task's begin state at once, in one fenced
// transaction that locks the instance row and its attempts row: refused
// (ErrRefused, saying why) while the instance is claimed, in an interim
// state the check has not parked, or has a retry due within m.Soon. It
// cancels what was scheduled and counts an operator's retry (manual),
// never one of max_attempts.
func (r *Repairer) Retry(ctx context.Context, o *leader.Office, m ManualRetry) (RetryResult, error) {
	res := RetryResult{Ref: m.Ref}
	w, err := r.workflow(m.Workflow)
	if err != nil {
		return res, err
	}
	if m.Task != "" && !slices.ContainsFunc(w.Tasks, func(t Task) bool { return t.Name == m.Task }) {
		return res, fmt.Errorf("%w: workflow %s has no task %q", ErrScope, w.Name, m.Task)
	}
	lockInstance, err := lockInstanceSQL.Prepare(lockSlotsOf(w))
	if err != nil {
		return res, fmt.Errorf("retry %s: %w", m.Ref, err)
	}
	retryInstance, err := retryInstanceSQL.Prepare(rowOf(w))
	if err != nil {
		return res, fmt.Errorf("retry %s: %w", m.Ref, err)
	}
	err = r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
		var cur struct {
			ID     string  `db:"id"`
			State  string  `db:"state"`
			Holder *string `db:"holder"`
		}
		err := lockInstance.Get(ctx, tx, &cur, sqltext.Args{"instance": m.Instance})
		switch {
		case errors.Is(err, sql.ErrNoRows), isBadInput(err):
			return fmt.Errorf("%w: workflow %s has no instance %q", ErrNoInstance, w.Name, m.Instance)
		case err != nil:
			return fmt.Errorf("read instance: %w", err)
		}
		// The id as the database prints it ("063" reaches row 63): the
		// attempts row and the events are keyed by it.
		m.Instance, res.Instance = cur.ID, cur.ID
		res.From = cur.State
		if cur.Holder != nil {
			return fmt.Errorf("%w: the instance is claimed by %s", ErrRefused, *cur.Holder)
		}
		// The task: the one whose failed state the instance is in, or
		// whose interim state it is parked in.
		var cands []Task
		for _, t := range w.Tasks {
			if (m.Task == "" || t.Name == m.Task) && (t.Failed == cur.State || t.Interim == cur.State) {
				cands = append(cands, t)
			}
		}
		var t Task
		var a *storedAttempt
		for _, c := range cands {
			var row storedAttempt
			err := r.st.lockAttempt.Get(ctx, tx, &row, sqltext.Args{"workflow": w.Name, "instance": m.Instance, "task": c.Name})
			if isLockBusy(err) {
				// The check locks attempts rows before instances (a due
				// retry); this waits the other way round, so it does not
				// wait at all: no deadlock, the operator tries again.
				return fmt.Errorf("%w: the check is deciding this instance right now (task %s); try again", ErrRefused, c.Name)
			}
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("read attempts: %w", err)
			}
			parked := err == nil && (row.State == AttemptWaiting || row.State == AttemptHeld)
			if c.Failed == cur.State || parked {
				if t.Name != "" {
					return fmt.Errorf("%w: state %s belongs to tasks %s and %s: name the task", ErrRefused, cur.State, t.Name, c.Name)
				}
				t = c
				if err == nil {
					a = &row
				}
			}
		}
		if t.Name == "" && m.Task != "" {
			return fmt.Errorf("%w: the instance is in %s, which is neither task %s's failed state nor a state it is parked in",
				ErrRefused, cur.State, m.Task)
		}
		if t.Name == "" {
			return fmt.Errorf("%w: the instance is in %s: not failed, held, exhausted or waiting for a retry%s",
				ErrRefused, cur.State, interimHint(w, cur.State))
		}
		res.Task, res.To = t.Name, t.Begin
		cause, attempt, manual := CauseFailure, 0, 1
		if cur.State == t.Interim {
			cause = CauseInterrupt
		}
		// Without a row, the retries at once of its case (their events)
		// are its count, which the row takes on.
		nodes := pq.StringArray{}
		var lastNode *string
		if a == nil {
			cases, err := eventCases(ctx, tx, r.st, w.Name, m.Instance)
			if err != nil {
				return fmt.Errorf("read attempts: %w", err)
			}
			for _, c := range cases {
				if c.Task == t.Name {
					attempt, nodes, lastNode = c.AttemptCount, c.Nodes, c.LastNode
				}
			}
		}
		if a != nil {
			attempt, manual = a.Attempt, a.Manual+1
			switch a.State {
			case AttemptWaiting:
				if a.Until != nil && *a.Until <= m.Soon.Seconds() && !m.Paused {
					return fmt.Errorf("%w: retry %d is scheduled at %s (in %s): the check runs it",
						ErrRefused, a.Attempt+1, a.Next.UTC().Format(time.RFC3339), time.Duration(max(*a.Until, 0)*1e9).Round(time.Millisecond))
				}
				res.Replaced = fmt.Sprintf("retry %d scheduled at %s", a.Attempt+1, a.Next.UTC().Format(time.RFC3339))
			case AttemptHeld:
				res.Replaced = "hold"
			}
		}
		res.Manual, res.Attempts = manual, attempt
		reason := fmt.Sprintf("manual retry %d by an operator (not counted against max_attempts)", manual)
		if res.Replaced != "" {
			reason += "; replaces the " + res.Replaced
		}
		if m.Reason != "" {
			reason += ": " + m.Reason
		}
		moved, err := retryInstance.Exec(ctx, tx, sqltext.Args{"instance": m.Instance, "to": t.Begin, "from": cur.State})
		if err != nil {
			return fmt.Errorf("move instance: %w", err)
		}
		if n, _ := moved.RowsAffected(); n != 1 {
			return fmt.Errorf("move instance: %w: %d rows moved", ErrConflict, n)
		}
		var wrote sql.Result
		write := sqltext.Args{"workflow": w.Name, "instance": m.Instance, "task": t.Name, "cause": cause, "left_in": cur.State, "reason": reason}
		if a == nil {
			write["attempt"], write["nodes"], write["last_node"] = attempt, nodes, lastNode
			wrote, err = r.st.insertRetry.Exec(ctx, tx, write)
		} else {
			write["attempt"], write["manual"], write["state"] = a.Attempt, a.Manual, a.State
			wrote, err = r.st.updateRetry.Exec(ctx, tx, write)
		}
		if err != nil {
			return fmt.Errorf("write attempts: %w", err)
		}
		if n, _ := wrote.RowsAffected(); n != 1 {
			return fmt.Errorf("write attempts: %w", ErrConflict)
		}
		term := tx.Term
		return r.cfg.Events.Write(ctx, tx, audit.Event{Kind: audit.KindManualRetry, Actor: m.By.Actor, Via: audit.Str(m.By.Via), Term: &term,
			Workflow: &w.Name, Instance: &m.Instance, Task: &t.Name, FromState: &cur.State, ToState: &t.Begin,
			Attempt: &attempt, Reason: reason})
	})
	if err != nil {
		return res, fmt.Errorf("retry %s: %w", m.Ref, err)
	}
	return res, nil
}

// CanonicalInstance returns instance id of workflow as the database
// prints its id column ("007" → "7", a uuid in lower case), as the events
// name it; id itself when the workflow is not configured or has no such
// row. The event filters use it, as the instance view does.
func (r *Repairer) CanonicalInstance(ctx context.Context, workflow, id string) (string, error) {
	w, err := r.workflow(workflow)
	if err != nil {
		return id, nil
	}
	return r.canonical(ctx, w, id)
}

// canonical returns instance id as the database prints the id column
// ("063" → "63"), or id itself when the table has no such row.
func (r *Repairer) canonical(ctx context.Context, w Workflow, id string) (string, error) {
	var c string
	err := getRendered(ctx, r.cfg.DB, &c, canonicalIDSQL, idSlotsOf(w), sqltext.Args{"instance": id})
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, sql.ErrNoRows), isBadInput(err):
		return id, nil
	default:
		return "", fmt.Errorf("look up %s/%s: %w", w.Name, id, err)
	}
}

// The statements of an operator's manual retry and of canonical over the
// instance table (sql/lock_instance.sql, sql/retry_instance.sql,
// sql/canonical_id.sql).
var (
	lockInstanceSQL  = load("lock_instance")
	retryInstanceSQL = load("retry_instance")
	canonicalIDSQL   = load("canonical_id")
)

// lockSlots fill lockInstanceSQL: the instance table and its columns,
// quoted, and Holder, the node whose claim holds the row t (NULL::text
// for a workflow without claims).
type lockSlots struct {
	rowSlots
	Holder string
}

func lockSlotsOf(w Workflow) lockSlots {
	sl := lockSlots{rowSlots: rowOf(w), Holder: "NULL::text"}
	if w.Claims != nil {
		sl.Holder = w.Claims.HolderSQL("t")
	}
	return sl
}

// interimHint explains an instance found in an interim state that the
// check has not parked.
func interimHint(w Workflow, state string) string {
	for _, t := range w.Tasks {
		if t.Interim == state {
			return " (" + state + " is the interim state of task " + t.Name + ": an engine runs it, or the check repairs it)"
		}
	}
	return ""
}

// isLockBusy reports whether err is PostgreSQL's lock_not_available (a
// NOWAIT lock that another transaction holds).
func isLockBusy(err error) bool {
	var pe *pq.Error
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// isBadInput reports a PostgreSQL data exception (class 22): an id that
// does not fit the id column's type is no instance of it.
func isBadInput(err error) bool {
	var pe *pq.Error
	return errors.As(err, &pe) && strings.HasPrefix(string(pe.Code), "22")
}
