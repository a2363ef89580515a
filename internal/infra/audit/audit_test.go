package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
)

var pg *pgtest.Server

func TestMain(m *testing.M) {
	testkit.Main(m, func(m *testing.M) int { return pgtest.Main(m, &pg) })
}

type bundle struct {
	db *sqlx.DB
}

// setup returns the event log of a freshly migrated database.
func setup(t *testing.T) (*Log, bundle) {
	t.Helper()
	return New("enginehealth"), bundle{db: pg.MigratedDB(t)}
}

// write writes e in a transaction of its own.
func write(t *testing.T, l *Log, b bundle, e Event) {
	t.Helper()
	if err := pgdb.InTx(context.Background(), b.db, func(tx *pgdb.Tx) error { return l.Write(context.Background(), tx, e) }); err != nil {
		t.Fatal(err)
	}
}

func list(t *testing.T, l *Log, b bundle, p ListParams) []Event {
	t.Helper()
	es, err := l.List(context.Background(), b.db, p)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func ids(es []Event) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// TestWriteStoresEveryField: what Write stores, List returns, with the
// database clock as its time and NULL for the optional fields left out.
func TestWriteStoresEveryField(t *testing.T) {
	t.Parallel()
	l, b := setup(t)
	term, run, attempt := int64(7), int64(3), 2
	full := Event{Kind: KindRepair, Actor: "node-a", Term: &term, RunID: &run, Node: Str("node-b"),
		Workflow: Str("orders"), Instance: Str("42"), Task: Str("reserve"), FromState: Str("Reserving"),
		ToState: Str("Created"), Attempt: &attempt, Reason: "claim expired", Via: Str("node-c")}
	var before, after time.Time
	if err := b.db.Get(&before, `SELECT clock_timestamp()`); err != nil {
		t.Fatal(err)
	}
	write(t, l, b, full)
	write(t, l, b, Event{Kind: KindNodeRegistered, Actor: "node-a", Node: Str(""), Workflow: Str("")})
	if err := b.db.Get(&after, `SELECT clock_timestamp()`); err != nil {
		t.Fatal(err)
	}

	es := list(t, l, b, ListParams{})
	if len(es) != 2 {
		t.Fatalf("%d events, want 2", len(es))
	}
	got := es[0]
	if got.ID <= 0 || got.At.Before(before) || got.At.After(after) {
		t.Fatalf("id %d at %s, want a positive id at a database time in [%s, %s]", got.ID, got.At, before, after)
	}
	full.ID, full.At = got.ID, got.At
	if fmt.Sprint(deref(got)) != fmt.Sprint(deref(full)) {
		t.Fatalf("listed %v\nwritten %v", deref(got), deref(full))
	}
	bare := es[1]
	if bare.Term != nil || bare.RunID != nil || bare.Node != nil || bare.Workflow != nil || bare.Instance != nil ||
		bare.Task != nil || bare.FromState != nil || bare.ToState != nil || bare.Attempt != nil || bare.Reason != "" || bare.Via != nil {
		t.Fatalf("optional fields not NULL: %v", deref(bare))
	}
	var nulls int
	if err := b.db.Get(&nulls, `SELECT count(*) FROM enginehealth.events WHERE id = $1 AND node IS NULL AND workflow IS NULL`, bare.ID); err != nil || nulls != 1 {
		t.Fatalf("empty optional strings not stored as NULL: %d rows, %v", nulls, err)
	}
}

// deref renders an event with its pointers followed, for comparison.
func deref(e Event) string {
	s := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	i := func(p *int64) string {
		if p == nil {
			return "<nil>"
		}
		return fmt.Sprint(*p)
	}
	a := "<nil>"
	if e.Attempt != nil {
		a = fmt.Sprint(*e.Attempt)
	}
	return fmt.Sprintf("id=%d at=%s kind=%s actor=%s term=%s run=%s node=%s workflow=%s instance=%s task=%s from=%s to=%s attempt=%s reason=%q via=%s",
		e.ID, e.At.UTC().Format(time.RFC3339Nano), e.Kind, e.Actor, i(e.Term), i(e.RunID), s(e.Node), s(e.Workflow), s(e.Instance),
		s(e.Task), s(e.FromState), s(e.ToState), a, e.Reason, s(e.Via))
}

// TestWriteIsPartOfTheCallersTransaction: an event written in a
// transaction that rolls back is gone with the change it recorded.
func TestWriteIsPartOfTheCallersTransaction(t *testing.T) {
	t.Parallel()
	l, b := setup(t)
	undone := errors.New("undone")
	err := pgdb.InTx(context.Background(), b.db, func(tx *pgdb.Tx) error {
		if err := l.Write(context.Background(), tx, Event{Kind: KindNodeAck, Actor: "op", Node: Str("a")}); err != nil {
			return err
		}
		return undone
	})
	if !errors.Is(err, undone) {
		t.Fatalf("transaction: %v", err)
	}
	if es := list(t, l, b, ListParams{}); len(es) != 0 {
		t.Fatalf("a rolled-back event is listed: %v", es)
	}
}

// TestWriteErrorNamesTheKind: a failed insert says which event it was.
func TestWriteErrorNamesTheKind(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	err := New("no_such_schema").Write(context.Background(), b.db, Event{Kind: KindDisruption, Actor: "a"})
	var pqErr *pq.Error
	if err == nil || !strings.HasPrefix(err.Error(), "write disruption event: ") || !errors.As(err, &pqErr) || pqErr.Code != "42P01" {
		t.Fatalf("write into a missing table: %v, want the kind and the driver's undefined_table error", err)
	}
	if _, err := New("no_such_schema").List(context.Background(), b.db, ListParams{}); err == nil || !strings.HasPrefix(err.Error(), "list events: ") {
		t.Fatalf("list of a missing table: %v", err)
	}
}

// TestListFilters: events in id order, filtered by node, after an id, and
// up to a limit (100 by default).
func TestListFilters(t *testing.T) {
	t.Parallel()
	l, b := setup(t)
	for i := range 120 {
		node := []string{"a", "b", ""}[i%3]
		write(t, l, b, Event{Kind: KindNodeStatus, Actor: "m", Node: Str(node), Reason: fmt.Sprint(i)})
	}
	all := list(t, l, b, ListParams{Limit: 1000})
	if len(all) != 120 {
		t.Fatalf("%d events, want 120", len(all))
	}
	for i, e := range all {
		if e.Reason != fmt.Sprint(i) || (i > 0 && e.ID <= all[i-1].ID) {
			t.Fatalf("event %d: %v, not in write and id order", i, deref(e))
		}
	}

	if got := list(t, l, b, ListParams{}); len(got) != 100 || got[0].ID != all[0].ID || got[99].ID != all[99].ID {
		t.Fatalf("default limit: %d events from %v", len(got), ids(got)[:min(3, len(got))])
	}
	if got := list(t, l, b, ListParams{Limit: -1}); len(got) != 100 {
		t.Fatalf("negative limit: %d events, want the default 100", len(got))
	}

	byNode := list(t, l, b, ListParams{Node: "b", Limit: 1000})
	if len(byNode) != 40 {
		t.Fatalf("node b: %d events, want 40", len(byNode))
	}
	for _, e := range byNode {
		if e.Node == nil || *e.Node != "b" {
			t.Fatalf("node filter let through %v", deref(e))
		}
	}
	if got := list(t, l, b, ListParams{Node: "nobody"}); len(got) != 0 {
		t.Fatalf("unknown node: %d events", len(got))
	}

	after := all[49].ID
	page := list(t, l, b, ListParams{AfterID: after, Limit: 10})
	if fmt.Sprint(ids(page)) != fmt.Sprint(ids(all[50:60])) {
		t.Fatalf("after %d limit 10: %v, want %v", after, ids(page), ids(all[50:60]))
	}
	// Paging with the last id seen walks every event once.
	var walked []int64
	for p := (ListParams{Limit: 7}); ; {
		got := list(t, l, b, p)
		if len(got) == 0 {
			break
		}
		walked = append(walked, ids(got)...)
		p.AfterID = got[len(got)-1].ID
	}
	if fmt.Sprint(walked) != fmt.Sprint(ids(all)) {
		t.Fatalf("paging walked %d events, want %d in order", len(walked), len(all))
	}

	combined := list(t, l, b, ListParams{Node: "a", AfterID: after, Limit: 5})
	if len(combined) != 5 {
		t.Fatalf("node a after %d limit 5: %d events", after, len(combined))
	}
	for _, e := range combined {
		if *e.Node != "a" || e.ID <= after {
			t.Fatalf("node a after %d let through %v", after, deref(e))
		}
	}
	if got := list(t, l, b, ListParams{AfterID: all[119].ID}); len(got) != 0 {
		t.Fatalf("after the last id: %d events", len(got))
	}

	// Newest first, paged back in time with the last id seen: every
	// event of the filter once, in descending id order.
	var back []int64
	for p := (ListParams{Node: "b", Newest: true, Limit: 7}); ; {
		got := list(t, l, b, p)
		if len(got) == 0 {
			break
		}
		back = append(back, ids(got)...)
		p.BeforeID = got[len(got)-1].ID
	}
	want := ids(byNode)
	slices.Reverse(want)
	if fmt.Sprint(back) != fmt.Sprint(want) {
		t.Fatalf("newest first, node b: %v, want %v", back, want)
	}
	if got := list(t, l, b, ListParams{Newest: true, BeforeID: all[0].ID}); len(got) != 0 {
		t.Fatalf("before the first id: %d events", len(got))
	}
}

// TestEventsAreAppendOnly: the table refuses to update or delete an event,
// whoever asks.
func TestEventsAreAppendOnly(t *testing.T) {
	t.Parallel()
	l, b := setup(t)
	write(t, l, b, Event{Kind: KindNodeForgotten, Actor: "m", Node: Str("a"), Reason: "gone"})
	before := list(t, l, b, ListParams{})
	for _, stmt := range []string{
		`UPDATE enginehealth.events SET reason = 'rewritten'`,
		`UPDATE enginehealth.events SET node = NULL WHERE node = 'a'`,
		`DELETE FROM enginehealth.events`,
	} {
		_, err := b.db.Exec(stmt)
		var pqErr *pq.Error
		if !errors.As(err, &pqErr) || !strings.Contains(pqErr.Message, "the events table is append-only") {
			t.Errorf("%s: %v, want the append-only refusal", stmt, err)
		}
	}
	if after := list(t, l, b, ListParams{}); len(after) != 1 || deref(after[0]) != deref(before[0]) {
		t.Fatalf("events changed: %v", after)
	}
	write(t, l, b, Event{Kind: KindNodeRegistered, Actor: "m", Node: Str("a")})
	if got := list(t, l, b, ListParams{}); len(got) != 2 {
		t.Fatalf("%d events after a second write, want 2", len(got))
	}
}

// TestRunEvents: events of a run (as the repairs write them, many in one
// statement) leave actor and term to the run and are read back whole;
// an event with neither an actor nor a run is refused.
func TestRunEvents(t *testing.T) {
	t.Parallel()
	l, b := setup(t)
	ctx := context.Background()
	var run int64
	if err := b.db.Get(&run, `INSERT INTO enginehealth.runs (term, master, trigger) VALUES (9, 'node-m', 'manual') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	b.db.MustExec(`INSERT INTO enginehealth.events (kind, run_id, workflow, instance, to_state, reason, via)
		SELECT $1, $2, 'orders', g::text, 'Created', 'r' || g, 'node-v' FROM generate_series(1, 3) g`, KindRepair, run)
	es := list(t, l, b, ListParams{})
	if len(es) != 3 {
		t.Fatalf("%d events, want 3", len(es))
	}
	for i, e := range es {
		if e.Actor != "node-m" || e.Term == nil || *e.Term != 9 || *e.RunID != run || *e.Instance != fmt.Sprint(i+1) ||
			e.Reason != fmt.Sprintf("r%d", i+1) || e.Task != nil || e.Attempt != nil || e.Via == nil || *e.Via != "node-v" {
			t.Fatalf("event %d read back as %+v", i, e)
		}
	}
	var stored int
	if err := b.db.Get(&stored, `SELECT count(*) FROM enginehealth.events WHERE actor IS NULL AND term IS NULL`); err != nil || stored != 3 {
		t.Fatalf("%d events store neither actor nor term (%v), want 3", stored, err)
	}
	if _, err := b.db.ExecContext(ctx, `INSERT INTO enginehealth.events (kind) VALUES ('x')`); err == nil {
		t.Fatal("an event with neither actor nor run was written")
	}
	// The expiry lookup finds the latest expired claim's node of the
	// runs it is given, and none of another run's.
	b.db.MustExec(`INSERT INTO enginehealth.events (kind, run_id, node, workflow, instance)
		SELECT $1, $2, n, 'orders', '7' FROM (VALUES ('a'), ('b')) v(n)`, KindClaimExpired, run)
	var node sql.NullString
	if err := b.db.Get(&node, `SELECT `+l.LatestExpiryNode("'orders'", "'7'", fmt.Sprintf("ARRAY[%d]::bigint[]", run))); err != nil || node.String != "b" {
		t.Fatalf("latest expiry node %v (%v), want b", node, err)
	}
	if err := b.db.Get(&node, `SELECT `+l.LatestExpiryNode("'orders'", "'7'", fmt.Sprintf("ARRAY[%d]::bigint[]", run+1))); err != nil || node.Valid {
		t.Fatalf("latest expiry node of another run %v (%v), want none", node, err)
	}
}

// TestWriteLogsAfterCommit: with a logger, an event is logged at info
// with its fields once its transaction commits, and never when it rolls
// back (a log line says what happened).
func TestWriteLogsAfterCommit(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	var buf strings.Builder
	l := NewLogged("enginehealth", slog.New(slog.NewJSONHandler(&buf, nil)))
	term := int64(7)
	e := Event{Kind: KindNodeStatus, Actor: "n1", Term: &term, Node: Str("n2"), FromState: Str("Ready"), ToState: Str("Not responding"),
		Reason: "no heartbeat for 62s"}

	errRollback := errors.New("rolled back")
	err := pgdb.InTx(context.Background(), b.db, func(tx *pgdb.Tx) error {
		if err := l.Write(context.Background(), tx, e); err != nil {
			return err
		}
		if buf.Len() > 0 {
			t.Errorf("logged before the commit: %s", buf.String())
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) || buf.Len() > 0 {
		t.Fatalf("rolled back (%v): logged %q", err, buf.String())
	}

	write(t, l, b, e)
	var top struct {
		Level, Msg string
		Event      map[string]any
	}
	if err := json.Unmarshal([]byte(buf.String()), &top); err != nil {
		t.Fatalf("%v: %q", err, buf.String())
	}
	if top.Level != "INFO" || top.Msg != "event" {
		t.Errorf("line %s", buf.String())
	}
	line := top.Event
	want := map[string]any{"kind": string(KindNodeStatus), "actor": "n1", "term": 7.0, "node": "n2",
		"from_state": "Ready", "to_state": "Not responding", "reason": "no heartbeat for 62s"}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %v, want %v (line %s)", k, line[k], v, buf.String())
		}
	}
	for _, k := range []string{"workflow", "instance", "task", "attempt", "run_id"} {
		if _, ok := line[k]; ok {
			t.Errorf("%s logged though the event has none: %s", k, buf.String())
		}
	}

	// An event of a run is stored without its master and term (the run
	// has them) but logged with them.
	var run int64
	if err := b.db.Get(&run, `INSERT INTO enginehealth.runs (term, master, trigger) VALUES (9, 'node-m', 'periodic') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	term9 := int64(9)
	write(t, l, b, Event{Kind: KindNodeGrade, RunID: &run, RunActor: "node-m", RunTerm: &term9, Node: Str("n2"),
		FromState: Str("NORMAL"), ToState: Str("WARNING"), Reason: "claim expired"})
	top.Event = nil
	if err := json.Unmarshal([]byte(buf.String()), &top); err != nil || top.Event["actor"] != "node-m" || top.Event["term"] != 9.0 {
		t.Fatalf("run event's line %s (%v)", buf.String(), err)
	}
	var stored int
	if err := b.db.Get(&stored, `SELECT count(*) FROM enginehealth.events WHERE run_id = $1 AND actor IS NULL AND term IS NULL`, run); err != nil || stored != 1 {
		t.Fatalf("run event stored with its master or term: %d (%v)", stored, err)
	}
}

// TestDay: Changes lists the cluster's changes since a time (masters,
// nodes, grades; not the events about instances), oldest first;
// PerMinute counts every event since a time by minute and kind.
func TestDay(t *testing.T) {
	t.Parallel()
	l, b := setup(t)
	ctx := context.Background()
	var since time.Time
	if err := b.db.Get(&since, `SELECT now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	write(t, l, b, Event{Kind: KindNodeStatus, Actor: "m", Node: Str("a"), FromState: Str("Ready"), ToState: Str("Not responding")})
	for range 3 {
		write(t, l, b, Event{Kind: KindRepair, Actor: "m", Workflow: Str("w"), Instance: Str("1")})
	}
	// A grade a run changed: its event names neither actor nor term
	// (the run has them).
	b.db.MustExec(`INSERT INTO enginehealth.runs (id, term, master, kind, trigger, scope) VALUES (77, 9, 'node-m', 'check', 'periodic', '{}');
		INSERT INTO enginehealth.events (kind, run_id, node, from_state, to_state) VALUES ('node_grade', 77, 'a', 'NORMAL', 'WARNING');
		INSERT INTO enginehealth.events (at, kind, actor, node) VALUES (now() - interval '2 hours', 'node_status', 'm', 'old')`)
	cs, err := l.Changes(ctx, b.db, since, 10)
	if err != nil || len(cs) != 2 || cs[0].Kind != KindNodeStatus || cs[1].Kind != KindNodeGrade || cs[1].Actor != "node-m" || cs[1].Term == nil || *cs[1].Term != 9 {
		t.Fatalf("changes: %v, %v", cs, err)
	}
	if cs, err := l.Changes(ctx, b.db, since, 1); err != nil || len(cs) != 1 {
		t.Fatalf("changes, limit 1: %d, %v", len(cs), err)
	}
	ms, err := l.PerMinute(ctx, b.db, since)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[Kind]int64{}
	for _, m := range ms {
		counts[m.Kind] += m.Count
		if d := m.Minute.Sub(since); d < 0 || d%time.Minute != 0 {
			t.Errorf("minute %v is not a whole number of minutes after %v", m.Minute, since)
		}
	}
	if counts[KindRepair] != 3 || counts[KindNodeStatus] != 1 || counts[KindNodeGrade] != 1 {
		t.Fatalf("per minute: %v", counts)
	}
}
