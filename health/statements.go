package health

import (
	"embed"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// The pause switch's SQL is in sql/, one statement a file, rendered in
// testdata/ by the golden test.
//
//go:embed sql/*.sql
var files embed.FS

// statements of the pause switch, rendered for its schema by NewPauses
// (and by NewChecker for its default switch); each call names its
// parameters (Prepared.Get).
type statements struct {
	readPause, lockPause, setPause sqltext.Prepared

	// rendered holds every statement, and the files that are a part of some
	// (fragments), for the tests.
	rendered *sqltext.Files
}

// newStatements renders the statements for the sidecar schema.
func newStatements(schema string) statements {
	st := statements{rendered: sqltext.NewFiles(files)}
	pause := struct{ Pause, Columns string }{sqltext.Ident(schema, "pause"), st.rendered.MustFragment("pause_columns", nil)}
	st.readPause = st.rendered.MustPrepare("read_pause", pause)
	st.lockPause = st.rendered.MustPrepare("lock_pause", pause)
	st.setPause = st.rendered.MustPrepare("set_pause", pause)
	return st
}
