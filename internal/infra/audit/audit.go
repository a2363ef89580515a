// Package audit writes and reads the append-only events table: every repair,
// expiry, status change and operator action, written by the caller inside
// the same transaction as the change it records.
package audit

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// Kind is what an event records (the events table's kind column).
type Kind string

// Event kinds.
const (
	// KindMasterElected and KindMasterLost mean a node took the master's
	// office, or left it (the leader package's fence writes them).
	KindMasterElected    Kind = "master_elected"
	KindMasterLost       Kind = "master_lost"
	KindNodeRegistered   Kind = "node_registered"
	KindNodeStatus       Kind = "node_status"
	KindNodeDeregistered Kind = "node_deregistered"
	KindNodeAck          Kind = "node_ack"
	KindNodeForgotten    Kind = "node_forgotten"
	// KindNodeGrade means a node's failover grade changed (or, capped by
	// max_error_fraction, stayed WARNING for a new signature).
	KindNodeGrade  Kind = "node_grade"
	KindDisruption Kind = "disruption"
	// KindGuardOverride means an operator's check --force ran a pass the
	// disruption guard would have stopped.
	KindGuardOverride Kind = "guard_override"
	// KindPaused and KindResumed mean an operator paused or resumed
	// automatic repair.
	KindPaused       Kind = "paused"
	KindResumed      Kind = "resumed"
	KindRepair       Kind = "instance_repaired"
	KindClaimExpired Kind = "claim_expired"
	// Retry policies (on_interrupt, on_failure).
	KindRetryScheduled Kind = "retry_scheduled"
	KindHeld           Kind = "instance_held"
	KindRetried        Kind = "instance_retried"
	KindRetryCancelled Kind = "retry_cancelled"
	KindHoldDecided    Kind = "hold_decided"
	// KindHoldCancelled means the check closed a hold whose instance is no
	// longer where it was left.
	KindHoldCancelled Kind = "hold_cancelled"
	KindManualRetry   Kind = "manual_retry"
	// KindRetrySucceeded and KindRetryFailed say how a retry ended, as the
	// check found it (the instance reached an end state or went on past
	// the task; the engine failed it).
	KindRetrySucceeded Kind = "retry_succeeded"
	KindRetryFailed    Kind = "retry_failed"
	// KindFailed means an instance an engine failed stays failed for good
	// (its on_failure policy is exhausted, or its error non-retryable).
	KindFailed Kind = "instance_failed"
)

// Kinds are the kinds of events the sidecar writes.
var Kinds = []Kind{KindMasterElected, KindMasterLost, KindNodeRegistered, KindNodeStatus, KindNodeDeregistered, KindNodeAck,
	KindNodeForgotten, KindNodeGrade, KindDisruption, KindGuardOverride, KindPaused, KindResumed, KindRepair, KindClaimExpired,
	KindRetryScheduled, KindHeld, KindRetried, KindRetryCancelled, KindHoldDecided, KindHoldCancelled, KindManualRetry,
	KindRetrySucceeded, KindRetryFailed, KindFailed}

// Valid reports whether k is one of Kinds.
func (k Kind) Valid() bool { return slices.Contains(Kinds, k) }

// String returns the kind as the events table and the API write it.
func (k Kind) String() string { return string(k) }

// Event is one row of the events table. Optional fields are pointers or
// empty strings stored as NULL (null in JSON: every field is sent); an
// event of a run may leave Actor empty and Term nil (the event_log view
// reads them from the run).
type Event struct {
	ID        int64     `db:"id"`
	At        time.Time `db:"at"`
	Kind      Kind      `db:"kind"`
	Actor     string    `db:"actor"`
	Term      *int64    `db:"term"`
	RunID     *int64    `db:"run_id"`
	Node      *string   `db:"node"`
	Workflow  *string   `db:"workflow"`
	Instance  *string   `db:"instance"`
	Task      *string   `db:"task"`
	FromState *string   `db:"from_state"`
	ToState   *string   `db:"to_state"`
	Attempt   *int      `db:"attempt"`
	Reason    string    `db:"reason"`
	// Via is the node that took an operator's request (see By); null on
	// every other event.
	Via *string `db:"via"`
	// RunActor and RunTerm: the master and term of the event's run, when
	// the writer knows them; never stored (the run has them, and
	// event_log reads them back), only logged when Actor and Term are
	// not set.
	RunActor string `db:"-"`
	RunTerm  *int64 `db:"-"`
}

// By is who did an operator's action, as its events record it: Actor
// names the operator ("alice (operator)"); Via is the node that took the
// request from the operator (the node the CLI asked: a request forwarded
// to the master keeps it), "" when the action did not come through a
// node's API.
type By struct {
	Actor, Via string
}

// Args are b as the arguments of a log line: actor, and via when set.
func (b By) Args() []any {
	args := []any{"actor", b.Actor}
	if b.Via != "" {
		args = append(args, "via", b.Via)
	}
	return args
}

// Str returns a pointer to s, or nil when s is empty: the NULL of an
// optional column.
func Str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Log writes events of one schema: other packages write one event
// through Write, many at once in the statement of the change they record
// (recovery's statement templates, into Table), and read them through
// List or LatestExpiryNode.
type Log struct {
	table string
	view  string
	st    statements
	// log, when set, gets one info line per event written through Write
	// once its transaction has committed.
	log *slog.Logger
}

// New returns the event log of the sidecar schema, which logs nothing.
func New(schema string) *Log { return NewLogged(schema, nil) }

// NewLogged returns the event log of the sidecar schema whose Write logs
// each event it writes to log (unless nil), at info, with the event's
// fields, once the transaction commits: node status and grade changes,
// operator actions, master changes. (Instance events written in bulk by
// the repairs' statements are logged by their batch.)
func NewLogged(schema string, log *slog.Logger) *Log {
	t := sqltext.Ident(schema, "events")
	v := sqltext.Ident(schema, "event_log")
	return &Log{table: t, view: v, st: newStatements(t, v), log: log}
}

// Count is a number of events of one kind about one workflow task.
type Count struct {
	Workflow string `db:"workflow"`
	Task     string `db:"task"`
	Kind     Kind   `db:"kind"`
	// To is the state the instances went to, when the kind moves them
	// ("" when it does not).
	To    string `db:"to_state"`
	Count int64  `db:"count"`
}

// RunCounts counts the events of run id about workflow tasks (repairs,
// expiries, retries, holds) by workflow, task, kind and target state;
// from and to bound their time (the run's start and end), so the BRIN
// index on at finds them.
func (l *Log) RunCounts(ctx context.Context, q sqlx.QueryerContext, id int64, from, to time.Time) ([]Count, error) {
	cs := []Count{}
	if err := l.st.runCounts.Select(ctx, q, &cs, sqltext.Args{"run": id, "from": from, "to": to}); err != nil {
		return nil, fmt.Errorf("count the events of run %d: %w", id, err)
	}
	return cs, nil
}

// Changes returns the changes of the cluster since a time (masters,
// node statuses, registrations, grades), oldest first, at most limit.
func (l *Log) Changes(ctx context.Context, q sqlx.QueryerContext, since time.Time, limit int) ([]Event, error) {
	es := []Event{}
	if err := l.st.changes.Select(ctx, q, &es, sqltext.Args{"since": since.UTC(), "limit": limit}); err != nil {
		return nil, fmt.Errorf("read the cluster's changes: %w", err)
	}
	return es, nil
}

// MinuteCount is a number of events of a kind in one minute (Minute is
// its start: a whole number of minutes after PerMinute's since).
type MinuteCount struct {
	Minute time.Time `db:"minute"`
	Kind   Kind      `db:"kind"`
	Count  int64     `db:"count"`
}

// PerMinute counts the events since a time by minute and kind.
func (l *Log) PerMinute(ctx context.Context, q sqlx.QueryerContext, since time.Time) ([]MinuteCount, error) {
	cs := []MinuteCount{}
	if err := l.st.perMinute.Select(ctx, q, &cs, sqltext.Args{"since": since.UTC()}); err != nil {
		return nil, fmt.Errorf("count the events by minute: %w", err)
	}
	return cs, nil
}

// utc is *t in UTC (lib/pq sends a time's own offset, and PostgreSQL
// takes offsets up to ±15:59 only), or nil.
func utc(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC()
}

// LastID returns the id of the newest event (0 when none): it only
// grows, so it counts the events ever written.
func (l *Log) LastID(ctx context.Context, q sqlx.QueryerContext) (int64, error) {
	var id int64
	if err := l.st.lastID.Get(ctx, q, &id, nil); err != nil {
		return 0, fmt.Errorf("read the last event id: %w", err)
	}
	return id, nil
}

// Table is the events table's quoted name, for statements that write
// events with a template of their own.
func (l *Log) Table() string { return l.table }

// LatestExpiryNode returns an SQL expression: the node of the latest
// claim_expired event about instance of workflow written by one of the
// runs (SQL expressions; runs a bigint[]), or NULL. The partial index
// of expired claims serves it.
func (l *Log) LatestExpiryNode(workflow, instance, runs string) string {
	return fragment(latestExpirySQL, latestExpirySlots{Events: l.table, Workflow: workflow, Instance: instance, Runs: runs})
}

// ExpiredSince returns an SQL condition, over SQL expressions of a
// workflow name, an instance id as text, a state and a time: a claim on
// the instance expired after that time while it was in that state (a
// claim_expired event says so; the partial index of expired claims finds
// it).
func (l *Log) ExpiredSince(workflow, instance, state, since string) string {
	return fragment(expiredSinceSQL, expiredSinceSlots{Events: l.table, Workflow: workflow, Instance: instance, State: state, Since: since})
}

// Write inserts e with the database clock as its time. Pass the transaction
// of the change e records.
//
// With a logger (NewLogged), the event is logged once tx commits, when tx
// can say so (a pgdb.Tx or a fenced leader.Tx); otherwise at once.
func (l *Log) Write(ctx context.Context, tx sqlx.ExtContext, e Event) error {
	if _, err := l.st.write.Exec(ctx, tx, e.args()); err != nil {
		return fmt.Errorf("write %s event: %w", e.Kind, err)
	}
	if l.log == nil {
		return nil
	}
	logIt := func() {
		l.log.LogAttrs(ctx, slog.LevelInfo, "event", slog.Attr{Key: "event", Value: slog.GroupValue(e.LogAttrs()...)})
	}
	if c, ok := tx.(interface{ AfterCommit(func()) }); ok {
		c.AfterCommit(logIt)
	} else {
		logIt()
	}
	return nil
}

// args returns e's columns as write's parameters, named as its db tags name them.
func (e Event) args() sqltext.Args {
	return sqltext.Args{"kind": e.Kind, "actor": e.Actor, "term": e.Term, "run_id": e.RunID, "node": e.Node,
		"workflow": e.Workflow, "instance": e.Instance, "task": e.Task, "from_state": e.FromState,
		"to_state": e.ToState, "attempt": e.Attempt, "reason": e.Reason, "via": e.Via}
}

// LogAttrs are the event's fields as log attributes, named as in its JSON
// (the fields it does not have are left out; its time is the log line's).
// Write logs them in a group "event", apart from the line's own node.
func (e Event) LogAttrs() []slog.Attr {
	as := []slog.Attr{slog.String("kind", string(e.Kind)), slog.String("actor", cmp.Or(e.Actor, e.RunActor))}
	if t := cmp.Or(e.Term, e.RunTerm); t != nil {
		as = append(as, slog.Int64("term", *t))
	}
	if e.RunID != nil {
		as = append(as, slog.Int64("run_id", *e.RunID))
	}
	for _, f := range []struct {
		key string
		v   *string
	}{{"node", e.Node}, {"workflow", e.Workflow}, {"instance", e.Instance}, {"task", e.Task}, {"from_state", e.FromState}, {"to_state", e.ToState}, {"via", e.Via}} {
		if f.v != nil {
			as = append(as, slog.String(f.key, *f.v))
		}
	}
	if e.Attempt != nil {
		as = append(as, slog.Int("attempt", *e.Attempt))
	}
	return append(as, slog.String("reason", e.Reason))
}

// DefaultListLimit of List.
const DefaultListLimit = 100

// ListParams filters List.
type ListParams struct {
	// Node, when set, keeps the events about that node.
	Node string
	// Workflow and Instance, when set, keep the events about that
	// workflow, and instance (the hash index on instance finds them).
	Workflow, Instance string
	// Kind, when set, keeps the events of that kind.
	Kind Kind
	// Since and Until, when set, keep the events at or after Since and
	// before Until.
	Since, Until *time.Time
	// RunID, when set, keeps the events of that run.
	RunID int64
	// AfterID keeps events with a larger id (for paging and tailing).
	AfterID int64
	// Newest returns the newest events first; BeforeID, when set, keeps
	// events with a smaller id (paging back in time: the next page is
	// BeforeID set to the last id returned).
	Newest   bool
	BeforeID int64
	// Limit of rows; default 100.
	Limit int
	// MaxTextBytes, when set, ends the page early once the text of its
	// events adds up to more (the first event is always returned): an
	// answer's size is bounded whatever the events hold. Page on with
	// AfterID (or BeforeID, with Newest) set to the last id returned.
	MaxTextBytes int
}

// List returns events in id order (newest first with Newest).
func (l *Log) List(ctx context.Context, db sqlx.QueryerContext, p ListParams) ([]Event, error) {
	st, err := listSQL.Render(l.listArgs(p))
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	var es []Event
	if err := sqlx.SelectContext(ctx, db, &es, st.SQL, st.Args...); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return es, nil
}

// listArgs returns the slots of List's statement (the filters p sets
// switched on) and its parameters.
func (l *Log) listArgs(p ListParams) (listSlots, sqltext.Args) {
	if p.Limit <= 0 {
		p.Limit = DefaultListLimit
	}
	maxBytes := int64(p.MaxTextBytes)
	if maxBytes <= 0 {
		maxBytes = math.MaxInt64
	}
	args := sqltext.Args{"after_id": p.AfterID, "limit": p.Limit, "max_bytes": maxBytes}
	slots := listSlots{EventLog: l.view, Newest: p.Newest}
	filter := func(on *bool, set bool, name string, v any) {
		if *on = set; set {
			args[name] = v
		}
	}
	filter(&slots.Node, p.Node != "", "node", p.Node)
	filter(&slots.Workflow, p.Workflow != "", "workflow", p.Workflow)
	filter(&slots.Instance, p.Instance != "", "instance", p.Instance)
	filter(&slots.Kind, p.Kind != "", "kind", p.Kind)
	filter(&slots.RunID, p.RunID != 0, "run_id", p.RunID)
	filter(&slots.Since, p.Since != nil, "since", utc(p.Since))
	filter(&slots.Until, p.Until != nil, "until", utc(p.Until))
	filter(&slots.Before, p.BeforeID != 0, "before_id", p.BeforeID)
	return slots, args
}
