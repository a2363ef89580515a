package pgdb

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migration is one embedded schema migration.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns the embedded migrations in version order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql", name)
		}
		b, err := migrationFS.ReadFile(path.Join("migrations", name))
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(b)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i := 1; i < len(ms); i++ {
		if ms[i].Version == ms[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", ms[i-1].Name, ms[i].Name, ms[i].Version)
		}
	}
	return ms, nil
}

// NewerSchemaError means the database was migrated by a newer binary. No
// retry helps (a binary never downgrades a schema): the daemon refuses to
// start.
type NewerSchemaError struct {
	Schema string
	// At is the database's schema version; Knows the newest this binary
	// has.
	At, Knows int
}

// Error says the database's schema version and the newest this binary
// knows.
func (e *NewerSchemaError) Error() string {
	return fmt.Sprintf("migrate %s: the database is at schema version %d but this binary knows only up to %d: upgrade enginehealth",
		e.Schema, e.At, e.Knows)
}

// lockKey is the advisory lock that serialises migrations of one schema.
func lockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("enginehealth.migrate:" + schema))
	return int64(h.Sum64()) //nolint:gosec // G115: the hash's 64 bits as PostgreSQL's bigint key; negative keys are meant
}

// Migrate applies the pending migrations to schema, creating it if needed,
// and returns the versions it applied.
//
// It runs in one transaction under a transaction-scoped advisory lock: nodes
// starting at once migrate one after the other, the later ones find nothing
// to do, and a failure leaves the schema as it was (PostgreSQL DDL is
// transactional). A database migrated by a newer binary is refused
// (*NewerSchemaError).
func Migrate(ctx context.Context, db *sqlx.DB, schema string) (applied []int, err error) {
	ms, err := Migrations()
	if err != nil {
		return nil, err
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("migrate: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	q := sqltext.Ident(schema)
	steps := []string{
		fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", lockKey(schema)),
		"CREATE SCHEMA IF NOT EXISTS " + q,
		"SET LOCAL search_path TO " + q,
		createMigrations.SQL,
	}
	for _, s := range steps {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return nil, fmt.Errorf("migrate %s: %w", schema, err)
		}
	}
	var done []int
	if err := appliedVersions.Select(ctx, tx, &done, nil); err != nil {
		return nil, fmt.Errorf("migrate %s: read applied versions: %w", schema, err)
	}
	if n := len(done); n > 0 && done[n-1] > ms[len(ms)-1].Version {
		return nil, &NewerSchemaError{Schema: schema, At: done[n-1], Knows: ms[len(ms)-1].Version}
	}
	// A schema restored into another cluster (or another cluster behind
	// the address) is not migrated: its record of the cluster it was
	// migrated on says so.
	var recorded bool
	if err := tx.GetContext(ctx, &recorded, "SELECT to_regclass('cluster_identity') IS NOT NULL"); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", schema, err)
	}
	if recorded {
		var ids struct {
			Live     int64  `db:"live"`
			Recorded *int64 `db:"recorded"`
		}
		if err := tx.GetContext(ctx, &ids, `SELECT (`+liveIdentifier+`) AS live, (SELECT system_identifier FROM cluster_identity) AS recorded`); err != nil {
			return nil, fmt.Errorf("migrate %s: read the cluster's system_identifier: %w", schema, err)
		}
		if ids.Recorded != nil && *ids.Recorded != ids.Live {
			return nil, fmt.Errorf("migrate: %w", &WrongClusterError{Want: *ids.Recorded, Got: ids.Live, Schema: schema})
		}
	}
	for _, m := range ms {
		if slices.Contains(done, m.Version) {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return nil, fmt.Errorf("migrate %s: %s: %w", schema, m.Name, err)
		}
		if _, err := recordMigration.Exec(ctx, tx, sqltext.Args{"version": m.Version, "name": m.Name}); err != nil {
			return nil, fmt.Errorf("migrate %s: record %s: %w", schema, m.Name, err)
		}
		applied = append(applied, m.Version)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("migrate %s: commit: %w", schema, err)
	}
	return applied, nil
}
