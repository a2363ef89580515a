package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
	"github.com/enginehealth/enginehealth/nodes"
)

// migrateConfig writes a configuration for dsn whose etcd does not exist:
// migrate and migrate --status never need it.
func migrateConfig(t *testing.T, dsn string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dsn"), []byte(dsn), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "enginehealth.yaml")
	// The service's API token and etcd password live in its environment,
	// not the operator's shell: migrate runs without them.
	if err := os.WriteFile(path, []byte("node:\n  name: cli\ndatabase:\n  dsn_file: dsn\n"+
		"etcd:\n  endpoints: [\"127.0.0.1:1\"]\n  username: sidecar\n  password_env: EH_MIGRATE_TEST_NO_PASSWORD\n"+
		"api:\n  token_env: EH_MIGRATE_TEST_NO_TOKEN\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// migrateUpTo applies the embedded migrations up to version last, as a
// binary of that version did.
func migrateUpTo(t *testing.T, db *sqlx.DB, last int) {
	t.Helper()
	ms, err := pgdb.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	tx := db.MustBegin()
	tx.MustExec(`CREATE SCHEMA enginehealth; SET LOCAL search_path TO enginehealth;
		CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	for _, m := range ms {
		if m.Version <= last {
			tx.MustExec(m.SQL)
			tx.MustExec("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// squash is s with every run of blanks one space (table columns).
func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

func migrationStatus(t *testing.T, path string) pgdb.MigrationStatus {
	t.Helper()
	out, errOut, code := runCLI(t, "migrate", "--status", "-o", "json", "-c", path)
	if code != exitOK {
		t.Fatalf("migrate --status -o json: exit %d: %s", code, errOut)
	}
	var st pgdb.MigrationStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return st
}

// TestMigrateStatus: migrate --status shows the applied and pending
// migrations and the nodes whose binary knows fewer than the database
// has or than this binary would apply, changes nothing, and needs no
// etcd; a bad flag is a usage error, an unreachable database a failure.
func TestMigrateStatus(t *testing.T) {
	ms, err := pgdb.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	latest := ms[len(ms)-1].Version
	dsn := pg.NewDatabase(t)
	path := migrateConfig(t, dsn)
	db := sqlx.MustOpen("postgres", dsn)
	defer db.Close()

	// A fresh database: everything pending, no nodes.
	st := migrationStatus(t, path)
	if st.DatabaseVersion != 0 || st.BinaryVersion != latest || st.Pending != len(ms) || len(st.Nodes) != 0 || st.Cluster.RecordedSystemIdentifier != nil {
		t.Fatalf("fresh database: %+v", st)
	}
	var schemas int
	if err := db.Get(&schemas, "SELECT count(*) FROM pg_namespace WHERE nspname = 'enginehealth'"); err != nil || schemas != 0 {
		t.Fatalf("migrate --status created the schema (%d, %v)", schemas, err)
	}

	// A database migrated by the release before the schema version was
	// recorded, with a node of that release.
	migrateUpTo(t, db, 14)
	db.MustExec(`INSERT INTO enginehealth.nodes (name, incarnation, hostname, status, version, status_changed_by)
		VALUES ('old-a', gen_random_uuid(), 'host-a', 'Ready', '0.9.0', 'old-a')`)
	st = migrationStatus(t, path)
	if st.DatabaseVersion != 14 || st.Pending != latest-14 || len(st.Nodes) != 1 {
		t.Fatalf("at 14: %+v", st)
	}
	if n := st.Nodes[0]; n.Name != "old-a" || n.SchemaVersion != nil || n.KnowsUpTo != 14 || n.BehindDatabase || !n.BehindBinary {
		t.Fatalf("at 14, the old node: %+v", n)
	}
	for _, m := range st.Migrations {
		if (m.Version <= 14) != (m.State == pgdb.MigrationApplied && m.AppliedAt != nil) {
			t.Fatalf("at 14: %+v", m)
		}
	}
	out, errOut, code := runCLI(t, "migrate", "--status", "-c", path)
	if code != exitOK {
		t.Fatalf("migrate --status: exit %d: %s", code, errOut)
	}
	for _, w := range []string{
		fmt.Sprintf("schema enginehealth in postgres://postgres@127.0.0.1:%d/", pg.Port),
		fmt.Sprintf(": at version 14; this binary migrates to %d; %d migrations pending", latest, latest-14),
		"VERSION NAME APPLIED AT 1 0001_init.sql 20",
		"15 0015_nodes_schema_version.sql pending",
		"none recorded yet",
		fmt.Sprintf("old-a Ready 0.9.0 ≤14 behind this binary (%d): once migrated, its next start is refused until it is upgraded", latest),
		"1 of 1 node affected",
	} {
		if !strings.Contains(squash(out), w) {
			t.Fatalf("migrate --status does not say %q:\n%s", w, out)
		}
	}
	var rows int
	if err := db.Get(&rows, "SELECT count(*) FROM enginehealth.schema_migrations"); err != nil || rows != 14 {
		t.Fatalf("after --status: %d migrations (%v), want the 14: it migrated", rows, err)
	}

	// Migrated by this binary, a node of this binary beside the old one.
	if _, errOut, code := runCLI(t, "migrate", "-c", path); code != exitOK {
		t.Fatalf("migrate: exit %d: %s", code, errOut)
	}
	store := testkit.Must(nodes.NewStore(nodes.StoreConfig{DB: db, Schema: "enginehealth", Events: audit.New("enginehealth")}))
	if _, err := store.Register(context.Background(), nodes.Registration{Name: "new-b", Incarnation: "6f1c1f2e-0000-4000-8000-000000000001",
		Hostname: "host-b", Version: "1.0.0", SchemaVersion: latest}); err != nil {
		t.Fatal(err)
	}
	st = migrationStatus(t, path)
	if st.DatabaseVersion != latest || st.Pending != 0 || len(st.Nodes) != 2 ||
		st.Cluster.RecordedSystemIdentifier == nil || *st.Cluster.RecordedSystemIdentifier != st.Cluster.SystemIdentifier {
		t.Fatalf("migrated: %+v", st)
	}
	if b, a := st.Nodes[0], st.Nodes[1]; a.Name != "old-a" || !a.BehindDatabase || b.BehindDatabase || b.BehindBinary || b.SchemaVersion == nil || *b.SchemaVersion != latest {
		t.Fatalf("migrated: old %+v, new %+v", a, b)
	}

	// A newer binary migrated it further: shown, not known here.
	db.MustExec(`INSERT INTO enginehealth.schema_migrations (version, name) VALUES (9999, '9999_future.sql')`)
	out, _, code = runCLI(t, "migrate", "--status", "-c", path)
	if code != exitOK || !strings.Contains(out, "the database is newer: this binary refuses it") ||
		!strings.Contains(out, "9999_future.sql") || !strings.Contains(out, "unknown to this one") ||
		!strings.Contains(squash(out), "new-b Recovering 1.0.0 "+fmt.Sprint(latest)+" behind the database (9999)") || !strings.Contains(out, "2 of 2 nodes affected") {
		t.Fatalf("migrate --status with a newer database: exit %d:\n%s", code, out)
	}
	// Applying is refused as run refuses it: exit 2, upgrade the binary.
	if _, errOut, code := runCLI(t, "migrate", "-c", path); code != exitUsage || !strings.Contains(errOut, "upgrade enginehealth") {
		t.Fatalf("migrate with a newer database: exit %d, want %d: %s", code, exitUsage, errOut)
	}

	// Usage and failure.
	if _, errOut, code := runCLI(t, "migrate", "-o", "json", "-c", path); code != exitUsage || !strings.Contains(errOut, "--output goes with --status") {
		t.Fatalf("migrate -o json: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "migrate", "--status", "-o", "yaml", "-c", path); code != exitUsage || !strings.Contains(errOut, `--output "yaml": want table or json`) {
		t.Fatalf("migrate --status -o yaml: exit %d: %s", code, errOut)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	down := migrateConfig(t, "postgres://eh:hunter2@"+closed+"/eh?sslmode=disable")
	if _, errOut, code := runCLI(t, "migrate", "--status", "-c", down); code != exitFailure || !strings.Contains(errOut, closed) || strings.Contains(errOut, "hunter2") {
		t.Fatalf("migrate --status, database down: exit %d: %s", code, errOut)
	}
}

// TestMigrateStatusOnAStandby: migrate --status only reads, so a standby
// will do (as its help says), while the daemon's pools refuse one.
func TestMigrateStatusOnAStandby(t *testing.T) {
	p := pgtest.New(t)
	url := p.URL("postgres")
	db, err := pgdb.Open(pgdb.Config{DSN: url})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := pgdb.Migrate(context.Background(), db, pgdb.DefaultSchema); err != nil {
		t.Fatal(err)
	}
	s, err := p.StartStandby(p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitReplayed(ctx, p); err != nil {
		t.Fatal(err)
	}
	st := migrationStatus(t, migrateConfig(t, s.URL("postgres")))
	if st.Pending != 0 || len(st.Migrations) == 0 {
		t.Fatalf("status on a standby: %+v", st)
	}
	if _, errOut, code := runCLI(t, "migrate", "-c", migrateConfig(t, s.URL("postgres"))); code == exitOK || !strings.Contains(errOut, "takes no writes") {
		t.Fatalf("migrate (apply) on a standby: exit %d: %s", code, errOut)
	}
}

// TestConfigCheckNamesAnotherCluster: config check --database says so when
// the schema was migrated on another PostgreSQL cluster than the one that
// answers (a dump restored into a new one), as run would refuse it.
func TestConfigCheckNamesAnotherCluster(t *testing.T) {
	dsn := pg.NewDatabase(t)
	path := migrateConfig(t, dsn)
	// config check reads every secret (migrate, the database's alone).
	t.Setenv("EH_MIGRATE_TEST_NO_TOKEN", "a-token-of-the-service-0123456789")
	t.Setenv("EH_MIGRATE_TEST_NO_PASSWORD", "etcd-password")
	if _, errOut, code := runCLI(t, "migrate", "-c", path); code != exitOK {
		t.Fatalf("migrate: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "config", "check", "--database", "-c", path); code != exitOK {
		t.Fatalf("config check --database on the schema's cluster: exit %d: %s", code, errOut)
	}
	db := sqlx.MustOpen("postgres", dsn)
	defer db.Close()
	db.MustExec(`UPDATE enginehealth.cluster_identity SET system_identifier = system_identifier + 1`)
	_, errOut, code := runCLI(t, "config", "check", "--database", "-c", path)
	if code != exitFailure || !strings.Contains(errOut, "a different PostgreSQL cluster is behind the database's address") {
		t.Fatalf("config check --database on another cluster: exit %d: %s", code, errOut)
	}
}
