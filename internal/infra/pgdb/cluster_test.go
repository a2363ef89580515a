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

	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/faultproxy"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
)

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

	proxy := faultproxy.NewSwitch(t, u.Host)
	var logs testkit.Buffer
	cluster := pgdb.NewCluster("enginehealth", slog.New(slog.NewTextHandler(&logs, nil)))
	db, err := pgdb.Open(pgdb.Config{DSN: strings.Replace(dsn, u.Host, proxy.Addr, 1), Cluster: cluster,
		ConnectTimeout: 2 * time.Second, MaxOpenConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := pgdb.Migrate(ctx, db, "enginehealth"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Learn(ctx, db); err != nil {
		t.Fatal(err)
	}
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
