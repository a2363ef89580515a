package health

import (
	"embed"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/lib/pq"
)

// The pause switch's SQL is in sql/, one statement a file, rendered in
// testdata/ by the golden test.
//
//go:embed sql/*.sql
var files embed.FS

// statements of the pause switch, rendered by NewPauses for its schema;
// each call names its parameters (Prepared.Get).
type statements struct {
	readPause, lockPause, setPause sqltext.Prepared

	// For the tests: every statement, and the files that are a part of
	// some (fragments).
	all       []sqltext.Prepared
	fragments []string
}

// newStatements renders the statements for the sidecar schema.
func newStatements(schema string) statements {
	var st statements
	st.fragments = append(st.fragments, "pause_columns")
	pause := struct{ Pause, Columns string }{
		pq.QuoteIdentifier(schema) + ".pause",
		load("pause_columns").MustPart(nil),
	}
	prepare := func(name string) sqltext.Prepared {
		p := load(name).MustPrepare(pause)
		st.all = append(st.all, p)
		return p
	}
	st.readPause = prepare("read_pause")
	st.lockPause = prepare("lock_pause")
	st.setPause = prepare("set_pause")
	return st
}

// load parses sql/<name>.sql.
func load(name string) *sqltext.Template { return sqltext.Load(files, "sql/"+name+".sql") }
