package pgdb

import (
	"net"

	"github.com/lib/pq"
)

// SetResolver makes the pools opened from now on look host names up with
// r, until the returned function puts the default back.
func SetResolver(r *net.Resolver) (restore func()) {
	old := resolver
	resolver = r
	return func() { resolver = old }
}

// SQLFiles: the files of sql/, for the golden test.
var SQLFiles = sqlFiles

// Statement is one of the package's statements as the golden test takes
// it: its file (sql/<File>.sql), the slots it was rendered with, and its
// text as the package runs it.
type Statement struct {
	File  string
	Slots any
	SQL   string
}

// Statements returns every statement of the package for schema, by the
// name of its golden file: Status's (node_schemas in both its shapes)
// and Migrate's.
func Statements(schema string) map[string]Statement {
	st := newStatusStatements(pq.QuoteIdentifier(schema))
	m := map[string]Statement{}
	for name, s := range map[string]statement{
		"status_tables": st.tables, "applied_migrations": st.applied, "recorded_cluster": st.recorded,
		"node_schemas": st.nodes, "node_schemas_with_version": st.nodesWithVersion,
		"create_migrations": createMigrations, "applied_versions": appliedVersions, "record_migration": recordMigration,
	} {
		m[name] = Statement{File: s.name, Slots: s.slots, SQL: s.sql}
	}
	return m
}
