package audit

import (
	"embed"
	"strings"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// The events table's SQL is in sql/, one statement (or fragment of one)
// a file (internal/infra/sqltext templates), rendered in testdata/ by
// the golden test.
//
//go:embed sql/*.sql
var files embed.FS

// sqlFiles loads them (sql/<name>.sql).
var sqlFiles = sqltext.NewFiles(files)

// The statements rendered at each call: List's (its shape is the filters
// set) and the fragments of the callers' statements (fragment). The rest
// are prepared by New.
var (
	listSQL         = sqlFiles.Load("list")
	latestExpirySQL = sqlFiles.Load("latest_expiry_node")
	expiredSinceSQL = sqlFiles.Load("expired_since")
)

// fragment renders t as a fragment of the caller's statement (its
// parameters, in the caller's SQL that slots hold, left for that
// statement to number), without its file's last newline. The slots are
// the code's, and the tests render each fragment: an error is a bug, and
// panics.
func fragment(t *sqltext.Template, slots any) string {
	s, err := t.Fragment(slots)
	if err != nil {
		panic(err)
	}
	return strings.TrimSuffix(s, "\n")
}

// statements holds those whose text depends only on the schema, prepared once
// by New; each call gives the parameters by name.
type statements struct {
	write, runCounts, lastID, changes, perMinute sqltext.Prepared
}

// events holds the slots of a statement over the events table (quoted).
type events struct{ Events string }

func newStatements(table, view string) statements {
	return statements{
		write:     sqlFiles.Load("write").MustPrepare(events{table}),
		runCounts: sqlFiles.Load("run_counts").MustPrepare(events{table}),
		lastID:    sqlFiles.Load("last_id").MustPrepare(events{table}),
		changes:   sqlFiles.Load("cluster_changes").MustPrepare(struct{ EventLog string }{view}),
		perMinute: sqlFiles.Load("per_minute").MustPrepare(events{table}),
	}
}

// The slots of the statements rendered at each call: the events table
// (or the event_log view), quoted, and the caller's SQL.
type (
	latestExpirySlots struct{ Events, Workflow, Instance, Runs string }
	expiredSinceSlots struct{ Events, Workflow, Instance, State, Since string }
	// listSlots names the event_log view, and the filters switched on.
	listSlots struct {
		EventLog                                                    string
		Node, Workflow, Instance, Kind, RunID, Since, Until, Before bool
		// Newest orders the page newest first.
		Newest bool
	}
)
