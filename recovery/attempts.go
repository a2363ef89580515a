package recovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/faultinject"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/leader"
)

// ErrConflict means an attempts row changed while a batch ran (an operator's
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

// drawn reports whether a scheduled retry's delay is random: some wait
// step's interval is wider than a point, or the backoff has a jitter.
func (st steps) drawn() bool {
	for i, k := range st.kind {
		if k == ActWait && (st.hi[i] != st.lo[i] || st.jitter != 0) {
			return true
		}
	}
	return false
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

// maxErrorText is the characters of an instance's error text kept in its
// attempts row (last_error).
const maxErrorText = 2000

// cursor is where a task's next batch starts: after the last id picked
// (interrupted instances, in id order), or after the last (updated, id)
// picked, from a watermark (failed instances, in updated_column order).
type cursor struct {
	// ids, when not nil: the instances to look at (those whose claims
	// the run expired), instead of all.
	ids []string
	// set: a batch picked before; id is the last it picked (which may
	// be '': the empty id is the least of text ids).
	set bool
	id  string
	// at is the updated_column value (as PostgreSQL prints it) of the last
	// failed instance picked, or the watermark the first batch starts at.
	at string
}

// batchMode says how a repair batch runs. skipLocked: it picks with SKIP
// LOCKED (beside running engines); rowless: an interruption retried at
// once writes only its event, no attempts row (the whole fleet counts
// retries from their events: Config.EventRetries); debug: it returns
// each instance's decision for the debug log; hist: where the retries
// at once of instances without an attempts row are read from.
type batchMode struct {
	skipLocked, rowless, debug bool
	hist                       histWindow
	// maxID: max() takes the ids' type (idColumnOf): the cursor is read
	// with it.
	maxID bool
}

// batchCounts is what one batch did.
type batchCounts struct {
	picked int
	// decided counts the picked instances that were decided; those of
	// them not done were changed between the pick and the write (lost()).
	decided                        int64
	last                           cursor
	retried, waiting, held, failed int64
	// exhausted counts, of failed, those failed for good after max_attempts.
	exhausted int64
	// cursor: the batch wrote its task's first settle cursor, or found
	// one (only a batch that could write it says so: batchSlots.Start).
	cursor bool
}

func (c batchCounts) done() int64 { return c.retried + c.waiting + c.held + c.failed }

// lost counts the instances decided but changed before the batch wrote
// them (moved, or claimed, by an engine since the pick).
func (c batchCounts) lost() int64 { return max(c.decided-c.done(), 0) }

// policyBatch handles one batch of a task's interrupted instances
// (CauseInterrupt) or failed ones (CauseFailure) in tx, in one statement:
// it picks up to BatchSize of them after cursor (unclaimed, in the
// interim, or failed, state, not waiting for a retry or held; a failed one
// only if no decision was made on it since the engine last changed it)
// with their history (historyJoin: the attempts row, else the retries at
// once in the events), decides each by the task's decision table (steps:
// Decide's outcomes; a scheduled retry's delay drawn as Delay draws it),
// moves the instances (re-asserting the predicate: a row changed since the
// pick is left alone), writes their attempts rows where one is kept (a new
// row, or the one read if its count is unchanged: anything else fails the
// whole batch; with m.rowless, an interruption retried at once of an
// instance without a row writes none), one event each, which carries the
// attempt, and counts them in the run.
func (r *Repairer) policyBatch(ctx context.Context, tx *leader.Tx, run int64, w Workflow, t Task, c Cause, tbl *claims.Table, attr attribution, cur cursor, m batchMode) (batchCounts, error) {
	var bc batchCounts
	debug := r.log.Enabled(ctx, slog.LevelDebug)
	m.debug = debug
	q, err := r.renderBatch(w, t, c, tbl, attr, cur, m, run)
	if err != nil {
		return bc, fmt.Errorf("repair batch: %w", err)
	}
	from := t.from(c)
	var want, wrote int64
	var each []byte
	err = tx.QueryRowContext(ctx, q.SQL, q.Args...).Scan(&bc.retried, &bc.waiting, &bc.held, &bc.failed, &bc.exhausted, &want, &wrote, &bc.picked, &bc.decided, &bc.last.id, &bc.last.at, &each, &bc.cursor)
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

// policyBatchSQL is the statement of a repair batch (sql/policy_batch.sql).
var policyBatchSQL = load("policy_batch")

// batchSlots fill policyBatchSQL: what the workflow's configuration, the
// task's policy, the cause and the batch decide of its text.
type batchSlots struct {
	// Table, ID and Status name the instance table and its columns, quoted;
	// Updated and ErrorColumn: its updated and error columns, quoted, or
	// "" (Updated is used for failures only).
	Table, ID, Status, Updated, ErrorColumn string
	// Failure means the cause is a failure (a watermark on Updated), not an
	// interruption (the id order).
	Failure bool
	// Cursor means a batch after the first; IDs: only the instances whose
	// claims the run expired; SkipLocked: a pass beside running engines;
	// Rowless: a first interruption retried at once gets no attempts row
	// (batchMode; a second gets one); Hist: the history window is not empty (the retries
	// at once of instances without a row are read from it); HistRange:
	// its span of event ids is small enough to read it whole
	// (histRangeSpan), not probe it per instance; Start: the task has no
	// settle cursor yet (a batch that writes its first retry at once
	// without a row writes it).
	Cursor, IDs, SkipLocked, Rowless, Hist, HistRange, Start bool
	// MaxID means the cursor of the next batch, the greatest id picked,
	// is read with max() in the pass that counts the pick (interrupted
	// instances of ids whose type max takes), not by sorting the pick.
	MaxID bool
	// Keeps means the decision table leaves some instances where they
	// are (to_state ''): waiting, held, or a failure already failed;
	// Waits: it schedules retries; Drawn: a delay is random (drawn once
	// per instance: steps.drawn).
	Keeps, Waits, Drawn bool
	// Patterns means non-retryable patterns are matched against the error.
	Patterns bool
	// ExpiryNode is the SQL expression of the node whose claim on b
	// expired last ("" when repairs are not attributed); Interruptions:
	// the table they are counted in for failover grades ("" when the run
	// expired no claim).
	ExpiryNode, Interruptions string
	// Again is the SQL condition that the instance of a picked instance
	// p's parked attempts row a ran again since (againSQL);
	// RetriesCounted and Decidable read the row (retriesCountedSQL,
	// decidableSQL); CaseRetries: the retries at once of the picked
	// instances without one (caseRetries).
	Again, RetriesCounted, Decidable, CaseRetries string
	// Sample is a scheduled retry's delay (sampleDelay);
	// NodesSuffix: the reason's endings; Cause: the cause, quoted.
	Sample, NodesSuffix, Cause string
	MaxErrorText               int
	// The sidecar's tables, quoted, and the event kinds, as literals.
	Attempts, Events, Runs, Cursors         string
	KindWait, KindHold, KindRetry, KindFail string
	// KindRepair is the kind of an interruption's repair, whose events
	// hold the retries at once without a row.
	KindRepair                         string
	NoEvents, Debug, Guard, RaceWindow bool
	claims                             *claims.Table
}

// Unclaimed is the unclaimed predicate over the instance row alias
// (TRUE for a workflow without claims).
func (s batchSlots) Unclaimed(alias string) string {
	if s.claims == nil || faultinject.Off(faultinject.Predicate) {
		return "TRUE"
	}
	return s.claims.Unclaimed(alias)
}

// Seconds is the SQL text of the delay ms (an SQL expression, in
// milliseconds, not negative) in seconds to the millisecond, half a
// millisecond rounded up, as waitSuffix (decide.go) writes it: the whole
// milliseconds and their thousandths, as integers (to_char cost a parking
// batch 5%; a cast to bigint alone would round half to even).
func (batchSlots) Seconds(ms string) string {
	r := "floor((" + ms + ") + 0.5)::bigint"
	return "(" + r + " / 1000) || '.' || lpad((" + r + " % 1000)::text, 3, '0')"
}

// renderBatch renders the statement of one repair batch and its
// parameters.
func (r *Repairer) renderBatch(w Workflow, t Task, c Cause, tbl *claims.Table, attr attribution, cur cursor, m batchMode, run int64) (sqltext.Statement, error) {
	p := t.Policy(c)
	patterns := p.NonRetryable
	if w.ErrorColumn == "" {
		patterns = nil
	}
	sl := batchSlots{
		Table: claims.Ident(w.Table), ID: claims.Ident(w.IDColumn), Status: claims.Ident(w.StatusColumn),
		Failure: c == CauseFailure, Cursor: cur.set, IDs: cur.ids != nil, SkipLocked: m.skipLocked, Rowless: m.rowless && c == CauseInterrupt,
		Hist: m.hist.upto > m.hist.after, MaxID: m.maxID && c == CauseInterrupt,
		Patterns: len(patterns) > 0, RetriesCounted: retriesCountedSQL, Decidable: decidableSQL,
		NodesSuffix: pq.QuoteLiteral(nodesSuffix),
		Cause:       pq.QuoteLiteral(string(c)), MaxErrorText: maxErrorText,
		Attempts: r.attempts, Events: r.cfg.Events.Table(), Runs: r.runs, Cursors: r.cursors,
		KindWait: pq.QuoteLiteral(string(audit.KindRetryScheduled)), KindHold: pq.QuoteLiteral(string(audit.KindHeld)),
		KindRetry: pq.QuoteLiteral(string(audit.KindRepair)), KindFail: pq.QuoteLiteral(string(audit.KindRepair)), KindRepair: pq.QuoteLiteral(string(audit.KindRepair)),
		NoEvents: r.noEvents, Debug: m.debug,
		Guard: !faultinject.Off(faultinject.AttemptGuard), RaceWindow: faultinject.Off(faultinject.RaceWindow),
		claims: tbl,
	}
	var err error
	sp := stepsOf(t, c, patterns)
	sl.Keeps, sl.Waits, sl.Drawn = slices.Contains(sp.to, ""), slices.Contains(sp.kind, ActWait), sp.drawn()
	if sl.Sample, err = sampleDelay("s", sl.Drawn); err != nil {
		return sqltext.Statement{}, err
	}
	// The retries at once of the picked instances without an attempts
	// row are read instance by instance (known: a LATERAL probe of a, each
	// instance picked).
	sl.Again = r.againSQL(c, tbl, "p.upd", "a.instance", sqltext.Arg("workflow"), sqltext.Arg("from"))
	if sl.CaseRetries, err = r.caseRetries("= a.id::text"); err != nil {
		return sqltext.Statement{}, err
	}
	if w.ErrorColumn != "" {
		sl.ErrorColumn = claims.Ident(w.ErrorColumn)
	}
	if c == CauseFailure {
		sl.Updated = claims.Ident(w.UpdatedColumn)
		sl.KindRetry, sl.KindFail = pq.QuoteLiteral(string(audit.KindRetried)), pq.QuoteLiteral(string(audit.KindFailed))
	}
	if attr.on {
		sl.ExpiryNode = r.cfg.Events.LatestExpiryNode(sqltext.Arg("workflow"), "b."+sl.ID+"::text", sqltext.Arg("expiry_runs")+"::bigint[]")
	}
	// Only a retry at once can be written without a row: a table without
	// one (strategy none, hold, a delay) never writes the cursor.
	sl.Start = sl.Rowless && !r.noEvents && !m.hist.cursor && slices.Contains(sp.kind, ActRetry)
	args := sqltext.Args{"workflow": w.Name, "task": t.Name, "from": t.from(c), "batch_size": r.cfg.BatchSize, "run": run,
		"known": pq.BoolArray(sp.known), "prev": pq.Int64Array(sp.prev), "match": pq.Int64Array(sp.match),
		"kind": pq.StringArray(sp.kind), "to_state": pq.StringArray(sp.to), "state": pq.StringArray(sp.state),
		"reason": pq.StringArray(sp.reason), "lo": pq.Float64Array(sp.lo), "hi": pq.Float64Array(sp.hi),
		"cap_ms": sp.capMS, "jitter": sp.jitter, "max_attempts": sp.max}
	sl.HistRange = sl.Hist && m.hist.upto-m.hist.after <= histRangeSpan(r.cfg.BatchSize)
	if sl.HistRange {
		args["hist_after"], args["hist_upto"] = m.hist.after, m.hist.upto
	}
	if attr.on {
		args["expiry_runs"] = pq.Int64Array(attr.runs)
	}
	switch {
	case c == CauseFailure:
		args["cursor"] = cur.at
		if cur.set {
			args["cursor_id"] = cur.id
		}
	case cur.set:
		args["cursor"] = cur.id
	}
	if cur.ids != nil {
		args["ids"] = pq.Array(cur.ids)
	}
	if sl.Patterns {
		args["patterns"] = p.pgPatterns()
	}
	if c == CauseInterrupt && len(attr.expired) > 0 {
		sl.Interruptions = r.interruptions
		args["expired"] = pq.Array(attr.expired)
	}
	return policyBatchSQL.Render(sl, args)
}

// historyJoinSQL is the join of an instance row's attempts row
// (sql/history_join.sql), a fragment of the statements that read both.
var historyJoinSQL = load("history_join")

// historyJoin joins to the instance whose id as text is the SQL
// expression instance (of the statement's workflow and task parameters)
// its history as a: its attempts row (tid, attempt, nodes, state, since,
// stamp, and again, whether a parked row's instance ran again since: the
// SQL condition again, from againSQL), or, without one, what the events
// of its retries at once in the current case say (tid NULL, state
// retried).
func (r *Repairer) historyJoin(again, instance string) (string, error) {
	cr, err := r.caseRetries("= " + instance)
	if err != nil {
		return "", err
	}
	f, err := historyJoinSQL.Fragment(struct{ Again, Attempts, Instance, CaseRetries string }{again, r.attempts, instance, cr})
	return strings.TrimRight(f, "\n"), err
}

// caseRetriesSQL is the fragment that reads the retries at once of
// instances without an attempts row from their events
// (sql/case_retries.sql), shared by history_join and policy_batch.
var caseRetriesSQL = load("case_retries")

// caseRetries selects (instance, attempt, nodes, last_at, last_node) of
// the retries at once of the instances whose id as text the SQL
// condition match completes (case_retries.sql).
func (r *Repairer) caseRetries(match string) (string, error) {
	f, err := caseRetriesSQL.Fragment(struct{ Events, Match, KindRepair string }{
		r.cfg.Events.Table(), match, pq.QuoteLiteral(string(audit.KindRepair))})
	return strings.TrimRight(f, "\n"), err
}

// instanceOf is the id of the workflow's instance row b as text, as the
// attempts rows and events hold it.
func instanceOf(w Workflow) string { return "b." + claims.Ident(w.IDColumn) + "::text" }

const (
	// retriesCountedSQL is the retries an instance's attempts row a
	// (historyJoin) counts for its next decision: a case after a success
	// starts again from 0; a retry that waited and was run by someone
	// else (again) counts as made. NULL without a row.
	retriesCountedSQL = `CASE WHEN a.state = 'succeeded' THEN 0 WHEN a.again AND a.state = 'waiting' THEN a.attempt + 1 ELSE a.attempt END`
	// decidableSQL holds when the instance is not parked by its attempts row a, or
	// ran again since it was.
	decidableSQL = `(a.state IS NULL OR a.state NOT IN ('waiting', 'held') OR a.again)`
)

// againSQL is the SQL condition, over a parked attempts row a (waiting or
// held), that its instance ran again since it was parked, for cause c: a
// claim on it expired since while it was in state (an SQL expression;
// workflow: of the workflow's name; instance: the instance's id as text,
// e.g. a.instance), or, for a failure, the engine changed it since (the
// SQL expression updated, its updated_column, is newer than the row and is
// not the stamp the row was decided on). A workflow without claims has no
// sign of an interruption but the state itself: false.
func (r *Repairer) againSQL(c Cause, tbl *claims.Table, updated, instance, workflow, state string) string {
	switch {
	case c == CauseFailure:
		return "(a.since < " + updated + " AND a.stamp IS DISTINCT FROM " + updated + ")"
	case tbl != nil:
		return r.cfg.Events.ExpiredSince(workflow, instance, state, "a.since")
	}
	return "false"
}

// repairedInstance is what a repair batch did to one instance, read only
// for the debug log (the last column of policy_batch.sql).
type repairedInstance struct {
	Instance string `json:"instance"`
	Kind     string `json:"kind"`
	To       string `json:"to"`
	Node     string `json:"node"`
	Attempt  int    `json:"attempt"`
	Reason   string `json:"reason"`
}

// histRangeSpan is the widest history window (in event ids: events of
// every kind, workflow and task) a repair batch of batchSize instances
// reads whole, a range of the events' primary key, rather than probing
// the events' index on instance for each instance it picked: the span
// is known before the statement runs, so the choice does not rest on
// the planner's statistics (stale ones, after a mass interruption on a
// young events table, made it intersect the whole window with every
// probe).
func histRangeSpan(batchSize int) int64 { return 2 * int64(batchSize) }

// actionName of a decision kind, as the repair counts and metrics name it.
var actionName = map[string]string{"retry": "retried", "wait": "scheduled", "hold": "held", "fail": "failed"}

// attribution of a repair batch: on, its events name the node whose claim
// on each instance one of runs (the run and those it resumes) expired
// last; expired lists the instances whose claims this run expired, whose
// repairs are interruptions of those nodes.
type attribution struct {
	on      bool
	runs    []int64
	expired []string
}

// DueResult counts what a due-retry pass did.
type DueResult struct {
	// Retried counts instances moved back to their task's begin state.
	Retried int64
	// Cancelled counts retries whose instance was no longer where it was left.
	Cancelled int64
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
			err := r.st.due.Select(ctx, tx, &rows, sqltext.Args{"workflows": pq.Array(wfNames), "tasks": pq.Array(taskNames), "limit": r.cfg.BatchSize})
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
	moved, gone, err := r.moveParked(ctx, tx, dueMove(w, t, left, c, run), ids)
	return moved, int64(len(gone)), err
}

// dueMove is how moveParked runs the due retries of task t of workflow w
// for cause c, whose instances were left in state left, in run.
func dueMove(w Workflow, t Task, left string, c Cause, run int64) parkedMove {
	return parkedMove{w: w, t: t, left: left, parked: AttemptWaiting, to: t.Begin, done: AttemptRetried, ranElsewhere: true,
		kind: audit.KindRetried, cancelKind: audit.KindRetryCancelled, cancelled: "retry cancelled", run: run,
		reason: what(c), retryOf: t.Policy(c).MaxAttempts}
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
	q, err := r.renderCancelStale(wname, t, ids, why, run)
	if err != nil {
		return 0, fmt.Errorf("cancel retries of %s.%s: %w", wname, t.Name, err)
	}
	var n int64
	err = tx.QueryRowContext(ctx, q.SQL, q.Args...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("cancel retries of %s.%s: %w", wname, t.Name, err)
	}
	return n, nil
}

// cancelStaleSQL is the statement of cancelStale (sql/cancel_stale.sql).
var cancelStaleSQL = load("cancel_stale")

// cancelSlots fill cancelStaleSQL: the sidecar's tables, quoted, and the
// event kind, as a literal.
type cancelSlots struct{ Attempts, Events, Kind string }

// renderCancelStale renders the statement that cancels the waiting
// retries of task t of workflow wname of the instances ids, saying why,
// in run.
func (r *Repairer) renderCancelStale(wname string, t Task, ids []string, why string, run int64) (sqltext.Statement, error) {
	return cancelStaleSQL.Render(cancelSlots{Attempts: r.attempts, Events: r.cfg.Events.Table(), Kind: pq.QuoteLiteral(string(audit.KindRetryCancelled))},
		sqltext.Args{"reason": why, "workflow": wname, "task": t.Name, "instances": pq.Array(ids), "run": run})
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
	// parked is the attempts rows' state (waiting or held); to: where a
	// moved instance goes; done: the rows' state once it moved.
	parked, to, done string
	// manual means an operator's retry, counted in manual (not attempt).
	manual bool
	// ranElsewhere means an instance someone else moved back to begin, or
	// that an engine claimed, runs the task again: the retry counts as
	// made (the row goes retried, its outcome settled as any retry's), so
	// a poison instance moved by hand still runs out of retries.
	ranElsewhere bool
	// kind of a move's event, cancelKind of a cancellation's; cancelled
	// begins a cancellation's reason ("retry cancelled").
	kind, cancelKind audit.Kind
	cancelled        string
	// reason of a move: an operator's, or, with retryOf (a due retry:
	// the policy's max_attempts), the words before "retry n of retryOf"
	// (n: the retry the move makes).
	reason  string
	retryOf int
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
	q, err := r.renderMoveParked(m, ids)
	if err != nil {
		return 0, nil, fmt.Errorf("%s.%s: move %s instances: %w", w.Name, t.Name, m.parked, err)
	}
	var wrote int64
	var gone, why pq.StringArray
	err = tx.QueryRowContext(ctx, q.SQL, q.Args...).Scan(&moved, &gone, &why, &wrote)
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

// moveParkedSQL is the statement of moveParked (sql/move_parked.sql).
var moveParkedSQL = load("move_parked")

// moveSlots fill moveParkedSQL.
type moveSlots struct {
	// Table, ID and Status name the instance table and its columns, quoted;
	// Unclaimed and Claimed: the predicates that an instance row t has no
	// claim, or has one ("" for a workflow without claims).
	Table, ID, Status, Unclaimed, Claimed string
	// Counted means a move is the policy's next retry (attempt + 1); Manual:
	// an operator's retry (manual + 1); RetryOf: the reason says which
	// retry of how many; RanElsewhere: see parkedMove.
	Counted, Manual, RetryOf, RanElsewhere bool
	// Guard switches on the attempt-number guard (off only by fault injection).
	Guard bool
	// The sidecar's tables, quoted.
	Attempts, Events, Runs string
}

// renderMoveParked renders moveParked's statement of m for the instances
// ids and its parameters.
func (r *Repairer) renderMoveParked(m parkedMove, ids []string) (sqltext.Statement, error) {
	w, t := m.w, m.t
	sl := moveSlots{
		Table: claims.Ident(w.Table), ID: claims.Ident(w.IDColumn), Status: claims.Ident(w.StatusColumn),
		Counted: !m.manual && m.to == t.Begin, Manual: m.manual, RetryOf: m.retryOf > 0, RanElsewhere: m.ranElsewhere,
		Guard:    !faultinject.Off(faultinject.AttemptGuard),
		Attempts: r.attempts, Events: r.cfg.Events.Table(), Runs: r.runs,
	}
	if w.Claims != nil {
		sl.Unclaimed, sl.Claimed = w.Claims.Unclaimed("t"), w.Claims.Claimed("t")
	}
	args := sqltext.Args{"workflow": w.Name, "task": t.Name, "instances": pq.Array(ids), "ids": pq.Array(ids),
		"parked": m.parked, "to": m.to, "left_in": m.left, "reason": m.reason, "cancelled": m.cancelled,
		"ends": pq.Array(t.Ends), "begin": t.Begin, "done": m.done, "kind": m.kind, "cancel_kind": m.cancelKind,
		"actor": m.by.Actor, "via": m.by.Via, "term": m.term, "run": m.run}
	if sl.RetryOf {
		args["retry_of"] = m.retryOf
	}
	return moveParkedSQL.Render(sl, args)
}

// parkedCancel is an instance moveParked cancelled instead of moving.
type parkedCancel struct{ instance, reason string }
