package leader

import (
	"flag"
	"testing"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/internal/testkit/sqltest"
)

var update = flag.Bool("update", false, "rewrite the golden statements in testdata/ from the templates")

// goldenStatements: every statement of a fence of the schema
// enginehealth, by the name of its file.
func goldenStatements() map[string]sqltext.Prepared {
	gs := map[string]sqltext.Prepared{}
	for _, p := range newStatements("enginehealth").all {
		gs[sqltest.Name(p)] = p
	}
	return gs
}

// TestGoldenStatements: each statement, as it runs for the schema
// enginehealth, is committed in testdata/<statement>.sql (go test
// ./leader -run TestGoldenStatements -update rewrites them): a change to
// a statement shows in the diff as the SQL that will run.
func TestGoldenStatements(t *testing.T) {
	gs := goldenStatements()
	sqltest.Golden(t, "testdata", gs, *update)
	var used []string
	for name := range gs {
		used = append(used, name)
	}
	sqltest.FilesUsed(t, files, used)
}

// TestStatementsPlan: every statement plans on real PostgreSQL, over the
// migrated schema, with parameters of the types the fence gives them.
func TestStatementsPlan(t *testing.T) {
	t.Parallel()
	sqltest.Plans(t, pg.MigratedDB(t), goldenStatements(), map[string]sqltext.Args{
		"current_term":      nil,
		"lock_term":         nil,
		"previous_term":     nil,
		"raise_term":        {"term": int64(7), "node": "a", "incarnation": "4c0e8f5e-1a36-4b8e-9a55-0d6f5c2b7e11"},
		"end_stale_holders": {"pid": 4242, "idle": staleHolder.Seconds()},
		"check_term":        nil,
	})
}
