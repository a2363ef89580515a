package pgdb_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/pgdb"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
)

var pg *pgtest.Server

func TestMain(m *testing.M) {
	testkit.Main(m, func(m *testing.M) int { return pgtest.Main(m, &pg) })
}

func open(t *testing.T, dsn string) *sqlx.DB {
	t.Helper()
	db, err := pgdb.Open(pgdb.Config{DSN: dsn, ApplicationName: "pgdb-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestMigrateConcurrentAppliesOnce(t *testing.T) {
	dsn := pg.NewDatabase(t)
	const n = 3
	var wg sync.WaitGroup
	results := make([][]int, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		db := open(t, dsn) // separate pools, as separate nodes have
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = pgdb.Migrate(context.Background(), db, "enginehealth")
		}()
	}
	close(start)
	wg.Wait()
	ms, err := pgdb.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	appliedBy := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("migrator %d: %v", i, errs[i])
		}
		if len(results[i]) > 0 {
			appliedBy++
			if len(results[i]) != len(ms) {
				t.Errorf("migrator %d applied %v, want all %d", i, results[i], len(ms))
			}
		}
	}
	if appliedBy != 1 {
		t.Fatalf("%d migrators applied migrations, want exactly 1: %v", appliedBy, results)
	}
	db := open(t, dsn)
	var rows int
	if err := db.Get(&rows, "SELECT count(*) FROM enginehealth.schema_migrations"); err != nil || rows != len(ms) {
		t.Fatalf("schema_migrations rows = %d (%v), want %d", rows, err, len(ms))
	}
	var terms int
	if err := db.Get(&terms, "SELECT count(*) FROM enginehealth.leader_term"); err != nil || terms != 1 {
		t.Fatalf("leader_term rows = %d (%v), want 1", terms, err)
	}
}

func TestMigrateCustomSchemaAndIdempotent(t *testing.T) {
	db := open(t, pg.NewDatabase(t))
	ctx := context.Background()
	if _, err := pgdb.Migrate(ctx, db, "Side Car"); err != nil {
		t.Fatal(err)
	}
	again, err := pgdb.Migrate(ctx, db, "Side Car")
	if err != nil || len(again) != 0 {
		t.Fatalf("second run applied %v, err %v; want nothing", again, err)
	}
	if _, err := db.Exec(`SELECT 1 FROM "Side Car".nodes`); err != nil {
		t.Fatalf("tables not in the quoted schema: %v", err)
	}
}

func TestMigrateRefusesNewerDatabase(t *testing.T) {
	db := open(t, pg.NewDatabase(t))
	ctx := context.Background()
	if _, err := pgdb.Migrate(ctx, db, "enginehealth"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO enginehealth.schema_migrations (version, name) VALUES (9999, '9999_future.sql')`); err != nil {
		t.Fatal(err)
	}
	_, err := pgdb.Migrate(ctx, db, "enginehealth")
	if err == nil || !strings.Contains(err.Error(), "upgrade enginehealth") {
		t.Fatalf("want a refusal naming the upgrade, got %v", err)
	}
}

func TestEventsAreAppendOnly(t *testing.T) {
	db := open(t, pg.NewDatabase(t))
	if _, err := pgdb.Migrate(context.Background(), db, "enginehealth"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO enginehealth.events (kind, actor) VALUES ('test', 'me')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE enginehealth.events SET reason = 'rewritten'`); err == nil {
		t.Fatal("an event was updated")
	}
	if _, err := db.Exec(`DELETE FROM enginehealth.events`); err == nil {
		t.Fatal("an event was deleted")
	}
}

func TestSessionSettings(t *testing.T) {
	db, err := pgdb.Open(pgdb.Config{DSN: pg.NewDatabase(t), StatementTimeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var st string
	if err := db.Get(&st, "SHOW statement_timeout"); err != nil || st != "1500ms" {
		t.Fatalf("statement_timeout = %q (%v), want 1500ms", st, err)
	}
	if _, err := db.Exec("SELECT pg_sleep(3)"); err == nil || !strings.Contains(err.Error(), "statement timeout") {
		t.Fatalf("a 3s statement was not cancelled by statement_timeout: %v", err)
	}
}

// blackhole forwards TCP to target until frozen; then it swallows
// everything in both directions, like a network partition.
type blackhole struct {
	ln     net.Listener
	frozen atomic.Bool
}

func newBlackhole(t *testing.T, target string) *blackhole {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go b.pipe(c, s)
			go b.pipe(s, c)
		}
	}()
	return b
}

func (b *blackhole) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !b.frozen.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestQueryDoesNotHangOnPartition: with replies blackholed, lib/pq alone
// blocks forever; the read deadline must end the query.
func TestQueryDoesNotHangOnPartition(t *testing.T) {
	dsn := pg.NewDatabase(t)
	bh := newBlackhole(t, dsnHostPort(dsn))
	proxied := strings.Replace(dsn, dsnHostPort(dsn), bh.ln.Addr().String(), 1)
	db, err := pgdb.Open(pgdb.Config{DSN: proxied, StatementTimeout: time.Second, ConnectTimeout: 500 * time.Millisecond, MaxOpenConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := pgdb.Ping(context.Background(), db, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	bh.frozen.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := db.ExecContext(ctx, "SELECT 1"); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("query succeeded through a blackhole")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("query still blocked 15s after the partition: the read deadline does not work")
	}
}

// TestConnectBoundedByConnectTimeout: a server that accepts the
// connection and never answers (a hung PostgreSQL, a middlebox) holds a
// connection attempt for the connect timeout, as lib/pq bounds it, not
// for the read deadline of a statement (here 10 minutes; it was
// statement + connect timeout, 35 s by default, before the read
// deadline gave way to lib/pq's).
func TestConnectBoundedByConnectTimeout(t *testing.T) {
	addr := testkit.SilentServer(t)
	for _, sslmode := range []string{"disable", "require"} {
		dsn := fmt.Sprintf("postgres://u@%s/db?sslmode=%s", addr, sslmode)
		db, err := pgdb.Open(pgdb.Config{DSN: dsn, StatementTimeout: 10 * time.Minute, ConnectTimeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- db.PingContext(context.Background()) }()
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("sslmode=%s: connected to a server that never answers", sslmode)
			}
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("sslmode=%s: %v, want the connect timeout", sslmode, err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("sslmode=%s: a connection attempt still waits 60 s on a server that never answers (connect timeout 0.5 s)", sslmode)
		}
		db.Close()
	}
}

func dsnHostPort(dsn string) string {
	rest := strings.Split(dsn, "@")[1]
	return strings.Split(rest, "/")[0]
}

// TestSummary: what a client may see of a database failure names its
// class, never the driver's text, the address or the SQL.
func TestSummary(t *testing.T) {
	db, err := pgdb.Open(pgdb.Config{DSN: pg.NewDatabase(t), StatementTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, syntaxErr := db.Exec("SELEKT 'hunter2'")
	_, timeoutErr := db.Exec("SELECT pg_sleep(2)")
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	down, err := pgdb.Open(pgdb.Config{DSN: "postgres://eh:hunter2@" + addr + "/eh?sslmode=disable"})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	downErr := down.Ping()
	for _, c := range []struct {
		err  error
		want string
	}{
		{syntaxErr, "database error 42601 (syntax_error)"},
		{timeoutErr, "database statement timed out"},
		{downErr, "database unavailable"},
		{fmt.Errorf("begin run: %w", context.DeadlineExceeded), "timed out"},
		{errors.New("table app.orders: no column status"), "failed (the node's log has the cause)"},
	} {
		if c.err == nil {
			t.Fatalf("no error for %q", c.want)
		}
		got := pgdb.Summary(c.err)
		if got != c.want {
			t.Errorf("pgdb.Summary(%v) = %q, want %q", c.err, got, c.want)
		}
		for _, leak := range []string{"hunter2", "127.0.0.1", "SELEKT", "pq:"} {
			if strings.Contains(got, leak) {
				t.Errorf("pgdb.Summary(%v) = %q carries %q", c.err, got, leak)
			}
		}
	}
}

// TestStandbyIsUnavailable: a server that takes no writes (a standby an
// address points at before its promotion) is refused when a connection
// is made, as the database being unavailable, and takes the connection
// once promoted; a DSN that asks for a standby is refused at Open.
func TestStandbyIsUnavailable(t *testing.T) {
	p := pgtest.New(t)
	s, err := p.StartStandby(p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	db, err := pgdb.Open(pgdb.Config{DSN: s.URL("postgres"), ConnectTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Ping()
	if !errors.Is(err, pgdb.ErrReadOnly) || !pgdb.Unavailable(err) {
		t.Fatalf("ping of a standby: %v; want ErrReadOnly, unavailable", err)
	}
	if got, want := pgdb.Summary(fmt.Errorf("heartbeat: %w", err)), "database unavailable (the server takes no writes: a standby, or read-only)"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	// A session that can write, on a server set read-only after it was
	// made: its writes fail with 25006, the same class.
	_, err = db.Exec(`SELECT 1`)
	if err == nil {
		t.Fatal("a statement on a standby's pool succeeded: the connection was kept")
	}
	p.Kill()
	if err := s.Promote(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE written (v int)`); err != nil {
		t.Fatalf("write after promotion: %v", err)
	}
	for _, q := range []string{"read-only", "standby", "prefer-standby"} {
		_, err := pgdb.Open(pgdb.Config{DSN: s.URL("postgres") + "&target_session_attrs=" + q})
		if err == nil || !strings.Contains(err.Error(), "target_session_attrs="+q) || !strings.Contains(err.Error(), "the sidecar writes") {
			t.Errorf("Open with target_session_attrs=%s: %v; want a refusal naming it", q, err)
		}
	}
}

// TestUnavailable: which failures are the database's state (retried,
// not logged as faults) and which are not.
func TestUnavailable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&pq.Error{Code: "25006"}, true},
		{&pq.Error{Code: "57P01"}, true},
		{&pq.Error{Code: "57P03"}, true},
		{&pq.Error{Code: "08006"}, true},
		{&pq.Error{Code: "53300"}, true},
		{fmt.Errorf("heartbeat: %w", io.ErrUnexpectedEOF), true},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{&pq.Error{Code: "42601"}, false},
		{&pq.Error{Code: "23505"}, false},
		{context.DeadlineExceeded, false},
		{context.Canceled, false},
		{errors.New("table app.orders: no column status"), false},
		{nil, false},
	} {
		if got := pgdb.Unavailable(c.err); got != c.want {
			t.Errorf("Unavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
