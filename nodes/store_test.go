package nodes

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/faultproxy"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
)

var pg *pgtest.Server

func TestMain(m *testing.M) {
	testkit.Main(m, func(m *testing.M) int { return pgtest.Main(m, &pg) })
}

type bundle struct {
	db     *sqlx.DB
	events *audit.Log
}

func setup(t *testing.T) (*Store, bundle) {
	t.Helper()
	db := pg.MigratedDB(t)
	events := audit.New("enginehealth")
	return testkit.Must(NewStore(StoreConfig{DB: db, Schema: "enginehealth", Events: events})), bundle{db: db, events: events}
}

func reg(name string) Registration {
	return Registration{Name: name, Incarnation: uuid.NewString(), Hostname: "host-" + name, Version: "test", APIAddress: "127.0.0.1:1"}
}

func events(t *testing.T, b bundle, node string) []audit.Event {
	t.Helper()
	es, err := b.events.List(context.Background(), b.db, audit.ListParams{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func TestRegisterNewNodeIsRecovering(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	r := reg("a")
	n, err := s.Register(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if n.Status != StatusRecovering || n.Incarnation != r.Incarnation || n.PreviousIncarnation != nil || n.IsMaster {
		t.Fatalf("got %+v", n)
	}
	es := events(t, b, "a")
	if len(es) != 1 || es[0].Kind != audit.KindNodeRegistered || *es[0].ToState != string(StatusRecovering) {
		t.Fatalf("events: %+v", es)
	}
}

func TestRegisterAfterCrashIsUnexpectedShutdown(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	first := reg("a")
	if _, err := s.Register(ctx, first); err != nil {
		t.Fatal(err)
	}
	// The process dies without Deregister; a new one starts under the name.
	second := reg("a")
	n, err := s.Register(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if n.Status != StatusUnexpectedShutdown {
		t.Fatalf("status %q, want %q", n.Status, StatusUnexpectedShutdown)
	}
	if n.Incarnation != second.Incarnation || n.PreviousIncarnation == nil || *n.PreviousIncarnation != first.Incarnation {
		t.Fatalf("incarnations not recorded: %+v", n)
	}
	es := events(t, b, "a")
	if len(es) != 2 {
		t.Fatalf("want 2 events, got %+v", es)
	}
	e := es[1]
	if e.Kind != audit.KindNodeStatus || *e.FromState != string(StatusRecovering) || *e.ToState != string(StatusUnexpectedShutdown) || e.Reason == "" {
		t.Fatalf("status change event: %+v", e)
	}
	// The old incarnation can no longer heartbeat or deregister.
	if _, err := s.Heartbeat(ctx, "a", first.Incarnation); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("old incarnation heartbeat: %v, want ErrNotRegistered", err)
	}
}

func TestHeartbeatUsesDatabaseClock(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	r := reg("a")
	if _, err := s.Register(ctx, r); err != nil {
		t.Fatal(err)
	}
	// The host clock of this process is two hours ahead.
	skew := 2 * time.Hour
	h := testkit.Must(NewHeartbeater(HeartbeatConfig{Store: s, Name: r.Name, Incarnation: r.Incarnation, Interval: time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	h.now = func() time.Time { return time.Now().Add(skew) }

	before, err := s.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the database clock has moved past the registration.
	testkit.Eventually(t, 5*time.Second, "the database clock moved", func() (bool, error) {
		var moved bool
		err := b.db.Get(&moved, `SELECT now() > $1`, before.LastActive)
		return moved, err
	})
	if err := h.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	var dbNow time.Time
	if err := b.db.Get(&dbNow, `SELECT now()`); err != nil {
		t.Fatal(err)
	}
	after, err := s.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if !after.LastActive.After(before.LastActive) {
		t.Fatalf("last_active did not advance: %s → %s", before.LastActive, after.LastActive)
	}
	if d := dbNow.Sub(after.LastActive); d < 0 || d > 5*time.Second {
		t.Fatalf("last_active %s is not the database clock (db now %s)", after.LastActive, dbNow)
	}
	if !h.LastActive().Equal(after.LastActive) {
		t.Fatalf("Heartbeater.LastActive %s, record %s", h.LastActive(), after.LastActive)
	}
	if after.SecondsSinceActive > 5 {
		t.Fatalf("seconds_since_active %v: staleness must be computed on the database clock", after.SecondsSinceActive)
	}
	if err := h.Healthy(time.Minute); err != nil {
		t.Fatalf("healthy right after a beat: %v", err)
	}
}

func TestHeartbeaterReportsLostRecord(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	r := reg("a")
	if _, err := s.Register(ctx, r); err != nil {
		t.Fatal(err)
	}
	h := testkit.Must(NewHeartbeater(HeartbeatConfig{Store: s, Name: r.Name, Incarnation: r.Incarnation, Interval: 50 * time.Millisecond, Timeout: 5 * time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	if err := h.Healthy(time.Minute); err == nil {
		t.Fatal("healthy before any beat")
	}
	// Another process takes the name.
	if _, err := s.Register(ctx, reg("a")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegistered) {
			t.Fatalf("Run returned %v, want ErrNotRegistered", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop after losing its record")
	}
}

// TestHeartbeaterRestoresLostRegistration: a database that lost this
// incarnation's registration (a failover to a replica that had not
// received it: the record is gone, or back to the incarnation before)
// gets it again from the next beat, in the status the node last saw, with
// an event; the process goes on. A record a later process took still
// ends it (TestHeartbeaterReportsLostRecord).
func TestHeartbeaterRestoresLostRegistration(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	old := reg("a")
	if _, err := s.Register(ctx, old); err != nil {
		t.Fatal(err)
	}
	r := reg("a") // the previous run did not shut down cleanly
	n, err := s.Register(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if n.PreviousIncarnation == nil || *n.PreviousIncarnation != old.Incarnation || n.Status != StatusUnexpectedShutdown {
		t.Fatalf("registered %+v, want Unexpected shutdown after %s", n, old.Incarnation)
	}
	var logs testkit.Buffer
	h := testkit.Must(NewHeartbeater(HeartbeatConfig{Store: s, Name: r.Name, Incarnation: r.Incarnation, Interval: 50 * time.Millisecond, Timeout: 5 * time.Second,
		Registration: &r, Registered: n, Log: slog.New(slog.NewTextHandler(&logs, nil))}))
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	// An operator acks it; the node sees its new status.
	if _, err := s.Ack(ctx, "a", audit.By{Actor: "op"}, "checked"); err != nil {
		t.Fatal(err)
	}
	seen, err := h.WaitFor(ctx, func(s Status) bool { return s != StatusUnexpectedShutdown })
	if err != nil {
		t.Fatal(err)
	}
	current := func() Node {
		t.Helper()
		got, err := s.Get(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	restored := func(what string) {
		t.Helper()
		testkit.Eventually(t, 10*time.Second, "the registration restored after "+what, func() (bool, error) {
			got, err := s.Get(ctx, "a")
			return err == nil && got.Incarnation == r.Incarnation, nil
		})
		if got := current(); got.Status != seen {
			t.Fatalf("restored after %s in %s, want %s (what the node last saw)", what, got.Status, seen)
		}
		select {
		case err := <-done:
			t.Fatalf("Run ended after %s: %v", what, err)
		default:
		}
	}

	// The database went back to the record before this registration.
	b.db.MustExec(`UPDATE enginehealth.nodes SET incarnation = $1, previous_incarnation = NULL, status = $2 WHERE name = 'a'`,
		old.Incarnation, StatusNotResponding)
	restored("the record went back to the incarnation before")
	if got := current(); got.PreviousIncarnation == nil || *got.PreviousIncarnation != old.Incarnation {
		t.Fatalf("restored record's previous incarnation %v, want %s", got.PreviousIncarnation, old.Incarnation)
	}
	// The record is gone.
	b.db.MustExec(`DELETE FROM enginehealth.nodes WHERE name = 'a'`)
	restored("the record was lost")
	// The record is an earlier run's that this registration did not
	// replace: its clean stop (which deleted the record) was lost too.
	b.db.MustExec(`UPDATE enginehealth.nodes SET incarnation = gen_random_uuid(), previous_incarnation = NULL, status = $1,
		active_since = now() - interval '1 minute' WHERE name = 'a'`, StatusReady)
	restored("the record went back to an earlier run's")

	var reasons []string
	for _, e := range events(t, b, "a") {
		if strings.Contains(e.Reason, "registration restored") {
			reasons = append(reasons, string(e.Kind)+": "+e.Reason)
		}
	}
	slices.Sort(reasons)
	if len(reasons) != 3 || !strings.HasPrefix(reasons[0], string(audit.KindNodeRegistered)) || !strings.HasPrefix(reasons[1], string(audit.KindNodeStatus)) ||
		!strings.HasPrefix(reasons[2], string(audit.KindNodeStatus)) {
		t.Fatalf("restore events %q, want one node_status and one node_registered", reasons)
	}
	if got := strings.Count(logs.String(), "the database had lost this node's registration"); got != 3 {
		t.Fatalf("the log says %d times that the registration was lost, want 3:\n%s", got, logs.String())
	}

	// A later process takes the name: this one stops, saying which.
	later := reg("a")
	later.Hostname = "elsewhere"
	if _, err := s.Register(ctx, later); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegistered) || !strings.Contains(err.Error(), later.Incarnation) || !strings.Contains(err.Error(), "on host elsewhere") {
			t.Fatalf("Run returned %v, want ErrNotRegistered naming the later run", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop after a later process took the name")
	}
}

func TestDeregisterDeletesWithEvent(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	r := reg("a")
	if _, err := s.Register(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.Deregister(ctx, r.Name, r.Incarnation, "clean shutdown"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("record still there: %v", err)
	}
	es := events(t, b, "a")
	last := es[len(es)-1]
	if last.Kind != audit.KindNodeDeregistered || *last.FromState != string(StatusRecovering) || last.Reason != "clean shutdown" {
		t.Fatalf("event: %+v", last)
	}
	// A clean restart is a new node again.
	n, err := s.Register(ctx, reg("a"))
	if err != nil || n.Status != StatusRecovering {
		t.Fatalf("re-register after clean shutdown: %+v %v", n, err)
	}
	if err := s.Deregister(ctx, r.Name, r.Incarnation, "again"); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("deregister of a stale incarnation: %v, want ErrNotRegistered", err)
	}
}

// A clean stop is not an ack: a record in Unexpected shutdown outlives it,
// and the next start finds it still awaiting the operator.
func TestDeregisterKeepsUnackedRecord(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	if _, err := s.Register(ctx, reg("a")); err != nil {
		t.Fatal(err)
	}
	crashed := reg("a") // the first run died; this one finds its record
	n, err := s.Register(ctx, crashed)
	if err != nil || n.Status != StatusUnexpectedShutdown {
		t.Fatalf("register after crash: %+v %v", n, err)
	}
	why := n.StatusReason
	if err := s.Deregister(ctx, crashed.Name, crashed.Incarnation, "clean shutdown"); !errors.Is(err, ErrAwaitingAck) {
		t.Fatalf("deregister of an un-acked record: %v, want ErrAwaitingAck", err)
	}
	got, err := s.Get(ctx, "a")
	if err != nil || got.Status != StatusUnexpectedShutdown || got.IsMaster {
		t.Fatalf("record after clean stop: %+v %v", got, err)
	}
	es := events(t, b, "a")
	if last := es[len(es)-1]; last.Kind != audit.KindNodeStatus || !strings.Contains(last.Reason, "until an operator acks") {
		t.Fatalf("event of the kept record: %+v", last)
	}
	restarted := reg("a")
	n, err = s.Register(ctx, restarted)
	if err != nil || n.Status != StatusUnexpectedShutdown || n.StatusReason != why {
		t.Fatalf("restart while awaiting ack: %+v %v (reason want %q)", n, err, why)
	}
	es = events(t, b, "a")
	if last := es[len(es)-1]; *last.FromState != string(StatusUnexpectedShutdown) || *last.ToState != string(StatusUnexpectedShutdown) ||
		!strings.Contains(last.Reason, "awaiting an operator ack") {
		t.Fatalf("event of the restart: %+v", last)
	}
	// After the ack, a clean stop deletes the record as usual.
	if _, err := s.Ack(ctx, "a", audit.By{Actor: "op"}, "checked the host"); err != nil {
		t.Fatal(err)
	}
	if err := s.Deregister(ctx, restarted.Name, restarted.Incarnation, "clean shutdown"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("record after acked clean stop: %v", err)
	}
}

func TestListAndGet(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	for _, name := range []string{"c", "a", "b"} {
		if _, err := s.Register(ctx, reg(name)); err != nil {
			t.Fatal(err)
		}
	}
	ns, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 3 || ns[0].Name != "a" || ns[2].Name != "c" {
		t.Fatalf("list: %+v", ns)
	}
	n, err := s.Get(ctx, "b")
	if err != nil || n.Hostname != "host-b" || n.FailoverGrade != "NORMAL" {
		t.Fatalf("get: %+v %v", n, err)
	}
	if _, err := s.Get(ctx, "zzz"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
}

func TestRegisterAfterCrashCanRecover(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	first := reg("a")
	if _, err := s.Register(ctx, first); err != nil {
		t.Fatal(err)
	}
	second := reg("a")
	second.RecoverAfterCrash = true
	n, err := s.Register(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if n.Status != StatusRecovering || n.PreviousIncarnation == nil || *n.PreviousIncarnation != first.Incarnation {
		t.Fatalf("with RecoverAfterCrash: %+v", n)
	}
	es := events(t, b, "a")
	if last := es[len(es)-1]; last.Kind != audit.KindNodeStatus || !strings.Contains(last.Reason, "without a clean shutdown") {
		t.Fatalf("the restart is not recorded: %+v", last)
	}
}

// TestMasterFlag: ClearMaster clears only its own incarnation's flag and
// says whether it cleared anything.
func TestMasterFlag(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	a, c := reg("a"), reg("c")
	for _, r := range []Registration{a, c} {
		if _, err := s.Register(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	flagged := func() []string {
		var names []string
		if err := b.db.Select(&names, `SELECT name FROM enginehealth.nodes WHERE is_master ORDER BY name`); err != nil {
			t.Fatal(err)
		}
		return names
	}
	inTx := func(fn func(tx *pgdb.Tx) error) {
		t.Helper()
		if err := pgdb.InTx(ctx, b.db, fn); err != nil {
			t.Fatal(err)
		}
	}
	// SetMaster runs in a fenced transaction (leader's tests take office
	// with it); here the flag is set as it leaves it.
	b.db.MustExec(`UPDATE enginehealth.nodes SET is_master = (name = 'c')`)
	for _, want := range []bool{false, true, false} {
		r := a
		if want {
			r = c
		}
		inTx(func(tx *pgdb.Tx) error {
			changed, err := s.ClearMaster(ctx, tx, r.Name, r.Incarnation)
			if err == nil && changed != want {
				t.Errorf("ClearMaster(%s) changed %v, want %v", r.Name, changed, want)
			}
			return err
		})
	}
	if got := flagged(); len(got) != 0 {
		t.Fatalf("flagged %v after clearing", got)
	}
}

// TestHeartbeatCarriesGrade: each beat returns the node's failover grade
// (NORMAL when never graded), which /readyz uses with error_not_ready.
func TestHeartbeatCarriesGrade(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	r := reg("g")
	if _, err := s.Register(ctx, r); err != nil {
		t.Fatal(err)
	}
	beat, err := s.Heartbeat(ctx, r.Name, r.Incarnation)
	if err != nil || beat.Grade != GradeNormal {
		t.Fatalf("beat of a node never graded: %+v, %v", beat, err)
	}
	b.db.MustExec(`INSERT INTO enginehealth.node_grades (node, grade) VALUES ('g', 'ERROR')`)
	h := testkit.Must(NewHeartbeater(HeartbeatConfig{Store: s, Name: r.Name, Incarnation: r.Incarnation, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	if err := h.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if h.Grade() != GradeError {
		t.Fatalf("heartbeater grade %q", h.Grade())
	}
	if ready, _ := Readiness(h.Status(), h.Grade(), true); ready {
		t.Fatal("ERROR node ready with error_not_ready")
	}
}

// TestGradeChangedAtOnlyAfterAChange: a node the grader looked at (its
// node_grades row exists) but never graded shows no grade_changed_at
// (outside review: a node whose only interruption was of a poison instance
// showed "NORMAL since …" with no event behind it).
func TestGradeChangedAtOnlyAfterAChange(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	if _, err := s.Register(ctx, reg("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Exec(`INSERT INTO enginehealth.node_grades (node) VALUES ('a')`); err != nil {
		t.Fatal(err)
	}
	n, err := s.Get(ctx, "a")
	if err != nil || n.GradeChangedAt != nil || n.FailoverGrade != GradeNormal {
		t.Fatalf("never graded: %+v %v, want NORMAL with no grade_changed_at", n, err)
	}
	if _, err := b.db.Exec(`UPDATE enginehealth.node_grades SET grade = 'WARNING', rule = 'interrupted', changed_at = now() WHERE node = 'a'`); err != nil {
		t.Fatal(err)
	}
	if n, err = s.Get(ctx, "a"); err != nil || n.GradeChangedAt == nil {
		t.Fatalf("graded: %+v %v, want a grade_changed_at", n, err)
	}
}

// TestHeartbeatResumed: Resumed says when beats succeeded again after
// failing (the database was unavailable to the node), and stays zero
// while none failed.
func TestHeartbeatResumed(t *testing.T) {
	t.Parallel()
	dsn := pg.NewDatabase(t)
	open := func() *sqlx.DB {
		db, err := pgdb.Open(pgdb.Config{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db := open()
	if _, err := pgdb.Migrate(context.Background(), db, pgdb.DefaultSchema); err != nil {
		t.Fatal(err)
	}
	s := testkit.Must(NewStore(StoreConfig{DB: db, Schema: "enginehealth", Events: audit.New("enginehealth")}))
	// The lock is another process's: a beat that gives up closes its own
	// pool's connections.
	b := bundle{db: open()}
	ctx := context.Background()
	r := reg("a")
	if _, err := s.Register(ctx, r); err != nil {
		t.Fatal(err)
	}
	h := testkit.Must(NewHeartbeater(HeartbeatConfig{Store: s, Name: r.Name, Incarnation: r.Incarnation, Interval: 100 * time.Millisecond, Timeout: 2 * time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	if err := h.Beat(ctx); err != nil || !h.Resumed().IsZero() {
		t.Fatalf("first beat: %v, resumed %v; want no error, zero", err, h.Resumed())
	}
	// The row locked by another session: the beat times out, as when
	// the database does not answer.
	tx := b.db.MustBegin()
	tx.MustExec(`SELECT 1 FROM enginehealth.nodes WHERE name = 'a' FOR UPDATE`)
	if err := h.Beat(ctx); err == nil {
		t.Fatal("a beat on a locked record succeeded")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if err := h.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.Resumed(); got.Before(before) || got.After(time.Now()) {
		t.Fatalf("Resumed = %v, want the time of the beat after the failure (after %v)", got, before)
	}
}

// TestHeartbeatBoundedWhenTheServerStops: a beat whose server stops
// answering (a frozen primary: the connection stays open, nothing comes
// back) returns at its timeout, not when the driver's read deadline
// ends (statement timeout + connect timeout); no more than two beats wait
// at once; and once the address leads to a server that answers, the next
// beat succeeds at once (the connections to the silent one were closed).
func TestHeartbeatBoundedWhenTheServerStops(t *testing.T) {
	t.Parallel()
	dsn := pg.NewDatabase(t)
	addr := pg.Addr()
	proxy := faultproxy.New(t, addr)
	db, err := pgdb.Open(pgdb.Config{DSN: strings.Replace(dsn, addr, proxy.Addr, 1), ConnectTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := pgdb.Migrate(context.Background(), db, pgdb.DefaultSchema); err != nil {
		t.Fatal(err)
	}
	s := testkit.Must(NewStore(StoreConfig{DB: db, Schema: "enginehealth", Events: audit.New("enginehealth")}))
	ctx := context.Background()
	r := reg("a")
	if _, err := s.Register(ctx, r); err != nil {
		t.Fatal(err)
	}
	// A second pool to the same server, the API's: the beat that finds
	// the server silent closes its connections too (Reset).
	apiDB, err := pgdb.Open(pgdb.Config{DSN: strings.Replace(dsn, addr, proxy.Addr, 1), ConnectTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { apiDB.Close() })
	h := testkit.Must(NewHeartbeater(HeartbeatConfig{Store: s, Name: r.Name, Incarnation: r.Incarnation, Interval: 100 * time.Millisecond,
		Timeout: 500 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Reset: func() { pgdb.Reset(db); pgdb.Reset(apiDB) }}))
	if err := h.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if err := apiDB.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() { // an API read on its pooled connection, which waits
		_, err := apiDB.ExecContext(ctx, "SELECT 1")
		read <- err
	}()
	for i := range 3 {
		start := time.Now()
		err := h.Beat(ctx)
		if took := time.Since(start); err == nil || took > 5*time.Second {
			t.Fatalf("beat %d with the server silent: %v after %s; want an error at its 500 ms timeout, not the read deadline (31 s)", i, err, took)
		}
		// Its statement ended too: the pool's connections were closed,
		// none is left waiting for the read deadline.
		testkit.Eventually(t, 5*time.Second, "the beat's statement ended", func() (bool, error) { return h.inflight.Load() == 0, nil })
	}
	select {
	case err := <-read:
		if err == nil {
			t.Fatal("the API's read through the silent path succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the API's read still waits for the silent server after the beats closed the pools")
	}
	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "a beat through the restored path", func() (bool, error) { return h.Beat(ctx) == nil, nil })
}

// TestRestoreChecksTheCluster: a record missing because the server is of
// another cluster (a pooler moved its connections there) is not written
// there: Restore checks the server first.
func TestRestoreChecksTheCluster(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	r := reg("a")
	n, err := s.Register(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	b.db.MustExec(`DELETE FROM enginehealth.nodes WHERE name = 'a'`)
	other := pgtest.New(t)
	cluster := pgdb.NewCluster("enginehealth", nil)
	if err := cluster.Learn(ctx, other.MigratedDB(t)); err != nil {
		t.Fatal(err)
	}
	s = testkit.Must(NewStore(StoreConfig{DB: b.db, Schema: "enginehealth", Events: b.events, Cluster: cluster}))
	var wrong *pgdb.WrongClusterError
	if _, err := s.Restore(ctx, r, n, StatusReady); !errors.As(err, &wrong) {
		t.Fatalf("Restore on another cluster than learnt: %v, want a *pgdb.WrongClusterError", err)
	}
	if _, err := s.Get(ctx, "a"); err == nil {
		t.Fatal("the record was written on another cluster than learnt")
	}
}

// TestRestoreKeepsTheCrashAwaitingAck: a node in Unexpected shutdown whose
// record the database lost comes back awaiting the same ack, with the
// crash it awaits it for (the previous incarnation and the reason).
func TestRestoreKeepsTheCrashAwaitingAck(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	old := reg("a")
	if _, err := s.Register(ctx, old); err != nil {
		t.Fatal(err)
	}
	r := reg("a")
	n, err := s.Register(ctx, r)
	if err != nil || n.Status != StatusUnexpectedShutdown {
		t.Fatalf("registered %+v (%v), want Unexpected shutdown", n, err)
	}
	b.db.MustExec(`DELETE FROM enginehealth.nodes WHERE name = 'a'`)
	got, err := s.Restore(ctx, r, n, StatusUnexpectedShutdown)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != StatusUnexpectedShutdown || got.PreviousIncarnation == nil || *got.PreviousIncarnation != old.Incarnation ||
		!strings.Contains(got.StatusReason, "restarted without a clean shutdown (previous incarnation "+old.Incarnation) ||
		!strings.Contains(got.StatusReason, "registration restored") {
		t.Fatalf("restored %+v, want Unexpected shutdown after %s with the crash's reason", got, old.Incarnation)
	}
}

// TestFleetKnows: the fleet knows a schema version when every node record
// names a binary that knows it or a later one; a record from a binary
// that recorded none (older than migration 15) or an older one does not,
// until it is replaced by a newer run or deleted by a clean stop. The
// master asks it before retries at once go without their rows
// (recovery.EventRetriesSchema).
func TestFleetKnows(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	knows := func(v int) bool {
		t.Helper()
		ok, err := s.FleetKnows(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !knows(17) {
		t.Fatal("an empty fleet does not know version 17")
	}
	newer, older, none := reg("a"), reg("b"), reg("c")
	newer.SchemaVersion, older.SchemaVersion = 18, 16
	for _, r := range []Registration{newer, older, none} {
		if _, err := s.Register(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if knows(17) || !knows(0) {
		t.Fatalf("with records at 18, 16 and none: knows 17 %v, knows 0 %v; want false, true", knows(17), knows(0))
	}
	// The old binaries are upgraded: their next runs replace the records.
	older.Incarnation, older.SchemaVersion = uuid.NewString(), 17
	none.Incarnation, none.SchemaVersion = uuid.NewString(), 17
	for _, r := range []Registration{older, none} {
		if _, err := s.Register(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if !knows(17) || knows(18) {
		t.Fatalf("with records at 18, 17, 17: knows 17 %v, knows 18 %v; want true, false", knows(17), knows(18))
	}
}
