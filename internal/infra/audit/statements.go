package audit

import (
	"embed"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// The events table's SQL is in sql/, one statement (or part of one) a
// file (internal/infra/sqltext templates), rendered in testdata/ by the
// golden test.
//
//go:embed sql/*.sql
var files embed.FS

// load parses sql/<name>.sql.
func load(name string) *sqltext.Template { return sqltext.Load(files, "sql/"+name+".sql") }

// The statements rendered at each call: List's (its shape is the filters
// set) and the parts of the callers' statements. The rest are prepared by
// New.
var (
	listSQL         = load("list")
	insertSelectSQL = load("insert_select")
	latestExpirySQL = load("latest_expiry_node")
	expiredSinceSQL = load("expired_since")
)

// statements: those whose text depends only on the schema, prepared once
// by New; each call gives the parameters by name.
type statements struct {
	write, runCounts, lastID sqltext.Prepared

	// all: every statement, for the tests.
	all []sqltext.Prepared
}

// events: the slots of a statement over the events table (quoted).
type events struct{ Events string }

func newStatements(table string) statements {
	var st statements
	prepare := func(name string) sqltext.Prepared {
		p := load(name).MustPrepare(events{table})
		st.all = append(st.all, p)
		return p
	}
	st.write = prepare("write")
	st.runCounts = prepare("run_counts")
	st.lastID = prepare("last_id")
	return st
}

// The slots of the statements rendered at each call: the events table
// (or the event_log view), quoted, and the caller's SQL.
type (
	insertSelectSlots struct{ Events, Columns, Values, From string }
	latestExpirySlots struct{ Events, Workflow, Instance string }
	expiredSinceSlots struct{ Events, Workflow, Instance, State, Since string }
	// listSlots: the event_log view, and the filters switched on.
	listSlots struct {
		EventLog                                            string
		Node, Workflow, Instance, Kind, RunID, Since, Until bool
	}
)
