package pgdb

import (
	"net"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// SetResolver makes the pools opened from now on look host names up with
// r, until the returned function puts the default back.
func SetResolver(r *net.Resolver) (restore func()) {
	old := resolver
	resolver = r
	return func() { resolver = old }
}

// SQLFiles: the files of sql/, for the golden test.
var SQLFiles = files

// Statements returns every statement of the package for schema, by the
// name of its golden file: Status's (node_schemas in both its shapes)
// and Migrate's.
func Statements(schema string) map[string]sqltext.Prepared {
	st := statusStatementsOf(schema)
	return map[string]sqltext.Prepared{
		"status_tables": st.tables, "applied_migrations": st.applied, "recorded_cluster": st.recorded,
		"node_schemas": st.nodes, "node_schemas_with_version": st.nodesWithVersion,
		"create_migrations": createMigrations, "applied_versions": appliedVersions, "record_migration": recordMigration,
	}
}
