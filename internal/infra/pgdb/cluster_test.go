package pgdb_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/faultproxy"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
)

// guardedPool: a pool with a cluster guard, through a switch in front of
// its server, on a migrated schema whose cluster it has learnt.
type guardedPool struct {
	proxy   *faultproxy.Switch
	logs    *testkit.Buffer
	cluster *pgdb.Cluster
	db      *sqlx.DB
}

func guarded(t *testing.T, dsn string) guardedPool {
	t.Helper()
	ctx := context.Background()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	g := guardedPool{proxy: faultproxy.NewSwitch(t, u.Host), logs: new(testkit.Buffer)}
	g.cluster = pgdb.NewCluster("enginehealth", slog.New(slog.NewTextHandler(g.logs, nil)))
	g.db, err = pgdb.Open(pgdb.Config{DSN: strings.Replace(dsn, u.Host, g.proxy.Addr, 1), Cluster: g.cluster,
		ConnectTimeout: 2 * time.Second, MaxOpenConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.db.Close() })
	if _, err := pgdb.Migrate(ctx, g.db, "enginehealth"); err != nil {
		t.Fatal(err)
	}
	if err := g.cluster.Learn(ctx, g.db); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestWrongClusterRefused: a pool pointed, through a proxy, at another
// PostgreSQL cluster (the address moved to the wrong server) refuses it:
// no statement runs there, the log says which identifiers differ and
// what it means, clients see it as an unavailable database; once the
// address is back on the schema's cluster, the pool works again.
func TestWrongClusterRefused(t *testing.T) {
	ctx := context.Background()
	dsn := pg.NewDatabase(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// Another cluster, with a database of the same name and a sidecar
	// schema of its own (another environment's): its record of its
	// cluster is its own, so only the identifier learnt at start tells.
	other := pgtest.New(t)
	otherURL := other.SameDatabase(t, dsn)
	odb := open(t, otherURL)
	if _, err := pgdb.Migrate(ctx, odb, "enginehealth"); err != nil {
		t.Fatal(err)
	}

	g := guarded(t, dsn)
	proxy, logs, cluster, db := g.proxy, g.logs, g.cluster, g.db
	var want, got int64
	if err := open(t, dsn).Get(&want, "SELECT system_identifier FROM pg_control_system()"); err != nil {
		t.Fatal(err)
	}
	if err := odb.Get(&got, "SELECT system_identifier FROM pg_control_system()"); err != nil {
		t.Fatal(err)
	}
	if want == got {
		t.Fatalf("two independent clusters share system_identifier %d", want)
	}
	if id, ok := cluster.Identifier(); !ok || id != want {
		t.Fatalf("learnt %d (%v), want %d", id, ok, want)
	}
	write := func() error {
		_, err := db.ExecContext(ctx, `INSERT INTO enginehealth.events (kind, actor) VALUES ('test', 'through-the-proxy')`)
		return err
	}
	if err := write(); err != nil {
		t.Fatal(err)
	}

	proxy.SetTarget(fmt.Sprintf("127.0.0.1:%d", other.Port))
	// The pooled connections break with the switch; the next ones reach
	// the other cluster and are refused.
	var wrong *pgdb.WrongClusterError
	for i := range 5 {
		err := write()
		if errors.As(err, &wrong) {
			break
		}
		if i == 4 {
			t.Fatalf("the writes through the switched proxy: %v, want a *WrongClusterError", err)
		}
	}
	if wrong.Want != want || wrong.Got != got {
		t.Fatalf("refused with want %d got %d, want %d and %d", wrong.Want, wrong.Got, want, got)
	}
	for range 3 { // and again: no connection ever gets through
		if err := write(); !errors.As(err, &wrong) {
			t.Fatalf("a write with another cluster behind the proxy: %v, want a *WrongClusterError", err)
		}
	}
	if err := pgdb.Ping(ctx, db, 5*time.Second); !errors.As(err, &wrong) {
		t.Fatalf("ping: %v, want a *WrongClusterError", err)
	}
	if s := pgdb.Summary(fmt.Errorf("heartbeat: %w", wrong)); !strings.HasPrefix(s, "database unavailable: another PostgreSQL cluster") {
		t.Fatalf("Summary: %q", s)
	}
	log := logs.String()
	for _, w := range []string{"refusing the database", "a different PostgreSQL cluster is behind the database's address",
		fmt.Sprint(want), fmt.Sprint(got), "nothing is written", "cluster_identity"} {
		if !strings.Contains(log, w) {
			t.Fatalf("the log does not say %q:\n%s", w, log)
		}
	}
	if n := strings.Count(log, "refusing the database"); n != 1 {
		t.Fatalf("the mismatch was logged %d times in a row, want once (then every 30 s):\n%s", n, log)
	}
	var there int
	if err := odb.Get(&there, `SELECT count(*) FROM enginehealth.events WHERE actor = 'through-the-proxy'`); err != nil || there != 0 {
		t.Fatalf("%d rows (%v) written to the other cluster, want none", there, err)
	}

	proxy.SetTarget(u.Host)
	testkit.Eventually(t, 10*time.Second, "writes through the proxy back on the schema's cluster", func() (bool, error) {
		err := write()
		return err == nil, err
	})
	if !strings.Contains(logs.String(), "is the schema's again") {
		t.Fatalf("the log does not say the cluster is right again:\n%s", logs.String())
	}
	var here int
	if err := open(t, dsn).Get(&here, `SELECT count(*) FROM enginehealth.events WHERE actor = 'through-the-proxy'`); err != nil || here != 2 {
		t.Fatalf("%d rows (%v) on the schema's cluster, want the 2 written before and after", here, err)
	}
}

// TestMigrateRefusesAnotherCluster: a schema whose record names another
// cluster (a dump restored into a new one) is neither migrated nor
// learnt, until an operator records the new cluster.
func TestMigrateRefusesAnotherCluster(t *testing.T) {
	ctx := context.Background()
	db := open(t, pg.NewDatabase(t))
	if _, err := pgdb.Migrate(ctx, db, "enginehealth"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE enginehealth.cluster_identity SET system_identifier = system_identifier + 1`); err != nil {
		t.Fatal(err)
	}
	var wrong *pgdb.WrongClusterError
	if _, err := pgdb.Migrate(ctx, db, "enginehealth"); !errors.As(err, &wrong) {
		t.Fatalf("migrate: %v, want a *WrongClusterError", err)
	}
	if err := pgdb.NewCluster("enginehealth", nil).Learn(ctx, db); !errors.As(err, &wrong) {
		t.Fatalf("learn: %v, want a *WrongClusterError", err)
	}
	// What the error tells the operator to run, if the move was meant.
	fix := wrong.Error()[strings.Index(wrong.Error(), "UPDATE "):strings.Index(wrong.Error(), " and restart")]
	if _, err := db.Exec(fix); err != nil {
		t.Fatalf("%s: %v", fix, err)
	}
	if _, err := pgdb.Migrate(ctx, db, "enginehealth"); err != nil {
		t.Fatal(err)
	}
	if err := pgdb.NewCluster("enginehealth", nil).Learn(ctx, db); err != nil {
		t.Fatal(err)
	}
}

// TestClusterStateJSON: the identifiers are strings in JSON, whole (a
// number this large loses its last digits in jq and JavaScript).
func TestClusterStateJSON(t *testing.T) {
	rec := int64(7712366352255119695)
	b, err := json.Marshal(pgdb.ClusterState{SystemIdentifier: 7712366352255119695, RecordedSystemIdentifier: &rec})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"system_identifier":"7712366352255119695","recorded_system_identifier":"7712366352255119695"}`; string(b) != want {
		t.Fatalf("%s, want %s", b, want)
	}
}

// TestServerChangeSeen: the guard tells when another server of the cluster
// answers at the address — a promoted replica (a new timeline), the same
// server restarted (a new postmaster) — even when no statement failed to
// show it: the health check gives the nodes time to reconnect from then.
func TestServerChangeSeen(t *testing.T) {
	ctx := context.Background()
	primary := pgtest.New(t)
	g := guarded(t, primary.NewDatabase(t))
	proxy, logs, cluster, db := g.proxy, g.logs, g.cluster, g.db
	write := func() error {
		_, err := db.ExecContext(ctx, `INSERT INTO enginehealth.events (kind, actor) VALUES ('test', 'server-change')`)
		return err
	}
	// New connections to the same server are no change.
	db.SetMaxIdleConns(0)
	for range 3 {
		if err := write(); err != nil {
			t.Fatal(err)
		}
	}
	if at := cluster.ServerChanged(); !at.IsZero() {
		t.Fatalf("ServerChanged %v with the same server behind the address, want zero", at)
	}
	db.SetMaxIdleConns(2)

	// A failover: the replica is promoted and the address moves to it.
	standby, err := primary.StartStandby(primary.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Close)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := standby.WaitReplayed(wctx, primary); err != nil {
		t.Fatal(err)
	}
	primary.Kill()
	primary.Close() // gone for good, its database with it
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	proxy.SetTarget(standby.Addr())
	testkit.Eventually(t, 20*time.Second, "a write on the promoted replica", func() (bool, error) {
		err := write()
		return err == nil, err
	})
	first := cluster.ServerChanged()
	if first.Before(before) {
		t.Fatalf("ServerChanged %v after a failover at %v, want after it", first, before)
	}
	if !strings.Contains(logs.String(), "another PostgreSQL server of the cluster answers") {
		t.Fatalf("the log does not say the server changed:\n%s", logs.String())
	}

	// The same server restarted: a new postmaster.
	standby.Stop()
	if err := standby.Resume(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "a write after the restart", func() (bool, error) {
		err := write()
		return err == nil, err
	})
	if again := cluster.ServerChanged(); !again.After(first) {
		t.Fatalf("ServerChanged %v after a restart, want later than the failover's %v", again, first)
	}
}
