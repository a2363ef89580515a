package recovery

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/leader"
)

// SettleCounts is what Settle found of one task's retries.
type SettleCounts struct {
	Workflow string
	Task     string
	// Succeeded counts instances that reached one of the task's end states, or
	// went on past the task. Failed: the engine failed it and the task
	// has no on_failure policy to decide. Cancelled: the instance row is
	// gone.
	Succeeded int64
	Failed    int64
	Cancelled int64
	// HoldsCancelled counts holds whose instance is no longer where it was
	// left (it reached an end state, someone else moved it, or it is
	// gone).
	HoldsCancelled int64
}

// Settle closes the attempts rows of retries whose outcome is known now,
// for every configured task, in fenced batches, each row with one event:
// a retried instance (moved back to begin by a policy, an operator or a
// hold decision) that reached one of the task's end states, or any state
// that is not one of the task's own (it went on past the task), is
// succeeded (retry_succeeded); one the engine moved to the task's failed
// state is failed (retry_failed), unless the task has an on_failure
// policy, which decides it; one whose row is gone is cancelled. An
// instance still in the task's begin or interim state is left retried:
// its retry runs. A partial index on the retried rows keeps the pass
// proportional to the retries under way. It returns the tasks with any.
//
// On a sweep pass it also closes waiting retries whose instance reached
// an end state or is gone (closeParked).
func (r *Repairer) Settle(ctx context.Context, o *leader.Office, run int64, sweep bool) ([]SettleCounts, error) {
	var out []SettleCounts
	byEvents, err := r.settleEvents(ctx, o, run)
	if err != nil {
		return out, err
	}
	for _, w := range r.cfg.Workflows {
		var idType string
		for _, t := range w.Tasks {
			sc := byEvents[[2]string{w.Name, t.Name}]
			sc.Workflow, sc.Task = w.Name, t.Name
			var err error
			if sc.HoldsCancelled, err = r.closeParked(ctx, o, run, w, t, &idType, sweep); err != nil {
				return out, fmt.Errorf("close parked rows of %s.%s: %w", w.Name, t.Name, err)
			}
			var some bool
			if err := r.st.retriedExist.Get(ctx, r.cfg.DB, &some, sqltext.Args{"workflow": w.Name, "task": t.Name}); err != nil {
				return out, fmt.Errorf("settle %s.%s: %w", w.Name, t.Name, err)
			}
			if !some {
				if sc.Succeeded+sc.Failed+sc.Cancelled+sc.HoldsCancelled > 0 {
					out = append(out, sc)
				}
				continue
			}
			if idType == "" {
				var err error
				if idType, err = r.idType(ctx, w); err != nil {
					return out, err
				}
			}
			var after *string // the first batch: none (an instance may be '')
			for {
				n, last, err := r.settleBatch(ctx, o, run, w, t, idType, after, &sc)
				if err != nil {
					return out, fmt.Errorf("settle %s.%s: %w", w.Name, t.Name, err)
				}
				if n < r.cfg.SettleBatchSize {
					break
				}
				after = &last
			}
			if sc.Succeeded+sc.Failed+sc.Cancelled+sc.HoldsCancelled > 0 {
				out = append(out, sc)
			}
		}
	}
	return out, nil
}

// eventCaseHorizon is how long settleEvents follows a case of retries at
// once in the events; one still running then is followed in an attempts
// row (settle_batch), so that the pass's cursor goes on past it.
const eventCaseHorizon = 15 * time.Minute

// settleEvents settles the retries at once that wrote no attempts row
// (their event holds the attempt), for every configured task with a
// settle cursor (a repair writes it with the task's first such retry),
// from the events after it up to the newest now: a case whose outcome is
// known is closed with one event (retry_succeeded, as a retried row's; a
// later case of the task counts from 0), retry_failed or retry_cancelled,
// and gets its attempts row in that state; one still running past the
// horizon gets its row in state retried. The task's cursor then moves up
// to the first case left open. A master's next pass reads again only the
// cases it left open, and the events after the newest it read
// (openCases): a case not left open has a row or a later case, and
// stays so (attempts rows are not deleted). It holds the events
// semaphore whole, so that no repair batch of this process has events
// uncommitted below the newest it reads (an earlier master's ended before
// this term was recorded). A task not configured keeps its cursor until
// it is again. It returns the cases closed by task.
func (r *Repairer) settleEvents(ctx context.Context, o *leader.Office, run int64) (map[[2]string]SettleCounts, error) {
	if err := r.events.Acquire(ctx, eventsWhole); err != nil {
		return nil, fmt.Errorf("settle the retries at once: %w", err)
	}
	defer r.events.Release(eventsWhole)
	cursors, err := r.settleCursors(ctx)
	if err != nil {
		return nil, err
	}
	out := map[[2]string]SettleCounts{}
	for _, w := range r.cfg.Workflows {
		var idType string
		for _, t := range w.Tasks {
			key := [2]string{w.Name, t.Name}
			c, ok := cursors[key]
			if !ok || c.Upto <= c.After {
				continue
			}
			sc, err := r.settleTaskEvents(ctx, o, run, w, t, &idType, c)
			if err != nil {
				return out, fmt.Errorf("settle the retries at once of %s.%s: %w", w.Name, t.Name, err)
			}
			if sc.Succeeded+sc.Failed+sc.Cancelled > 0 {
				out[key] = sc
			}
		}
	}
	return out, nil
}

// openCases are the cases of a task's retries at once a settle pass left
// open: what the next pass of the same office, its cursor where the pass
// left it, reads again, before the events after seen.
type openCases struct {
	// term is the office's; after, the task's cursor as the pass left
	// it; seen, the newest event it read.
	term, after, seen int64
	// ids are the open cases' events, in order (all after after, up to
	// seen).
	ids []int64
}

// settleTaskEvents is settleEvents' pass over task t, its cursor c: the
// cases the office's last pass left open (if it left the cursor as it is
// now), then the events after the newest that pass read, or else every
// event after the cursor; then it moves the cursor.
func (r *Repairer) settleTaskEvents(ctx context.Context, o *leader.Office, run int64, w Workflow, t Task, idType *string, c settleCursor) (SettleCounts, error) {
	var sc SettleCounts
	key := [2]string{w.Name, t.Name}
	known, ok := r.openCases[key]
	// Kept again only when the pass ends well: a failed pass leaves the
	// next one to read from the cursor.
	delete(r.openCases, key)
	after, recheck := c.After, []int64(nil)
	if ok && known.term == o.Term && known.after == c.After && known.seen <= c.Upto {
		after, recheck = known.seen, known.ids
	}
	var open []int64 // left open, in order: those read again come first
	looked := 0
	add := func(b eventsBatch) {
		sc.Succeeded += b.succeeded
		sc.Failed += b.failed
		sc.Cancelled += b.cancelled
		open = append(open, b.open...)
		looked += b.looked
	}
	for len(recheck) > 0 {
		chunk := recheck[:min(len(recheck), r.cfg.SettleBatchSize)]
		recheck = recheck[len(chunk):]
		b, err := r.settleEventsBatch(ctx, o, run, w, t, idType, eventsPick{open: chunk})
		if err != nil {
			return sc, err
		}
		add(b)
	}
	for after < c.Upto {
		b, err := r.settleEventsBatch(ctx, o, run, w, t, idType, eventsPick{after: after, upto: c.Upto})
		if err != nil {
			return sc, err
		}
		add(b)
		if b.looked < r.cfg.SettleBatchSize {
			break
		}
		after = b.last
	}
	if r.onSettleEvents != nil {
		r.onSettleEvents(w.Name, t.Name, looked)
	}
	stop := c.Upto // where the cursor goes: before the first case left open
	if len(open) > 0 {
		stop = open[0] - 1 // never before c.After: every case read is after it
	}
	if stop > c.After {
		err := r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
			_, err := r.st.moveSettleCursor.Exec(ctx, tx, sqltext.Args{"after": stop, "workflow": w.Name, "task": t.Name})
			return err
		})
		if err != nil {
			return sc, fmt.Errorf("move the cursor: %w", err)
		}
	}
	r.openCases[key] = openCases{term: o.Term, after: stop, seen: c.Upto, ids: open}
	return sc, nil
}

// settleCursor is a task's settle cursor and the newest event now.
type settleCursor struct {
	Workflow string `db:"workflow"`
	Task     string `db:"task"`
	After    int64  `db:"after_id"`
	Upto     int64  `db:"upto"`
}

// settleCursors reads the settle cursors of the configured tasks that
// have one, by workflow and task.
func (r *Repairer) settleCursors(ctx context.Context) (map[[2]string]settleCursor, error) {
	var wfs, tasks []string
	for _, w := range r.cfg.Workflows {
		for _, t := range w.Tasks {
			wfs, tasks = append(wfs, w.Name), append(tasks, t.Name)
		}
	}
	var rows []settleCursor
	if err := r.st.settleCursor.Select(ctx, r.cfg.DB, &rows, sqltext.Args{"workflows": pq.Array(wfs), "tasks": pq.Array(tasks)}); err != nil {
		return nil, fmt.Errorf("read the settle cursors: %w", err)
	}
	out := map[[2]string]settleCursor{}
	for _, c := range rows {
		out[[2]string{c.Workflow, c.Task}] = c
	}
	return out, nil
}

// eventsBatch is what one settle_events batch did: the events it looked
// at, the last of them, the cases it left open (in order), those it
// closed.
type eventsBatch struct {
	looked                       int
	last                         int64
	open                         pq.Int64Array
	succeeded, failed, cancelled int64
}

// eventsPick is what a settle_events batch reads: the events of the
// open cases given (open), or else those after after, up to upto (open:
// only open is read).
type eventsPick struct {
	open        []int64
	after, upto int64
}

// settleEventsBatch runs one batch of settle_events for task t over the
// events p picks, in a fenced transaction. A row written meanwhile by
// someone else (an operator's retry) fails it: the next pass sees the
// row.
func (r *Repairer) settleEventsBatch(ctx context.Context, o *leader.Office, run int64, w Workflow, t Task, idType *string, p eventsPick) (eventsBatch, error) {
	var b eventsBatch
	if *idType == "" {
		var err error
		if *idType, err = r.idType(ctx, w); err != nil {
			return b, err
		}
	}
	q, err := r.renderSettleEvents(w, t, *idType, p, run)
	if err != nil {
		return b, err
	}
	err = r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
		var want, wrote int64
		if err := tx.QueryRowContext(ctx, q.SQL, q.Args...).Scan(&b.looked, &b.last, &b.open, &b.succeeded, &b.failed, &b.cancelled, &want, &wrote); err != nil {
			return err
		}
		if want != wrote {
			return fmt.Errorf("%w: %d attempts rows written while the batch ran", ErrConflict, want-wrote)
		}
		return nil
	})
	return b, err
}

// settleEventsSQL is the statement of a batch of settleEvents
// (sql/settle_events.sql).
var settleEventsSQL = load("settle_events")

// eventsSlots fill settleEventsSQL.
type eventsSlots struct {
	settleSlots
	// KindRepair is the repair event's kind, as a literal; HistoryJoin:
	// the history of the case's instance o.instance (historyJoin), for
	// its row; OpenCase: whether the event r's case is still open
	// (openCase).
	KindRepair, HistoryJoin, OpenCase string
	// Open: the batch reads the events of the open cases given.
	Open bool
}

// openCaseSQL tells whether a retry at once's case is still its event's
// (sql/open_case.sql), a fragment of settle_events and retry_stats.
var openCaseSQL = load("open_case")

// openCase joins to the retry at once's event row alias whether its case
// is still open (open_case.sql: kept.found, later.found).
func (r *Repairer) openCase(alias string) (string, error) {
	f, err := openCaseSQL.Fragment(struct{ Event, Attempts, Events, KindRepair string }{
		alias, r.attempts, r.cfg.Events.Table(), pq.QuoteLiteral(string(audit.KindRepair))})
	return strings.TrimRight(f, "\n"), err
}

// renderSettleEvents renders the statement of one settleEvents batch and
// its parameters.
func (r *Repairer) renderSettleEvents(w Workflow, t Task, idType string, p eventsPick, run int64) (sqltext.Statement, error) {
	hj, err := r.historyJoin("false", "o.instance")
	if err != nil {
		return sqltext.Statement{}, err
	}
	ss, err := r.settleSlots(w, t, idType)
	if err != nil {
		return sqltext.Statement{}, err
	}
	open, err := r.openCase("r")
	if err != nil {
		return sqltext.Statement{}, err
	}
	sl := eventsSlots{settleSlots: ss, KindRepair: pq.QuoteLiteral(string(audit.KindRepair)), HistoryJoin: hj, OpenCase: open, Open: p.open != nil}
	args := sqltext.Args{"workflow": w.Name, "task": t.Name, "after": p.after,
		"batch_size": r.cfg.SettleBatchSize, "ends": pq.Array(t.Ends), "begin": t.Begin, "interim": t.Interim, "failed": t.Failed,
		"run": run, "horizon_ms": r.caseHorizon.Milliseconds()}
	if p.open != nil {
		args["open"] = pq.Array(p.open)
	} else {
		args["upto"] = p.upto
	}
	return settleEventsSQL.Render(sl, args)
}

// settleBatch settles up to SettleBatchSize retried rows of task t after the
// instance after (nil: from the first), in one fenced transaction; it
// returns how many rows it looked at and the last one.
func (r *Repairer) settleBatch(ctx context.Context, o *leader.Office, run int64, w Workflow, t Task, idType string, after *string, sc *SettleCounts) (int, string, error) {
	q, err := r.renderSettleBatch(w, t, idType, after, run)
	if err != nil {
		return 0, "", err
	}
	var n int
	var last string
	var ok, failed, gone int64
	err = r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
		return tx.QueryRowContext(ctx, q.SQL, q.Args...).Scan(&n, &last, &ok, &failed, &gone)
	})
	if err != nil {
		return 0, "", err
	}
	sc.Succeeded += ok
	sc.Failed += failed
	sc.Cancelled += gone
	return n, last, nil
}

// settleBatchSQL is the statement of a settle batch (sql/settle_batch.sql).
var settleBatchSQL = load("settle_batch")

// settleSlots fill settleBatchSQL.
type settleSlots struct {
	// Table, ID and Status name the instance table and its columns, quoted;
	// IDType: the id column's type (the catalog's name).
	Table, ID, Status, IDType string
	// Outcome and Reason are a retry's outcome and the reason said of it
	// (sql/settle_outcome.sql, settle_reason.sql), over the columns
	// st, next and what.
	Outcome, Reason string
	// The sidecar's tables, quoted, and the event kinds, as literals.
	Attempts, Events                         string
	KindSucceeded, KindFailed, KindCancelled string
}

// batchSettleSlots fill settleBatchSQL: settleSlots, and After, whether
// a batch came before.
type batchSettleSlots struct {
	settleSlots
	After bool
}

// renderSettleBatch renders the statement of one settle batch (after
// nil: the first) and its parameters.
func (r *Repairer) renderSettleBatch(w Workflow, t Task, idType string, after *string, run int64) (sqltext.Statement, error) {
	sl, err := r.settleSlots(w, t, idType)
	if err != nil {
		return sqltext.Statement{}, err
	}
	args := sqltext.Args{"workflow": w.Name, "task": t.Name, "batch_size": r.cfg.SettleBatchSize,
		"ends": pq.Array(t.Ends), "begin": t.Begin, "interim": t.Interim, "failed": t.Failed, "run": run}
	if after != nil {
		args["after"] = *after
	}
	return settleBatchSQL.Render(batchSettleSlots{settleSlots: sl, After: after != nil}, args)
}

// settleSlots returns the slots settle_batch and settle_events share.
func (r *Repairer) settleSlots(w Workflow, t Task, idType string) (settleSlots, error) {
	outcome, err := settleOutcomeSQL.Fragment(struct{ FailurePolicy bool }{t.FailurePolicy().Strategy != StrategyNone})
	if err != nil {
		return settleSlots{}, err
	}
	reason, err := settleReasonSQL.Fragment(nil)
	if err != nil {
		return settleSlots{}, err
	}
	return settleSlots{
		Table: claims.Ident(w.Table), ID: claims.Ident(w.IDColumn), Status: claims.Ident(w.StatusColumn), IDType: idType,
		Outcome: strings.TrimRight(outcome, "\n"), Reason: strings.TrimRight(reason, "\n"),
		Attempts: r.attempts, Events: r.cfg.Events.Table(),
		KindSucceeded: pq.QuoteLiteral(string(audit.KindRetrySucceeded)), KindFailed: pq.QuoteLiteral(string(audit.KindRetryFailed)),
		KindCancelled: pq.QuoteLiteral(string(audit.KindRetryCancelled)),
	}, nil
}

// settleOutcomeSQL and settleReasonSQL are the parts settle_batch and
// settle_events share (settleSlots).
var settleOutcomeSQL, settleReasonSQL = load("settle_outcome"), load("settle_reason")

// parkedCursor is where the next look at a task's parked rows of one
// state starts: after the row (at, instance), in the order of that
// state's partial index (held: since; waiting: next_attempt_at).
type parkedCursor struct{ at, instance string }

// closeParked closes the parked rows of task t whose instance is no
// longer where it was left, each with an event, in one fenced
// transaction per state, and only when there is one to close: every pass,
// a hold whose instance moved anywhere (hold cancelled); on a sweep pass,
// a waiting retry whose instance reached an end state or is gone (retry
// cancelled; one moved elsewhere is cancelled when it falls due, one
// moved back to begin counts as run). Looking at waiting retries costs a
// pass with 100k of them more than the idle pass the retry issue allows,
// so it waits for the sweeps, which are costly anyway. A row whose
// instance reached an end state ends succeeded (a later case of the task
// counts from 0; ended_parked: statistics count it cancelled, its retry
// or hold never ran), any other cancelled. A pass looks at up to SettleBatchSize
// rows of each state: with more, the next goes on where it stopped.
// idType is the workflow's id type, read on first need. It returns how
// many holds it closed.
func (r *Repairer) closeParked(ctx context.Context, o *leader.Office, run int64, w Workflow, t Task, idType *string, sweep bool) (int64, error) {
	held, err := r.settleParked(ctx, o, run, w, t, idType, AttemptHeld)
	if err != nil || !sweep {
		return held, err
	}
	_, err = r.settleParked(ctx, o, run, w, t, idType, AttemptWaiting)
	return held, err
}

func (r *Repairer) settleParked(ctx context.Context, o *leader.Office, run int64, w Workflow, t Task, idType *string, state string) (int64, error) {
	key := w.Name + "\x00" + t.Name + "\x00" + state
	// A shape per state (its literal: the planner then reads the
	// state's partial index).
	exist := r.st.heldExist
	if state == AttemptWaiting {
		exist = r.st.waitingExist
	}
	var some bool
	if err := exist.Get(ctx, r.cfg.DB, &some, sqltext.Args{"workflow": w.Name, "task": t.Name}); err != nil {
		return 0, err
	}
	if !some {
		return 0, nil
	}
	if *idType == "" {
		var err error
		if *idType, err = r.idType(ctx, w); err != nil {
			return 0, err
		}
	}
	r.mu.Lock()
	cur := r.parkedAt[key]
	r.mu.Unlock()
	// Read first, outside a transaction: most passes close nothing, and
	// need no fenced one.
	look, err := r.renderSettleParked(w, t, *idType, state, cur, false, 0)
	if err != nil {
		return 0, err
	}
	var n int
	var next parkedCursor
	var found, closed int64
	if err := r.cfg.DB.QueryRowContext(ctx, look.SQL, look.Args...).Scan(&n, &next.at, &next.instance, &found); err != nil {
		return 0, err
	}
	if found > 0 {
		q, err := r.renderSettleParked(w, t, *idType, state, cur, true, run)
		if err != nil {
			return 0, err
		}
		err = r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
			return tx.QueryRowContext(ctx, q.SQL, q.Args...).Scan(&closed)
		})
		if err != nil {
			return 0, err
		}
	}
	if n < r.cfg.SettleBatchSize {
		next = parkedCursor{} // all looked at: the next pass starts over
	}
	r.mu.Lock()
	if r.parkedAt == nil {
		r.parkedAt = map[string]parkedCursor{}
	}
	r.parkedAt[key] = next
	r.mu.Unlock()
	return closed, nil
}

// settleParkedSQL is the statement that looks at, or closes, a slice of a
// task's parked rows (sql/settle_parked.sql).
var settleParkedSQL = load("settle_parked")

// parkedSlots fill settleParkedSQL.
type parkedSlots struct {
	// Table, ID and Status name the instance table and its columns, quoted;
	// IDType: the id column's type (the catalog's name).
	Table, ID, Status, IDType string
	// State is the rows' state, as a literal; Waiting: it is waiting (else
	// held); Order: the column its partial index orders the rows by
	// after the workflow.
	State, Order string
	Waiting      bool
	// Cursor means a slice after the first; Close: close the rows found (else
	// look).
	Cursor, Close bool
	// The sidecar's tables, quoted, and the event kind, as a literal.
	Attempts, Events, Kind string
}

// renderSettleParked renders the look at (closing false) or the closing of
// (closing true, for run) the slice of task t's parked rows in state after
// cur.
func (r *Repairer) renderSettleParked(w Workflow, t Task, idType, state string, cur parkedCursor, closing bool, run int64) (sqltext.Statement, error) {
	// held: since (its index, per workflow); waiting: the due time.
	sl := parkedSlots{
		Table: claims.Ident(w.Table), ID: claims.Ident(w.IDColumn), Status: claims.Ident(w.StatusColumn), IDType: idType,
		State: pq.QuoteLiteral(state), Order: "since", Cursor: cur.at != "", Close: closing,
		Attempts: r.attempts, Events: r.cfg.Events.Table(), Kind: pq.QuoteLiteral(string(audit.KindHoldCancelled)),
	}
	what := "hold cancelled"
	if state == AttemptWaiting {
		sl.Waiting, sl.Order, sl.Kind, what = true, "next_attempt_at", pq.QuoteLiteral(string(audit.KindRetryCancelled)), "retry cancelled"
	}
	args := sqltext.Args{"workflow": w.Name, "task": t.Name, "limit": r.cfg.SettleBatchSize, "ends": pq.Array(t.Ends), "what": what}
	if sl.Cursor {
		args["cursor_at"], args["cursor_instance"] = cur.at, cur.instance
	}
	if closing {
		args["run"] = run
	}
	return settleParkedSQL.Render(sl, args)
}

// idColumn is what the catalog says of a workflow's id column (id_type).
type idColumn struct {
	// Type is its SQL type, as the catalog names it.
	Type string `db:"type"`
	// HasMax: max() takes the type.
	HasMax bool `db:"has_max"`
}

// idColumnOf returns what the catalog says of workflow w's id column.
func (r *Repairer) idColumnOf(ctx context.Context, w Workflow) (idColumn, error) {
	var c idColumn
	if err := catalog.idType.Get(ctx, r.cfg.DB, &c, sqltext.Args{"table": claims.Ident(w.Table), "column": w.IDColumn}); err != nil {
		return c, fmt.Errorf("id type of %s: %w", w.Name, err)
	}
	return c, nil
}

// idType returns the SQL type of workflow w's id column, as the catalog
// names it (to cast an attempts row's instance text to it, so that the
// instance table is read through its primary key).
func (r *Repairer) idType(ctx context.Context, w Workflow) (string, error) {
	c, err := r.idColumnOf(ctx, w)
	return c.Type, err
}
