package recovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/faultinject"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/lib/pq"
)

// ErrConflict: an attempts row changed while a batch ran (an operator's
// decision raced the batch); nothing of the batch was written.
var ErrConflict = errors.New("recovery: concurrent change")

// steps is the decision table of a task's policy for a batch: one row per
// (attempts row known, retries made, non_retryable pattern matched (1-based;
// 0: none)), computed by decide, column by column (the arrays the batch
// statement unnests). A row's retries are looked up capped at the policy's
// max_attempts, where the table ends.
type steps struct {
	known                   []bool
	prev, match             []int64
	kind, to, state, reason []string
	lo, hi                  []float64 // ms, before cap and jitter
	max                     int
	capMS, jitter           float64
}

func stepsOf(t Task, c Cause, patterns []string) steps {
	p := t.Policy(c)
	st := steps{jitter: p.Backoff.Jitter, capMS: p.Backoff.limit() / 1e6}
	if p.Strategy == StrategyRetry {
		st.max = p.MaxAttempts
	}
	add := func(known bool, prev, match int) {
		m := ""
		if match > 0 {
			m = patterns[match-1]
		}
		a := decide(t, c, History{Retries: prev, Known: known}, m)
		lo, hi, _ := p.Backoff.interval(a.Attempt)
		st.known = append(st.known, known)
		st.prev = append(st.prev, int64(prev))
		st.match = append(st.match, int64(match))
		st.kind = append(st.kind, a.Kind)
		st.to = append(st.to, a.To)
		st.state = append(st.state, a.State)
		st.reason = append(st.reason, a.Reason)
		st.lo = append(st.lo, lo/1e6)
		st.hi = append(st.hi, hi/1e6)
	}
	for match := 0; match <= len(patterns); match++ {
		add(false, 0, match)
		for prev := 0; prev <= st.max; prev++ {
			add(true, prev, match)
		}
	}
	return st
}

// maxErrorText: the characters of an instance's error text kept in its
// attempts row (last_error).
const maxErrorText = 2000

// cursor is where a task's next batch starts: after the last id picked
// (interrupted instances, in id order), or after the last (updated, id)
// picked, from a watermark (failed instances, in updated_column order).
type cursor struct {
	// ids, when not nil: the instances to look at (those whose claims
	// the run expired), instead of all.
	ids []string
	id  string
	// at: the updated_column value (as PostgreSQL prints it) of the last
	// failed instance picked, or the watermark the first batch starts at.
	at string
}

// batchCounts is what one batch did.
type batchCounts struct {
	picked                         int
	last                           cursor
	retried, waiting, held, failed int64
	// exhausted: of failed, those failed for good after max_attempts.
	exhausted int64
}

func (c batchCounts) done() int64 { return c.retried + c.waiting + c.held + c.failed }

// policyBatch handles one batch of a task's interrupted instances
// (CauseInterrupt) or failed ones (CauseFailure) in tx, in one statement:
// it picks up to BatchSize of them after cursor (unclaimed, in the
// interim, or failed, state, not waiting for a retry or held; a failed one
// only if no decision was made on it since the engine last changed it)
// with their attempts rows, decides each by the task's decision table (steps:
// Decide's outcomes; a scheduled retry's delay drawn as Delay draws it),
// moves the instances (re-asserting the predicate: a row changed since the
// pick is left alone), writes their attempts rows (a new row, or the one
// read if its count is unchanged: anything else fails the whole batch),
// one event each, and counts them in the run.
func (r *Repairer) policyBatch(ctx context.Context, tx *leader.Tx, run int64, w Workflow, t Task, c Cause, tbl *claims.Table, attr attribution, cur cursor, skipLocked bool) (batchCounts, error) {
	var bc batchCounts
	debug := r.log.Enabled(ctx, slog.LevelDebug)
	from := t.Interim
	if c == CauseFailure {
		from = t.Failed
	}
	ti, id, st := claims.Ident(w.Table), claims.Ident(w.IDColumn), claims.Ident(w.StatusColumn)
	pred, predB := "TRUE", "TRUE"
	if tbl != nil && !faultinject.Off(faultinject.Predicate) {
		pred, predB = tbl.Unclaimed("t"), tbl.Unclaimed("b")
	}
	// Parameters $1–$18 are fixed (args below); the optional ones are
	// numbered as they are added, so every one given is used.
	var extra []any
	param := func(v any) string {
		extra = append(extra, v)
		return fmt.Sprintf("$%d", 18+len(extra))
	}
	match, errText := "0", "NULL::text"
	if w.ErrorColumn != "" {
		errText = fmt.Sprintf("left(b.%s::text, %d)", claims.Ident(w.ErrorColumn), maxErrorText)
	}
	if p := t.Policy(c); w.ErrorColumn != "" && len(p.NonRetryable) > 0 {
		match = fmt.Sprintf(`coalesce((SELECT u.i FROM unnest(%s::text[]) WITH ORDINALITY AS u(p, i)
			WHERE b.%s::text ~ u.p ORDER BY u.i LIMIT 1), 0)`, param(p.pgPatterns()), claims.Ident(w.ErrorColumn))
	}
	patterns := t.Policy(c).NonRetryable
	if match == "0" {
		patterns = nil
	}
	node, intr := "NULL::text", ""
	if attr.on {
		node = r.cfg.Events.LatestExpiryNode("$1", fmt.Sprintf("b.%s::text", id))
	}
	if c == CauseInterrupt && len(attr.expired) > 0 {
		// Interruptions of the nodes whose claims this run expired, for
		// their failover grades (nodes.Store.Grade).
		intr = fmt.Sprintf(`, intr AS (
			INSERT INTO %s (run_id, node, workflow, task, instance)
			SELECT $6, x.node, $1, $2, x.sid FROM done x WHERE x.node IS NOT NULL AND x.sid = ANY (%s::text[])
		)`, r.intr, param(pq.Array(attr.expired)))
	}
	// Interrupted instances in id order, failed ones in (updated, id)
	// order from the watermark; a failed instance is skipped once a
	// decision was made on it since the engine last changed it.
	after, lock := "AND $5::text = ''", "" // the first batch: no cursor
	order, upd, handled := "b."+id, "NULL::timestamptz", ""
	if cur.id != "" {
		after = fmt.Sprintf("AND b.%s > $5", id)
	}
	if c == CauseFailure {
		u := "b." + claims.Ident(w.UpdatedColumn)
		// Decided since the engine last changed it: the decision is newer
		// than the stamp, or was made on this very stamp (one in the
		// future included).
		order, upd, handled = u+", b."+id, u, "AND (a.since IS NULL OR (a.since < "+u+" AND a.stamp IS DISTINCT FROM "+u+"))"
		after = fmt.Sprintf("AND %s >= $5::timestamptz", u)
		if cur.id != "" {
			after += fmt.Sprintf(" AND (%s > $5::timestamptz OR b.%s > %s)", u, id, param(cur.id))
		}
	}
	if cur.ids != nil {
		after += fmt.Sprintf(" AND b.%s = ANY (%s)", id, param(pq.Array(cur.ids)))
	}
	if skipLocked {
		lock = "FOR NO KEY UPDATE OF b SKIP LOCKED"
	}
	// A parked instance (waiting for a retry, or held) that ran again
	// since it was parked: someone else moved it back and an engine ran
	// it, and it was interrupted (its claim expired since) or failed (the
	// engine changed it since) again. That is a new case of the task,
	// decided now; left alone, the due retry would find it where it was
	// left and run, and the new case would be lost.
	again := r.againSQL(c, w, tbl, "b", "$1", "$3")
	// The cursor: the last id picked (interrupted instances, in id
	// order), or the last (updated, id) picked (failed ones).
	last := `coalesce((SELECT max(p.id)::text FROM pick p), ''), ''`
	if c == CauseFailure {
		last = `coalesce((SELECT p.id::text FROM pick p ORDER BY p.upd DESC, p.id DESC LIMIT 1), ''),
			coalesce((SELECT max(p.upd)::text FROM pick p), '')`
	}
	// The attempt-number guard: an attempts row read by the pick is
	// updated only if its count and state are still the ones read (by
	// tuple id: any change since makes it not found), and a row is
	// inserted only if none exists (the primary key); either failing
	// fails the batch. A faultinject build can turn it off: rows are then
	// written by key, over whatever changed (and widen the window between
	// the statement's snapshot and its writes, so that two masters with
	// fencing off race).
	guarded, window, onConflict := "a.ctid = x.att AND a.attempt = x.read AND a.state = x.read_state", "", ""
	if faultinject.Off(faultinject.AttemptGuard) {
		guarded, onConflict = "a.workflow = $1 AND a.instance = x.sid AND a.task = $2", " ON CONFLICT DO NOTHING"
	}
	if faultinject.Off(faultinject.RaceWindow) {
		window = " CROSS JOIN pg_sleep(0.8)"
	}
	sp := stepsOf(t, c, patterns)
	retried, failed := audit.KindRepair, audit.KindRepair
	if c == CauseFailure {
		retried, failed = audit.KindRetried, audit.KindFailed
	}
	ev := r.cfg.Events.InsertSelect(audit.Columns{
		Kind: fmt.Sprintf(`CASE x.kind WHEN 'wait' THEN %s WHEN 'hold' THEN %s WHEN 'retry' THEN %s ELSE %s END`,
			pq.QuoteLiteral(audit.KindRetryScheduled), pq.QuoteLiteral(audit.KindHeld), pq.QuoteLiteral(retried), pq.QuoteLiteral(failed)),
		RunID: "$6", Node: "x.node", Workflow: "$1", Instance: "x.sid", Task: "$2", FromState: "$3", ToState: "nullif(x.to_state, '')",
		Attempt: "CASE WHEN x.state <> '' THEN x.attempt END", Reason: "x.reason"}, "done x")
	if r.noEvents {
		ev = "SELECT 1"
	}
	q := fmt.Sprintf(`WITH s AS MATERIALIZED (
			SELECT s.* FROM unnest($7::bool[], $8::int[], $9::int[], $10::text[], $11::text[], $12::text[], $13::text[], $14::float8[], $15::float8[])
				AS s(known, prev, match, kind, to_state, state, reason, lo, hi)%[24]s
		), pick AS MATERIALIZED (
			SELECT b.ctid AS tid, b.%[2]s AS id, a.tid AS att, a.attempt AS read, a.state AS read_state, coalesce(a.again, false) AS again,
				`+retriesCountedSQL+` AS prev,
				CASE WHEN a.state = 'succeeded' THEN '{}' ELSE coalesce(a.nodes, '{}') END AS nodes,
				%[6]s AS node, %[7]s AS match, %[16]s AS err, %[18]s AS upd
			FROM %[1]s AS b %[27]s
			WHERE b.%[3]s = $3 AND %[5]s AND `+decidableSQL+` %[8]s %[19]s
			ORDER BY %[17]s LIMIT $4 %[9]s
		), d AS MATERIALIZED (
			SELECT y.*,
				-- The decision table stops at max_attempts: more retries
				-- made (max_attempts lowered since) are said as they are.
				CASE WHEN y.state = 'exhausted' AND y.prev > $18 THEN regexp_replace(y.reason, 'exhausted after [0-9]+ retr(y|ies)',
					'exhausted after ' || y.prev || ' retries') ELSE y.reason END
				|| CASE WHEN y.kind = 'wait' THEN %[12]s
				        WHEN y.state = 'exhausted' AND cardinality(y.nodes) > 0 THEN %[13]s || array_to_string(y.nodes, ', ')
				        ELSE '' END
				|| CASE WHEN NOT y.again THEN ''
				        WHEN y.read_state = 'waiting' THEN '; it was run again by someone else while retry ' || (y.read + 1) || ' waited (counted as made)'
				        ELSE '; it was run again by someone else while held' END AS full_reason
			FROM (
				SELECT p.tid, p.id::text AS sid, p.att, p.read, p.read_state, p.again, p.prev, p.node, p.err, p.upd, s.kind, s.to_state,
					CASE WHEN s.state = '' AND p.prev IS NOT NULL THEN 'failed' ELSE s.state END AS state,
					coalesce(p.prev, 0) + CASE WHEN s.kind IN ('retry', 'wait') THEN 1 ELSE 0 END AS attempt,
					coalesce(p.prev, 0) + CASE WHEN s.kind = 'retry' THEN 1 ELSE 0 END AS made,
					CASE WHEN s.kind = 'wait' THEN %[11]s END AS delay_ms,
					CASE WHEN p.node IS NULL OR p.node = ANY (p.nodes) THEN p.nodes ELSE p.nodes || p.node END AS nodes,
					s.reason
				FROM pick p JOIN (SELECT s.*, $16::float8 AS cap, $17::float8 AS jitter FROM s) AS s
					ON s.known = (p.prev IS NOT NULL) AND s.prev = least(coalesce(p.prev, 0), $18) AND s.match = p.match
			) AS y
		), moved AS (
			UPDATE %[1]s AS t SET %[3]s = r.to_state FROM d AS r
			WHERE t.ctid = r.tid AND r.to_state <> ''
			  AND t.%[3]s = $3 AND %[4]s
			RETURNING r.sid, r.att, r.read, r.read_state, r.node, r.err, r.upd, r.kind, r.to_state, r.state, r.attempt, r.made, r.delay_ms, r.nodes, r.full_reason
		), kept AS (
			SELECT r.sid, r.att, r.read, r.read_state, r.node, r.err, r.upd, r.kind, r.to_state, r.state, r.attempt, r.made, r.delay_ms, r.nodes, r.full_reason
			FROM %[1]s AS t JOIN d AS r ON t.ctid = r.tid
			WHERE r.to_state = '' AND t.%[3]s = $3 AND %[4]s
			FOR NO KEY UPDATE OF t
		), done AS MATERIALIZED (
			SELECT sid, att, read, read_state, node, err, upd, kind, to_state, state, attempt, made, delay_ms, nodes, full_reason AS reason FROM moved
			UNION ALL
			SELECT sid, att, read, read_state, node, err, upd, kind, to_state, state, attempt, made, delay_ms, nodes, full_reason FROM kept
		), ins AS (
			INSERT INTO %[10]s (workflow, instance, task, attempt, state, cause, left_in, last_attempt_at, next_attempt_at,
				last_node, nodes, last_reason, last_error, stamp)
			SELECT $1, x.sid, $2, x.made, x.state, %[20]s, $3,
				CASE WHEN x.kind = 'retry' THEN now() END,
				CASE WHEN x.kind = 'wait' THEN now() + x.delay_ms * interval '1 millisecond' END,
				x.node, x.nodes, x.reason, x.err, x.upd
			FROM done x WHERE x.state <> '' AND x.att IS NULL%[26]s
			RETURNING 1
		), upd AS (
			-- The row read by the pick, by tuple id: if it changed since,
			-- it is not found, and the counts below differ.
			UPDATE %[10]s AS a SET attempt = x.made, state = x.state, cause = %[20]s, left_in = $3, since = now(),
				last_attempt_at = CASE WHEN x.kind = 'retry' THEN now() ELSE a.last_attempt_at END,
				next_attempt_at = CASE WHEN x.kind = 'wait' THEN now() + x.delay_ms * interval '1 millisecond' END,
				last_node = coalesce(x.node, a.last_node), nodes = x.nodes, last_reason = x.reason, last_error = x.err,
				stamp = coalesce(x.upd, a.stamp)
			FROM done x
			WHERE x.att IS NOT NULL AND %[25]s
			RETURNING 1
		), ev AS (
			%[14]s
		)%[21]s, counted AS (
			UPDATE %[15]s SET done = done + (SELECT count(*) FROM done) WHERE id = $6
		)
		SELECT count(*) FILTER (WHERE kind = 'retry'), count(*) FILTER (WHERE kind = 'wait'),
			count(*) FILTER (WHERE kind = 'hold'), count(*) FILTER (WHERE kind = 'fail'),
			count(*) FILTER (WHERE state = 'exhausted'),
			count(*) FILTER (WHERE state <> ''), (SELECT count(*) FROM ins) + (SELECT count(*) FROM upd),
			(SELECT count(*) FROM pick),
			%[22]s, %[23]s
		FROM done`,
		ti, id, st, pred, predB, node, match, after, lock, r.attempts,
		fmt.Sprintf(sampleSQL, "s"), fmt.Sprintf(waitSuffixSQL, "y.delay_ms"), pq.QuoteLiteral(nodesSuffix), ev, r.runs, errText, order, upd, handled, pq.QuoteLiteral(string(c)), intr, last,
		debugSQL(debug), window, guarded, onConflict, r.historyJoin(again, w))
	at := cur.id
	if c == CauseFailure {
		at = cur.at
	}
	args := []any{w.Name, t.Name, from, r.cfg.BatchSize, at, run,
		pq.BoolArray(sp.known), pq.Int64Array(sp.prev), pq.Int64Array(sp.match), pq.StringArray(sp.kind), pq.StringArray(sp.to),
		pq.StringArray(sp.state), pq.StringArray(sp.reason), pq.Float64Array(sp.lo), pq.Float64Array(sp.hi),
		sp.capMS, sp.jitter, sp.max}
	args = append(args, extra...)
	var want, wrote int64
	var each []byte
	err := tx.QueryRowContext(ctx, q, args...).Scan(&bc.retried, &bc.waiting, &bc.held, &bc.failed, &bc.exhausted, &want, &wrote, &bc.picked, &bc.last.id, &bc.last.at, &each)
	if err != nil {
		return bc, fmt.Errorf("repair batch: %w", err)
	}
	if want != wrote && !faultinject.Off(faultinject.AttemptGuard) {
		return bc, fmt.Errorf("repair batch: %w: %d attempts rows changed while the batch ran", ErrConflict, want-wrote)
	}
	if debug && len(each) > 0 {
		var is []repairedInstance
		if err := json.Unmarshal(each, &is); err != nil {
			return bc, fmt.Errorf("repair batch: read its instances: %w", err)
		}
		tx.AfterCommit(func() {
			for _, i := range is {
				r.log.LogAttrs(ctx, slog.LevelDebug, "instance repaired", slog.Int64("run", run), slog.String("cause", string(c)),
					slog.String("action", actionName[i.Kind]), slog.Group("event", "workflow", w.Name, "instance", i.Instance,
						"task", t.Name, "from_state", from, "to_state", i.To, "node", i.Node, "attempt", i.Attempt, "reason", i.Reason))
			}
		})
	}
	return bc, nil
}

// historyJoin joins to the instance row b (of workflow $1's task $2) its
// attempts row as a: tid, attempt, nodes, state, since, stamp, and again,
// whether a parked row's instance ran again since (the SQL condition
// again, from againSQL).
func (r *Repairer) historyJoin(again string, w Workflow) string {
	return fmt.Sprintf(`LEFT JOIN LATERAL (
				-- LIMIT 1 keeps this a probe of the primary key per row,
				-- whatever the planner thinks of the table's size.
				SELECT a.ctid AS tid, a.attempt, a.nodes, a.state, a.since, a.stamp,
					CASE WHEN a.state IN ('waiting', 'held') THEN %s ELSE false END AS again
				FROM %s AS a
				WHERE a.workflow = $1 AND a.instance = b.%s::text AND a.task = $2 LIMIT 1) AS a ON true`,
		again, r.attempts, claims.Ident(w.IDColumn))
}

const (
	// retriesCountedSQL: the retries an instance's attempts row a
	// (historyJoin) counts for its next decision: a case after a success
	// starts again from 0; a retry that waited and was run by someone
	// else (again) counts as made. NULL without a row.
	retriesCountedSQL = `CASE WHEN a.state = 'succeeded' THEN 0 WHEN a.again AND a.state = 'waiting' THEN a.attempt + 1 ELSE a.attempt END`
	// decidableSQL: the instance is not parked by its attempts row a, or
	// ran again since it was.
	decidableSQL = `(a.state IS NULL OR a.state NOT IN ('waiting', 'held') OR a.again)`
)

// againSQL is the SQL condition, over a parked attempts row a (waiting or
// held) of the instance row alias, that the instance ran again since it
// was parked, for cause c: a claim on it expired since while it was in
// state (an SQL expression; workflow: of the workflow's name), or, for a
// failure, the engine changed it since (its updated_column is newer than
// the row and is not the stamp the row was decided on). A workflow
// without claims has no sign of an interruption but the state itself:
// false.
func (r *Repairer) againSQL(c Cause, w Workflow, tbl *claims.Table, alias, workflow, state string) string {
	switch {
	case c == CauseFailure:
		u := alias + "." + claims.Ident(w.UpdatedColumn)
		return "(a.since < " + u + " AND a.stamp IS DISTINCT FROM " + u + ")"
	case tbl != nil:
		return r.cfg.Events.ExpiredSince(workflow, alias+"."+claims.Ident(w.IDColumn)+"::text", state, "a.since")
	}
	return "false"
}

// repairedInstance is what a repair batch did to one instance, read only
// for the debug log (debugSQL).
type repairedInstance struct {
	Instance string `json:"instance"`
	Kind     string `json:"kind"`
	To       string `json:"to"`
	Node     string `json:"node"`
	Attempt  int    `json:"attempt"`
	Reason   string `json:"reason"`
}

// actionName of a decision kind, as the repair counts and metrics name it.
var actionName = map[string]string{"retry": "retried", "wait": "scheduled", "hold": "held", "fail": "failed"}

// debugSQL is the last column of a repair batch: with debug on, what it
// did to each instance, as a JSON array (repairedInstance); otherwise
// nothing is built.
func debugSQL(debug bool) string {
	if !debug {
		return "NULL::json"
	}
	return `json_agg(json_build_object('instance', sid, 'kind', kind, 'to', to_state, 'node', coalesce(node, ''),
		'attempt', CASE WHEN state <> '' THEN attempt ELSE 0 END, 'reason', reason) ORDER BY sid)`
}

// attribution of a repair batch: on, its events name the node whose claim
// on each instance expired last; expired lists the instances whose claims
// this run expired, whose repairs are interruptions of those nodes.
type attribution struct {
	on      bool
	expired []string
}

// DueResult counts what a due-retry pass did.
type DueResult struct {
	// Retried: instances moved back to their task's begin state.
	Retried int64 `json:"retried"`
	// Cancelled: retries whose instance was no longer where it was left.
	Cancelled int64 `json:"cancelled"`
}

// dueRow is a waiting attempts row whose time has come.
type dueRow struct {
	Workflow string `db:"workflow"`
	Instance string `db:"instance"`
	Task     string `db:"task"`
	Attempt  int    `db:"attempt"`
	LeftIn   string `db:"left_in"`
	Cause    Cause  `db:"cause"`
}

// Due runs the retries whose time has come, of every configured workflow
// and task, in batches: each batch is one fenced transaction that locks
// its attempts rows, moves each instance back to its task's begin state
// only if it is still exactly where it was left (and unclaimed), marks the
// row retried (attempt + 1) or cancelled (the instance was moved by
// someone else, reached an end state, was claimed or is gone), writes one
// event each and counts the retries in run. The partial index on
// next_attempt_at makes a pass with none due one index probe.
func (r *Repairer) Due(ctx context.Context, o *leader.Office, run int64) (DueResult, error) {
	var res DueResult
	var wfNames, taskNames []string
	for _, w := range r.cfg.Workflows {
		for _, t := range w.Tasks {
			wfNames, taskNames = append(wfNames, w.Name), append(taskNames, t.Name)
		}
	}
	for {
		var n int
		err := r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
			var rows []dueRow
			err := tx.SelectContext(ctx, &rows, `SELECT workflow, instance, task, attempt, left_in, cause FROM `+r.attempts+`
				WHERE state = 'waiting' AND next_attempt_at <= now()
				  AND (workflow, task) IN (SELECT * FROM unnest($1::text[], $2::text[]))
				ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED`,
				pq.Array(wfNames), pq.Array(taskNames), r.cfg.BatchSize)
			if err != nil {
				return fmt.Errorf("read due retries: %w", err)
			}
			n = len(rows)
			// One statement per workflow, task, cause and state left in.
			type key struct {
				w, t, left string
				c          Cause
			}
			groups := map[key][]dueRow{}
			var order []key
			for _, d := range rows {
				k := key{d.Workflow, d.Task, d.LeftIn, d.Cause}
				if _, ok := groups[k]; !ok {
					order = append(order, k)
				}
				groups[k] = append(groups[k], d)
			}
			for _, k := range order {
				// A retry the task's policy no longer allows (changed
				// since it was scheduled) is cancelled, not run.
				_, t := r.task(k.w, k.t)
				var run1, stale []dueRow
				for _, d := range groups[k] {
					if p := t.Policy(k.c); p.Strategy != StrategyRetry || d.Attempt+1 > p.MaxAttempts {
						stale = append(stale, d)
					} else {
						run1 = append(run1, d)
					}
				}
				if len(stale) > 0 {
					n, err := r.cancelStale(ctx, tx, run, k.w, t, k.c, stale)
					if err != nil {
						return err
					}
					res.Cancelled += n
				}
				if len(run1) == 0 {
					continue
				}
				moved, cancelled, err := r.dueGroup(ctx, tx, run, k.w, k.t, k.left, k.c, run1)
				if err != nil {
					return err
				}
				res.Retried += moved
				res.Cancelled += cancelled
			}
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("due retries: %w", err)
		}
		if n < r.cfg.BatchSize {
			return res, nil
		}
	}
}

// dueGroup applies due retries of one workflow and task whose instances
// were left in state left.
func (r *Repairer) dueGroup(ctx context.Context, tx *leader.Tx, run int64, wname, tname, left string, c Cause, rows []dueRow) (moved, cancelled int64, err error) {
	w, t := r.task(wname, tname)
	ids := make([]string, len(rows))
	for i, d := range rows {
		ids[i] = d.Instance
	}
	m := parkedMove{w: w, t: t, left: left, parked: AttemptWaiting, to: t.Begin, done: AttemptRetried, ranElsewhere: true,
		kind: audit.KindRetried, cancelKind: audit.KindRetryCancelled, cancelled: "retry cancelled", run: run,
		reason: fmt.Sprintf("format('%s: retry %%s of %%s', d.attempt + 1, %d)", what(c), t.Policy(c).MaxAttempts)}
	moved, gone, err := r.moveParked(ctx, tx, m, ids)
	return moved, int64(len(gone)), err
}

// cancelStale cancels waiting retries that the task's policy for cause no
// longer allows (it is not retry any more, or its max_attempts is now
// below the retry), each with a retry_cancelled event; the instances stay
// where they are.
func (r *Repairer) cancelStale(ctx context.Context, tx *leader.Tx, run int64, wname string, t Task, c Cause, rows []dueRow) (int64, error) {
	p := t.Policy(c)
	why := fmt.Sprintf("retry cancelled: the task's on_%s policy is %s now", c, p.Strategy)
	if p.Strategy == StrategyRetry {
		why = fmt.Sprintf("retry cancelled: the task's on_%s max_attempts is %d now", c, p.MaxAttempts)
	}
	ids := make([]string, len(rows))
	for i, d := range rows {
		ids[i] = d.Instance
	}
	ev := r.cfg.Events.InsertSelect(audit.Columns{Kind: pq.QuoteLiteral(audit.KindRetryCancelled), RunID: "$4",
		Workflow: "$1", Instance: "x.instance", Task: "$2", FromState: "x.left_in", Attempt: "x.attempt + 1", Reason: "$5"}, "gone x")
	var n int64
	err := tx.QueryRowContext(ctx, `WITH gone AS (
			UPDATE `+r.attempts+` SET state = 'cancelled', next_attempt_at = NULL, since = now(), last_reason = $5
			WHERE workflow = $1 AND task = $2 AND instance = ANY ($3::text[]) AND state = 'waiting'
			RETURNING instance, left_in, attempt
		), ev AS (
			`+ev+`
		)
		SELECT count(*) FROM gone`, wname, t.Name, pq.Array(ids), run, why).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("cancel retries of %s.%s: %w", wname, t.Name, err)
	}
	return n, nil
}

// task returns the configured workflow and task of the given names.
func (r *Repairer) task(wname, tname string) (Workflow, Task) {
	w := r.cfg.Workflows[slices.IndexFunc(r.cfg.Workflows, func(w Workflow) bool { return w.Name == wname })]
	return w, w.Tasks[slices.IndexFunc(w.Tasks, func(t Task) bool { return t.Name == tname })]
}

// parkedMove says how moveParked moves instances parked by a policy
// (attempts rows in state parked, the instances left in state left): a
// due retry (waiting → begin, counted as the policy's next retry) or an
// operator's decision on a hold (held → begin, counted as a manual retry,
// or held → failed).
type parkedMove struct {
	w    Workflow
	t    Task
	left string
	// parked: the attempts rows' state (waiting or held); to: where a
	// moved instance goes; done: the rows' state once it moved.
	parked, to, done string
	// manual: an operator's retry, counted in manual (not attempt).
	manual bool
	// ranElsewhere: an instance someone else moved back to begin, or
	// that an engine claimed, runs the task again: the retry counts as
	// made (the row goes retried, its outcome settled as any retry's), so
	// a poison instance moved by hand still runs out of retries.
	ranElsewhere bool
	// kind of a move's event, cancelKind of a cancellation's; cancelled
	// begins a cancellation's reason ("retry cancelled").
	kind, cancelKind, cancelled string
	// reason: SQL text of a move's reason, over d.attempt (the retries
	// made before).
	reason string
	// run counting the moves (0: none), who did it and the term of the
	// events of an operator's decision (empty and 0 for a run's).
	run  int64
	by   audit.By
	term int64
}

// moveParked applies m to the parked instances ids (whose attempts rows
// the caller locked), in one statement: it moves each instance only if it
// is still exactly where it was left and unclaimed, else cancels its row
// with the reason (gone, reached an end state, moved by someone else,
// claimed); it updates the attempts rows guarded by their state and
// count, writes one event each and counts the moves in the run. It
// returns how many moved, and the cancelled instances with their reasons.
func (r *Repairer) moveParked(ctx context.Context, tx *leader.Tx, m parkedMove, ids []string) (moved int64, cancelled []parkedCancel, err error) {
	w, t := m.w, m.t
	ti, id, st := claims.Ident(w.Table), claims.Ident(w.IDColumn), claims.Ident(w.StatusColumn)
	pred, claimed := "TRUE", "false"
	if w.Claims != nil {
		pred, claimed = w.Claims.Unclaimed("t"), "NOT "+w.Claims.Unclaimed("t")
	}
	attempt, manual, evAttempt := "x.attempt + 1", "a.manual", "x.attempt + 1"
	switch {
	case m.manual:
		attempt, manual, evAttempt = "x.attempt", "a.manual + 1", "x.attempt"
	case m.to != t.Begin:
		attempt, evAttempt = "x.attempt", "x.attempt"
	}
	// The attempt-number guard (see policyBatch): a row changes only in
	// the state and with the count read.
	guarded := "a.state = $7 AND a.attempt = x.attempt"
	if faultinject.Off(faultinject.AttemptGuard) {
		guarded = "TRUE"
	}
	ev := r.cfg.Events.InsertSelect(audit.Columns{
		Kind:  "CASE WHEN x.ok THEN $10 ELSE $11 END",
		Actor: "nullif($12::text, '')", Via: "nullif($17::text, '')", Term: "nullif($13::bigint, 0)",
		RunID: "nullif($9::bigint, 0)", Workflow: "$3", Instance: "x.id", Task: "$4", FromState: "$5",
		ToState: "CASE WHEN x.ok THEN $6 END",
		Attempt: "CASE WHEN x.ok THEN " + evAttempt + " WHEN x.elsewhere THEN x.attempt + 1 ELSE x.attempt END", Reason: "x.reason"}, "res x")
	// How a parked row ends when its instance is not where it was left:
	// an instance in an end state succeeded (a later case of the task
	// counts from 0; ended_parked: nothing of the row ran, statistics
	// count it cancelled), one run again elsewhere counts the retry as
	// made (ranElsewhere), anything else is cancelled.
	elsewhere := "false"
	if m.ranElsewhere {
		elsewhere = "(c.st = $16 OR c.st = $5 AND c.claimed)"
	}
	q := fmt.Sprintf(`WITH due AS MATERIALIZED (
			SELECT a.instance AS id, a.attempt FROM %[6]s AS a
			WHERE a.workflow = $3 AND a.task = $4 AND a.instance = ANY ($1::text[]) AND a.state = $7
		), cur AS MATERIALIZED (
			SELECT t.%[2]s::text AS id, t.%[3]s::text AS st, %[5]s AS claimed FROM %[1]s AS t WHERE t.%[2]s = ANY ($2)
		), moved AS (
			UPDATE %[1]s AS t SET %[3]s = $6 WHERE t.%[2]s = ANY ($2) AND t.%[3]s = $5 AND %[4]s
			  AND t.%[2]s::text IN (SELECT id FROM due)
			RETURNING t.%[2]s::text AS id
		), res AS MATERIALIZED (
			SELECT d.id, d.attempt, m.id IS NOT NULL AS ok, m.id IS NULL AND c.st = ANY ($15::text[]) AS ended,
				m.id IS NULL AND c.id IS NOT NULL AND %[13]s AS elsewhere,
				CASE WHEN m.id IS NOT NULL THEN %[9]s
				     WHEN c.id IS NULL THEN $14 || ': the instance no longer exists'
				     WHEN c.st = ANY ($15::text[]) THEN format('%%s: the instance reached end state %%s', $14, c.st)
				     WHEN %[13]s AND c.st = $16 THEN format('%%s: someone else moved the instance back to %%s: retry %%s runs there (counted as made)', $14, c.st, d.attempt + 1)
				     WHEN %[13]s THEN format('%%s: the instance was claimed by someone else: retry %%s runs there (counted as made)', $14, d.attempt + 1)
				     WHEN c.st <> $5 THEN format('%%s: instance moved to %%s by someone else', $14, c.st)
				     ELSE $14 || ': the instance was claimed by someone else' END AS reason
			FROM due d LEFT JOIN moved m USING (id) LEFT JOIN cur c USING (id)
		), att AS (
			UPDATE %[6]s AS a SET state = CASE WHEN x.ok THEN $8 WHEN x.ended THEN 'succeeded' WHEN x.elsewhere THEN 'retried' ELSE 'cancelled' END,
				attempt = CASE WHEN x.ok THEN %[10]s WHEN x.elsewhere THEN a.attempt + 1 ELSE a.attempt END,
				manual = CASE WHEN x.ok THEN %[11]s ELSE a.manual END,
				last_attempt_at = CASE WHEN x.ok AND $6 = $16 THEN now() ELSE a.last_attempt_at END,
				next_attempt_at = NULL, since = now(), last_reason = x.reason, ended_parked = coalesce(x.ended, false)
			FROM res x
			WHERE a.workflow = $3 AND a.task = $4 AND a.instance = x.id AND %[12]s
			RETURNING 1
		), ev AS (
			%[7]s
		), counted AS (
			UPDATE %[8]s SET done = done + (SELECT count(*) FROM moved) WHERE id = $9
		)
		SELECT count(*) FILTER (WHERE ok), coalesce(array_agg(id ORDER BY id) FILTER (WHERE NOT ok), '{}'),
			coalesce(array_agg(reason ORDER BY id) FILTER (WHERE NOT ok), '{}'), (SELECT count(*) FROM att) FROM res`,
		ti, id, st, pred, claimed, r.attempts, ev, r.runs, m.reason, attempt, manual, guarded, elsewhere)
	var wrote int64
	var gone, why pq.StringArray
	err = tx.QueryRowContext(ctx, q, pq.Array(ids), pq.Array(ids), w.Name, t.Name, m.left, m.to, m.parked, m.done,
		m.run, m.kind, m.cancelKind, m.by.Actor, m.term, m.cancelled, pq.Array(t.Ends), t.Begin, m.by.Via).Scan(&moved, &gone, &why, &wrote)
	if err != nil {
		return 0, nil, fmt.Errorf("%s.%s: move %s instances: %w", w.Name, t.Name, m.parked, err)
	}
	if n := moved + int64(len(gone)); wrote != n && !faultinject.Off(faultinject.AttemptGuard) {
		return 0, nil, fmt.Errorf("%s.%s: %w: %d attempts rows changed", w.Name, t.Name, ErrConflict, n-wrote)
	}
	for i := range gone {
		cancelled = append(cancelled, parkedCancel{gone[i], why[i]})
	}
	return moved, cancelled, nil
}

// parkedCancel is an instance moveParked cancelled instead of moving.
type parkedCancel struct{ instance, reason string }
