package pgdb

import (
	"embed"
	"fmt"
	"strings"
	"text/template"
)

// The SQL over the sidecar's own tables that Status and Migrate run is in
// sql/, one statement a file, rendered in testdata/ by the golden test
// (the schema's migrations are in migrations/). The package renders it
// with text/template alone: it may not import internal/infra/sqltext,
// another package of its layer, so its statements number their
// parameters by hand.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

// templates: the files of sql/, each named by its file's name.
var templates = template.Must(template.New("").Option("missingkey=error").ParseFS(sqlFiles, "sql/*.sql"))

// statement is a file of sql/ rendered: its name, the slots it was
// rendered with (for the tests), and its text.
type statement struct {
	name  string
	slots any
	sql   string
}

// prepare renders sql/<name>.sql with slots. The slots are the code's,
// and the tests render every file: an error is a bug, and panics.
func prepare(name string, slots any) statement {
	var b strings.Builder
	if err := templates.ExecuteTemplate(&b, name+".sql", slots); err != nil {
		panic(fmt.Sprintf("pgdb: %v", err))
	}
	return statement{name: name, slots: slots, sql: b.String()}
}

// Migrate's statements: their text is fixed (Migrate sets the search_path
// to the sidecar schema).
var (
	createMigrations = prepare("create_migrations", nil)
	appliedVersions  = prepare("applied_versions", nil)
	recordMigration  = prepare("record_migration", nil)
)

// statusStatements: Status's statements for one schema.
type statusStatements struct {
	tables, applied, recorded statement
	// nodes: the node records without schema_version (a schema migrated
	// by a binary before it) and with it.
	nodes, nodesWithVersion statement
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

// newStatusStatements renders Status's statements for the schema quoted
// q.
func newStatusStatements(q string) statusStatements {
	return statusStatements{
		tables:           prepare("status_tables", nil),
		applied:          prepare("applied_migrations", migrationsTable{q + ".schema_migrations"}),
		recorded:         prepare("recorded_cluster", identityTable{q + ".cluster_identity"}),
		nodes:            prepare("node_schemas", nodesTable{Nodes: q + ".nodes"}),
		nodesWithVersion: prepare("node_schemas", nodesTable{Nodes: q + ".nodes", SchemaVersion: true}),
	}
}
