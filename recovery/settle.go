package recovery

import (
	"context"
	"fmt"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// SettleCounts is what Settle found of one task's retries.
type SettleCounts struct {
	Workflow string `json:"workflow"`
	Task     string `json:"task"`
	// Succeeded: the instance reached one of the task's end states, or
	// went on past the task. Failed: the engine failed it and the task
	// has no on_failure policy to decide. Cancelled: the instance row is
	// gone.
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Cancelled int64 `json:"cancelled"`
	// HoldsCancelled: holds whose instance is no longer where it was
	// left (it reached an end state, someone else moved it, or it is
	// gone).
	HoldsCancelled int64 `json:"holds_cancelled"`
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
	for _, w := range r.cfg.Workflows {
		var idType string
		for _, t := range w.Tasks {
			sc := SettleCounts{Workflow: w.Name, Task: t.Name}
			var err error
			if sc.HoldsCancelled, err = r.closeParked(ctx, o, run, w, t, &idType, sweep); err != nil {
				return out, fmt.Errorf("close parked rows of %s.%s: %w", w.Name, t.Name, err)
			}
			var some bool
			if err := r.cfg.DB.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+r.attempts+`
				WHERE workflow = $1 AND task = $2 AND state = 'retried')`, w.Name, t.Name).Scan(&some); err != nil {
				return out, fmt.Errorf("settle %s.%s: %w", w.Name, t.Name, err)
			}
			if !some {
				if sc.HoldsCancelled > 0 {
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
			after := ""
			for {
				n, last, err := r.settleBatch(ctx, o, run, w, t, idType, after, &sc)
				if err != nil {
					return out, fmt.Errorf("settle %s.%s: %w", w.Name, t.Name, err)
				}
				if n < r.cfg.BatchSize {
					break
				}
				after = last
			}
			if sc.Succeeded+sc.Failed+sc.Cancelled+sc.HoldsCancelled > 0 {
				out = append(out, sc)
			}
		}
	}
	return out, nil
}

// settleBatch settles up to BatchSize retried rows of task t after the
// instance after, in one fenced transaction; it returns how many rows it
// looked at and the last one.
func (r *Repairer) settleBatch(ctx context.Context, o *leader.Office, run int64, w Workflow, t Task, idType, after string, sc *SettleCounts) (int, string, error) {
	hasFailure := t.FailurePolicy().Strategy != StrategyNone
	ev := r.cfg.Events.InsertSelect(audit.Columns{
		Kind: "CASE x.next WHEN 'succeeded' THEN $7 WHEN 'failed' THEN $8 ELSE $9 END", RunID: "$10",
		Workflow: "$1", Instance: "x.instance", Task: "$2", ToState: "x.st", Attempt: "x.attempt", Reason: "x.reason"}, "upd x")
	q := fmt.Sprintf(`WITH a AS MATERIALIZED (
			SELECT a.ctid AS tid, a.instance, a.attempt, a.manual FROM %[1]s AS a
			WHERE a.workflow = $1 AND a.task = $2 AND a.state = 'retried' AND a.instance > $11
			ORDER BY a.instance LIMIT $12 FOR UPDATE SKIP LOCKED
		), j AS MATERIALIZED (
			SELECT a.*, (SELECT t.%[4]s::text FROM %[2]s AS t WHERE t.%[3]s = a.instance::%[5]s) AS st FROM a
		), x AS MATERIALIZED (
			SELECT j.*, CASE
					WHEN j.st IS NULL THEN 'cancelled'
					WHEN j.st = ANY ($3::text[]) THEN 'succeeded'
					WHEN j.st = $4 OR j.st = $5 THEN ''
					WHEN j.st = $6 THEN CASE WHEN $13 THEN '' ELSE 'failed' END
					ELSE 'succeeded' END AS next,
				CASE WHEN j.manual > 0 AND j.attempt = 0 THEN 'manual retry ' || j.manual ELSE 'retry ' || j.attempt END AS what
			FROM j
		), y AS (
			SELECT x.*, CASE x.next
					WHEN 'cancelled' THEN x.what || ' cancelled: the instance no longer exists'
					WHEN 'failed' THEN x.what || ' failed: the engine moved the instance to ' || x.st
					WHEN 'succeeded' THEN CASE WHEN x.st = ANY ($3::text[])
						THEN x.what || ' succeeded: the instance reached ' || x.st
						ELSE x.what || ' succeeded: the instance went on to ' || x.st END
				END AS reason
			FROM x WHERE x.next <> ''
		), upd AS (
			UPDATE %[1]s AS a SET state = y.next, since = now(), last_reason = y.reason, ended_parked = false
			FROM y WHERE a.ctid = y.tid
			RETURNING y.instance, y.st, y.attempt, y.next, y.reason
		), ev AS (
			%[6]s
		)
		SELECT (SELECT count(*) FROM a), coalesce((SELECT max(instance) FROM a), ''),
			count(*) FILTER (WHERE next = 'succeeded'), count(*) FILTER (WHERE next = 'failed'),
			count(*) FILTER (WHERE next = 'cancelled')
		FROM upd`,
		r.attempts, claims.Ident(w.Table), claims.Ident(w.IDColumn), claims.Ident(w.StatusColumn), idType, ev)
	var n int
	var last string
	var ok, failed, gone int64
	err := r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
		return tx.QueryRowContext(ctx, q, w.Name, t.Name, pq.Array(t.Ends), t.Begin, t.Interim, t.Failed,
			audit.KindRetrySucceeded, audit.KindRetryFailed, audit.KindRetryCancelled, run, after, r.cfg.BatchSize, hasFailure).
			Scan(&n, &last, &ok, &failed, &gone)
	})
	if err != nil {
		return 0, "", err
	}
	sc.Succeeded += ok
	sc.Failed += failed
	sc.Cancelled += gone
	return n, last, nil
}

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
// or hold never ran), any other cancelled. A pass looks at up to BatchSize
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
	// held: since (its index, per workflow); waiting: the due time.
	order, limit, kind, what, gone := "since", r.cfg.BatchSize, audit.KindHoldCancelled, "hold cancelled", "j.st IS DISTINCT FROM j.left_in"
	if state == AttemptWaiting {
		order, limit, kind, what, gone = "next_attempt_at", r.cfg.BatchSize, audit.KindRetryCancelled, "retry cancelled", "j.st IS NULL OR j.st = ANY ($6::text[])"
	}
	var some bool
	// The state as a literal: the planner then reads the state's partial
	// index (a parameter would not match its predicate).
	if err := r.cfg.DB.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+r.attempts+`
		WHERE workflow = $1 AND state = `+pq.QuoteLiteral(state)+` AND task = $2)`, w.Name, t.Name).Scan(&some); err != nil {
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
	// A range of the state's index (time, instance): from the start, or
	// after the cursor ($3 and $4 unused then).
	after := "AND $3 = '' AND $4 = ''"
	if cur.at != "" {
		after = fmt.Sprintf("AND (a.%s, a.instance) > ($3::timestamptz, $4::text)", order)
	}
	ev := r.cfg.Events.InsertSelect(audit.Columns{Kind: pq.QuoteLiteral(kind), RunID: "$8",
		Workflow: "$1", Instance: "x.instance", Task: "$2", FromState: "x.left_in", ToState: "x.st", Attempt: "x.attempt",
		Reason: "x.reason"}, "upd x")
	// The rows to close: h, the slice looked at; x, those whose instance
	// is no longer where it was left. $1–$7 (the run, $8, only writes).
	pick := fmt.Sprintf(`WITH h AS MATERIALIZED (
			SELECT a.ctid AS tid, a.instance, a.attempt, a.left_in, a.%[7]s AS at FROM %[1]s AS a
			WHERE a.workflow = $1 AND a.state = %[9]s AND a.task = $2 %[8]s
			-- No row locks: most rows looked at stay as they are; the
			-- update takes those it changes, by tuple id and state (a
			-- row changed since is not found).
			ORDER BY a.%[7]s, a.instance LIMIT $5
		), x AS MATERIALIZED (
			SELECT j.*, j.st = ANY ($6::text[]) AS ended, CASE
					WHEN j.st IS NULL THEN $7 || ': the instance no longer exists'
					WHEN j.st = ANY ($6::text[]) THEN $7 || ': the instance reached end state ' || j.st
					ELSE $7 || ': instance moved to ' || j.st || ' by someone else' END AS reason
			FROM (SELECT h.*, (SELECT t.%[4]s::text FROM %[2]s AS t WHERE t.%[3]s = h.instance::%[5]s) AS st FROM h) AS j
			WHERE %[6]s
		)`, r.attempts, claims.Ident(w.Table), claims.Ident(w.IDColumn), claims.Ident(w.StatusColumn), *idType, gone, order, after, pq.QuoteLiteral(state))
	args := []any{w.Name, t.Name, cur.at, cur.instance, limit, pq.Array(t.Ends), what}
	// Read first, outside a transaction: most passes close nothing, and
	// need no fenced one.
	var n int
	var next parkedCursor
	var found, closed int64
	if err := r.cfg.DB.QueryRowContext(ctx, pick+`
		SELECT (SELECT count(*) FROM h), coalesce((SELECT at::text FROM h ORDER BY at DESC, instance DESC LIMIT 1), ''),
			coalesce((SELECT instance FROM h ORDER BY at DESC, instance DESC LIMIT 1), ''), (SELECT count(*) FROM x)`, args...).
		Scan(&n, &next.at, &next.instance, &found); err != nil {
		return 0, err
	}
	if found > 0 {
		err := r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
			return tx.QueryRowContext(ctx, pick+`, upd AS (
					UPDATE `+r.attempts+` AS a SET state = CASE WHEN x.ended THEN 'succeeded' ELSE 'cancelled' END, since = now(),
						next_attempt_at = NULL, last_reason = x.reason, ended_parked = coalesce(x.ended, false)
					FROM x WHERE a.ctid = x.tid AND a.state = `+pq.QuoteLiteral(state)+`
					RETURNING x.instance, x.left_in, x.st, x.attempt, x.reason
				), ev AS (
					`+ev+`
				)
				SELECT count(*) FROM upd`, append(args, run)...).Scan(&closed)
		})
		if err != nil {
			return 0, err
		}
	}
	if n < limit {
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

// idType returns the SQL type of workflow w's id column, as the catalog
// names it (to cast an attempts row's instance text to it, so that the
// instance table is read through its primary key).
func (r *Repairer) idType(ctx context.Context, w Workflow) (string, error) {
	var idType string
	if err := sqlx.GetContext(ctx, r.cfg.DB, &idType, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = to_regclass($1) AND attname = $2 AND NOT attisdropped`, claims.Ident(w.Table), w.IDColumn); err != nil {
		return "", fmt.Errorf("id type of %s: %w", w.Name, err)
	}
	return idType, nil
}
