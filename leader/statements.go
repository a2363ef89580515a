package leader

import (
	"embed"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// files holds the fence's SQL, as templates (internal/infra/sqltext), one
// statement a file; the golden files in testdata/ show them rendered.
//
//go:embed sql/*.sql
var files embed.FS

// statements is the fence's SQL, rendered once for its schema (NewFence);
// each call gives the parameters by name (Prepared.Get, Select, Exec).
type statements struct {
	currentTerm, lockTerm, previousTerm, raiseTerm, endStaleHolders, checkTerm sqltext.Prepared

	// all holds every statement, for the tests.
	all []sqltext.Prepared
}

// newStatements renders the fence's statements for the sidecar schema.
func newStatements(schema string) statements {
	terms := struct{ Terms string }{sqltext.Ident(schema, "leader_term")}
	var st statements
	prepare := func(name string, slots any) sqltext.Prepared {
		p := sqltext.Load(files, "sql/"+name+".sql").MustPrepare(slots)
		st.all = append(st.all, p)
		return p
	}
	st.currentTerm = prepare("current_term", terms)
	st.lockTerm = prepare("lock_term", terms)
	st.previousTerm = prepare("previous_term", terms)
	st.raiseTerm = prepare("raise_term", terms)
	st.endStaleHolders = prepare("end_stale_holders", nil)
	st.checkTerm = prepare("check_term", terms)
	return st
}
