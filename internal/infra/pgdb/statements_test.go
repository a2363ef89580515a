package pgdb_test

import (
	"flag"
	"testing"

	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/internal/testkit/sqltest"
)

var update = flag.Bool("update", false, "rewrite the golden statements in testdata/ from the templates")

// TestStatements: each statement of Status and Migrate, as it runs for
// the schema enginehealth, is committed in testdata/<statement>.sql (go
// test ./internal/infra/pgdb -run TestStatements -update rewrites them:
// a change to a statement shows in the diff as the SQL that will run);
// every file of sql/ is rendered; and each plans on real PostgreSQL,
// over the migrated schema, with parameters of the types the package
// gives them (but create_migrations: EXPLAIN plans no DDL, and every
// migration runs it).
func TestStatements(t *testing.T) {
	t.Parallel()
	gs := pgdb.Statements(pgdb.DefaultSchema)
	var files []string
	for _, p := range gs {
		files = append(files, sqltest.Name(p))
	}
	sqltest.Golden(t, "testdata", gs, *update)
	sqltest.FilesUsed(t, pgdb.SQLFiles, files)

	db := pg.MigratedDB(t)
	tx := db.MustBegin()
	defer tx.Rollback()                                           //nolint:errcheck // read only
	tx.MustExec("SET LOCAL search_path TO " + pgdb.DefaultSchema) // as Migrate's
	delete(gs, "create_migrations")
	sqltest.Plans(t, tx, gs, map[string]sqltext.Args{
		"status_tables":             {"schema": `"enginehealth"`},
		"applied_migrations":        nil,
		"recorded_cluster":          nil,
		"node_schemas":              nil,
		"node_schemas_with_version": nil,
		"applied_versions":          nil,
		"record_migration":          {"version": 99, "name": "0099_test.sql"},
	})
}
