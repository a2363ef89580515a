package health

import (
	"flag"
	"maps"
	"slices"
	"testing"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/internal/testkit/sqltest"
)

var update = flag.Bool("update", false, "rewrite the golden statements in testdata/ from the templates")

// TestStatements: each statement, as it runs for the schema
// enginehealth, is committed in testdata/<statement>.sql (go test
// ./health -run TestStatements -update rewrites them: a change to a
// statement shows in the diff as the SQL that will run); every file of
// sql/ is a statement or a fragment of some; and each plans on real
// PostgreSQL, over the migrated schema, with parameters of the types the
// package gives them.
func TestStatements(t *testing.T) {
	t.Parallel()
	st := newStatements("enginehealth")
	gs := sqltest.ByName(st.rendered.All...)
	sqltest.Golden(t, "testdata", gs, *update)
	sqltest.FilesUsed(t, files, append(slices.Collect(maps.Keys(gs)), st.rendered.Fragments...))
	sqltest.Plans(t, pg.MigratedDB(t), gs, map[string]sqltext.Args{
		"read_pause": nil,
		"lock_pause": nil,
		"set_pause":  {"paused": true, "actor": "alice (operator)", "reason": "schema migration", "term": int64(7)},
	})
}
