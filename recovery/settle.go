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
func (r *Repairer) Settle(ctx context.Context, o *leader.Office, run int64) ([]SettleCounts, error) {
	var out []SettleCounts
	for _, w := range r.cfg.Workflows {
		var idType string
		for _, t := range w.Tasks {
			var some bool
			if err := r.cfg.DB.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+r.attempts+`
				WHERE workflow = $1 AND task = $2 AND state = 'retried')`, w.Name, t.Name).Scan(&some); err != nil {
				return out, fmt.Errorf("settle %s.%s: %w", w.Name, t.Name, err)
			}
			if !some {
				continue
			}
			if idType == "" {
				var err error
				if idType, err = r.idType(ctx, w); err != nil {
					return out, err
				}
			}
			sc := SettleCounts{Workflow: w.Name, Task: t.Name}
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
			if sc.Succeeded+sc.Failed+sc.Cancelled > 0 {
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
			UPDATE %[1]s AS a SET state = y.next, since = now(), last_reason = y.reason
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
