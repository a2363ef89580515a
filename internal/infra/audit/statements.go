package audit

import (
	"embed"
	"fmt"
	"strings"
	"text/template"
)

// The events table's SQL is in sql/, one statement (or part of one) a
// file, rendered in testdata/ by the golden test. The package renders
// it with text/template alone: it may not import internal/infra/sqltext,
// another package of its layer, so its statements number their
// parameters by hand.
//
//go:embed sql/*.sql
var files embed.FS

// templates: the files of sql/, each named by its file's name.
var templates = template.Must(template.New("").Option("missingkey=error").ParseFS(files, "sql/*.sql"))

// render executes sql/<name>.sql with slots, without the file's last
// newline (a part of a statement is set in the caller's). The slots are
// the code's, and the tests render every file: an error is a bug, and
// panics.
func render(name string, slots any) string {
	var b strings.Builder
	if err := templates.ExecuteTemplate(&b, name+".sql", slots); err != nil {
		panic(fmt.Sprintf("audit: %v", err))
	}
	return strings.TrimRight(b.String(), "\n")
}

// statements: those whose text depends only on the schema, rendered once
// by New.
type statements struct {
	write, runCounts, lastID string
}

// events: the slots of a statement over the events table (quoted).
type events struct{ Events string }

func newStatements(table string) statements {
	return statements{
		write:     render("write", events{table}),
		runCounts: render("run_counts", events{table}),
		lastID:    render("last_id", events{table}),
	}
}

// The slots of the statements rendered at each call: the events table
// (or the event_log view), quoted, and the caller's SQL.
type (
	insertSelectSlots struct{ Events, Columns, Values, From string }
	latestExpirySlots struct{ Events, Workflow, Instance string }
	expiredSinceSlots struct{ Events, Workflow, Instance, State, Since string }
	// listSlots: the event_log view and, for each filter set, the
	// placeholder of its parameter ("" when not set).
	listSlots struct{ EventLog, Node, Workflow, Instance, Kind, RunID, Since, Until string }
)
