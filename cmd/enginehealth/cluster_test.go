package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/faultproxy"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
)

// TestDaemonRefusesAnotherCluster: the address of the daemon's database
// moves to another PostgreSQL cluster (through a proxy switched to a
// second server with a migrated schema of its own). The daemon writes
// nothing there, logs why naming both system identifiers, keeps running
// and reports its database trouble where it reports a failing heartbeat
// (/readyz, the status's node); switched back, it is Ready again. It also
// recorded the schema version its binary knows in its node record.
func TestDaemonRefusesAnotherCluster(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dsn := pg.NewDatabase(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	other := pgtest.New(t)
	otherURL := other.SameDatabase(t, dsn)
	proxy := faultproxy.NewSwitch(t, u.Host)
	cfg := daemonConfig(t, "guarded", strings.Replace(dsn, u.Host, proxy.Addr, 1))
	out, done := startDaemon(ctx, t, cfg)
	node, _ := waitReadyMaster(t, cfg, done)
	db := sqlx.MustOpen("postgres", dsn)
	defer db.Close()
	var known *int
	if err := db.Get(&known, "SELECT schema_version FROM enginehealth.nodes WHERE name = 'guarded'"); err != nil || known == nil || *known != buildInfo().SchemaVersion {
		t.Fatalf("the node's recorded schema version: %v (%v), want %d", known, err, buildInfo().SchemaVersion)
	}
	// The other cluster, migrated by a sidecar of its own, with its own
	// record of the same name.
	if _, errOut, code := runCLI(t, "migrate", "-c", migrateConfig(t, otherURL)); code != exitOK {
		t.Fatalf("migrate the other cluster: %s", errOut)
	}
	odb := sqlx.MustOpen("postgres", otherURL)
	defer odb.Close()
	odb.MustExec(`INSERT INTO enginehealth.nodes (name, incarnation, hostname, status, version, status_changed_by, last_active)
		VALUES ('guarded', gen_random_uuid(), 'elsewhere', 'Ready', 'x', 'guarded', '2000-01-01')`)

	cl := api.NewClient(node.APIAddress, "")
	testkit.Eventually(t, 15*time.Second, "Ready", func() (bool, error) {
		r, err := cl.Ready(ctx)
		return err == nil && r.Ready, fmt.Errorf("%+v %v", r, err)
	})
	proxy.SetTarget(fmt.Sprintf("127.0.0.1:%d", other.Port))
	testkit.Eventually(t, 15*time.Second, "/readyz says the database is another cluster", func() (bool, error) {
		r, err := cl.Ready(ctx)
		return !r.Ready && strings.Contains(r.Reason, "another PostgreSQL cluster answers at its address"), fmt.Errorf("%+v %v", r, err)
	})
	refused := out.records("refusing the database")
	if len(refused) == 0 {
		t.Fatalf("no log line refusing the database:\n%s", out.String())
	}
	var want, got int64
	db.MustExec("SELECT 1") // the test's own pool, straight to the schema's cluster
	if err := db.Get(&want, "SELECT system_identifier FROM pg_control_system()"); err != nil {
		t.Fatal(err)
	}
	if err := odb.Get(&got, "SELECT system_identifier FROM pg_control_system()"); err != nil {
		t.Fatal(err)
	}
	msg := refused[0]["msg"].(string)
	if !strings.Contains(msg, fmt.Sprint(want)) || !strings.Contains(msg, fmt.Sprint(got)) || !strings.Contains(msg, "a different PostgreSQL cluster is behind") ||
		refused[0]["level"] != "ERROR" {
		t.Fatalf("the log line: %v", refused[0])
	}
	var written int
	if err := odb.Get(&written, `SELECT (SELECT count(*) FROM enginehealth.events) +
		(SELECT count(*) FROM enginehealth.nodes WHERE last_active > '2000-01-01')`); err != nil || written != 0 {
		t.Fatalf("%d rows (%v) written to the other cluster", written, err)
	}
	select {
	case err := <-done:
		t.Fatalf("the daemon stopped: %v", err)
	default:
	}

	proxy.SetTarget(u.Host)
	testkit.Eventually(t, 15*time.Second, "Ready again on the schema's cluster", func() (bool, error) {
		r, err := cl.Ready(ctx)
		return err == nil && r.Ready, fmt.Errorf("%+v %v", r, err)
	})
	if len(out.records("is the schema's again")) == 0 {
		t.Fatalf("no log line saying the cluster is right again")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("runDaemon after cancel: %v", err)
	}
}

// TestDaemonRefusesAnEmptyOtherCluster: the fleet's first node records its
// PostgreSQL cluster in etcd; a node whose database address leads to
// another cluster — an empty one, where the schema's own record of its
// cluster cannot help — stops with exit 2 before it writes anything
// there, naming both clusters and the etcd key. A key that holds no
// identifier is named too.
func TestDaemonRefusesAnEmptyOtherCluster(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dsn := pg.NewDatabase(t)
	first := daemonConfig(t, "first", dsn)
	out, done := startDaemon(ctx, t, first)
	waitReadyMaster(t, first, done)
	if len(out.records("recorded the fleet's PostgreSQL cluster in etcd")) != 1 {
		t.Fatalf("the first node did not record its cluster:\n%s", out.String())
	}
	var want int64
	db := sqlx.MustOpen("postgres", dsn)
	defer db.Close()
	if err := db.Get(&want, "SELECT system_identifier FROM pg_control_system()"); err != nil {
		t.Fatal(err)
	}

	other := pgtest.New(t)
	otherURL := other.SameDatabase(t, dsn) // an empty database of that name
	odb := sqlx.MustOpen("postgres", otherURL)
	defer odb.Close()
	var got int64
	if err := odb.Get(&got, "SELECT system_identifier FROM pg_control_system()"); err != nil {
		t.Fatal(err)
	}
	stray := daemonConfig(t, "stray", otherURL)
	start := func() error {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, time.Minute)
		defer scancel()
		_, done := startDaemon(sctx, t, stray)
		return <-done
	}
	err := start()
	var usage usageError
	key := stray.Etcd.Prefix + clusterKey
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), fmt.Sprint(want)) || !strings.Contains(err.Error(), fmt.Sprint(got)) ||
		!strings.Contains(err.Error(), "etcdctl put "+key+" "+fmt.Sprint(got)) {
		t.Fatalf("the stray node: %v, want a usage error (exit 2) naming clusters %d and %d and the etcd key", err, want, got)
	}
	var schemas int
	if err := odb.Get(&schemas, "SELECT count(*) FROM pg_namespace WHERE nspname = 'enginehealth'"); err != nil || schemas != 0 {
		t.Fatalf("the stray node wrote to the other cluster: %d schemas (%v)", schemas, err)
	}

	// A key that holds no identifier.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, key, "not-a-number"); err != nil {
		t.Fatal(err)
	}
	if err := start(); !errors.As(err, &usage) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), `"not-a-number"`) {
		t.Fatalf("with a garbage key: %v, want a usage error naming the key and its value", err)
	}
}

// TestWrongTableRefusedBeforeMigrating: a configuration valid on its own
// that names an engine table the database does not have (here by case:
// names are quoted, so App.Orders is not app.orders) stops the node with
// exit 2 naming the table, before the sidecar's schema is migrated: one
// node with a typo in a rollout does not move the fleet's schema on.
func TestWrongTableRefusedBeforeMigrating(t *testing.T) {
	dsn := pg.NewDatabase(t)
	db := sqlx.MustOpen("postgres", dsn)
	defer db.Close()
	db.MustExec(`CREATE SCHEMA app; CREATE TABLE app.orders (id bigint PRIMARY KEY, status text NOT NULL)`)
	cfg := daemonConfig(t, "typo", dsn)
	cfg.Workflows = []configs.Workflow{{Name: "orders", Table: "App.Orders", IDColumn: "id", StatusColumn: "status",
		Tasks: []configs.Task{{Name: "ship", Begin: "Paid", Interim: "Shipping", End: "Shipped", Ends: []string{"Shipped"}, Failed: "ShipFailed"}}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, done := startDaemon(ctx, t, cfg)
	err := <-done
	var usage usageError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), "App.Orders") {
		t.Fatalf("runDaemon: %v, want a usage error (exit 2) naming App.Orders", err)
	}
	var schemas int
	if err := db.Get(&schemas, "SELECT count(*) FROM pg_namespace WHERE nspname = 'enginehealth'"); err != nil || schemas != 0 {
		t.Fatalf("the schema was migrated before the refusal: %d schemas (%v)", schemas, err)
	}
}
