package recovery

import (
	"embed"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/lib/pq"
)

// files: the repairer's SQL, as templates (internal/infra/sqltext), one
// statement a file; the golden files in testdata/ show them rendered.
// Those over the engines' tables are rendered at each use, with slots
// for the workflow's table and columns (the package variables named
// …SQL); those over the sidecar's own tables only, once for its schema
// (statements).
//
//go:embed sql/*.sql
var files embed.FS

// load parses sql/<name>.sql.
func load(name string) *sqltext.Template { return sqltext.Load(files, "sql/"+name+".sql") }

// statements: the repairer's SQL over the sidecar's own tables, rendered
// once for its schema (New): their text depends on nothing else; each
// call gives the parameters by name (Prepared.Get, Select, Exec).
type statements struct {
	// Runs (runs.go, recovery.go).
	beginRun, endRun, addPlanned, addClaimsExpired, unfinishedRuns, interruptRun, getRun, clock,
	listRuns, actedRuns, lockTimeout sqltext.Prepared

	// set: every statement and fragment rendered, for the tests.
	set *sqltext.Files
}

// newStatements renders the repairer's own statements for the sidecar
// schema.
func newStatements(schema string) statements {
	sc := pq.QuoteIdentifier(schema)
	runs := sc + ".runs"
	st := statements{set: sqltext.NewFiles(files)}
	prepare := st.set.MustPrepare
	runColumns := st.set.MustFragment("run_columns", nil)
	type (
		runsTable struct{ Runs string }
		runRows   struct{ Runs, Columns string }
		listSlots struct {
			Runs, Columns string
			// Acted: only the runs that did something or did not
			// finish well; Periodic: the periodic trigger, as a
			// literal.
			Acted    bool
			Periodic string
		}
	)
	st.beginRun = prepare("begin_run", runsTable{runs})
	st.endRun = prepare("end_run", runsTable{runs})
	st.addPlanned = prepare("add_planned", runsTable{runs})
	st.addClaimsExpired = prepare("add_claims_expired", runsTable{runs})
	st.unfinishedRuns = prepare("unfinished_runs", runRows{runs, runColumns})
	st.interruptRun = prepare("interrupt_run", runsTable{runs})
	st.getRun = prepare("get_run", runRows{runs, runColumns})
	st.clock = prepare("clock", nil)
	st.listRuns = prepare("list_runs", listSlots{Runs: runs, Columns: runColumns})
	st.actedRuns = prepare("list_runs", listSlots{Runs: runs, Columns: runColumns, Acted: true, Periodic: pq.QuoteLiteral(TriggerPeriodic)})
	st.lockTimeout = prepare("lock_timeout", nil)
	return st
}
