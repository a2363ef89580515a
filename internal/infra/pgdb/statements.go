package pgdb

import (
	"embed"
	"sync"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// The SQL over the sidecar's own tables that Status and Migrate run is in
// sql/, one statement a file (internal/infra/sqltext templates), rendered
// in testdata/ by the golden test (the schema's migrations are in
// migrations/).
//
//go:embed sql/*.sql
var files embed.FS

// sqlFiles loads them (sql/<name>.sql).
var sqlFiles = sqltext.NewFiles(files)

// Migrate's statements: their text is fixed (Migrate sets the search_path
// to the sidecar schema).
var (
	createMigrations = sqlFiles.Load("create_migrations").MustPrepare(nil)
	appliedVersions  = sqlFiles.Load("applied_versions").MustPrepare(nil)
	recordMigration  = sqlFiles.Load("record_migration").MustPrepare(nil)
)

// statusStatements holds Status's statements for one schema.
type statusStatements struct {
	tables, applied, recorded sqltext.Prepared
	// nodes reads the node records without schema_version (a schema migrated
	// by a binary before it) and with it.
	nodes, nodesWithVersion sqltext.Prepared
}

// The slots of Status's statements: a table of the sidecar schema,
// quoted, and for the nodes, whether it has schema_version.
type (
	migrationsTable struct{ Migrations string }
	identityTable   struct{ Identity string }
	nodesTable      struct {
		Nodes         string
		SchemaVersion bool
	}
)

// statusPrepared holds the statusStatements of each schema asked for,
// prepared once.
var statusPrepared sync.Map // schema → statusStatements

// statusStatementsOf returns Status's statements for schema.
func statusStatementsOf(schema string) statusStatements {
	if st, ok := statusPrepared.Load(schema); ok {
		return st.(statusStatements)
	}
	q := sqltext.Ident(schema)
	nodes := sqlFiles.Load("node_schemas")
	st := statusStatements{
		tables:           sqlFiles.Load("status_tables").MustPrepare(nil),
		applied:          sqlFiles.Load("applied_migrations").MustPrepare(migrationsTable{q + ".schema_migrations"}),
		recorded:         sqlFiles.Load("recorded_cluster").MustPrepare(identityTable{q + ".cluster_identity"}),
		nodes:            nodes.MustPrepare(nodesTable{Nodes: q + ".nodes"}),
		nodesWithVersion: nodes.MustPrepare(nodesTable{Nodes: q + ".nodes", SchemaVersion: true}),
	}
	statusPrepared.Store(schema, st)
	return st
}
