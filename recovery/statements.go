package recovery

import (
	"context"
	"embed"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// files holds the repairer's SQL, as templates (internal/infra/sqltext), one
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

// getRendered renders the statement t over the engines' tables with
// slots and runs it on q with args, scanning its one row into dest
// (sqltext.Prepared.Get).
func getRendered(ctx context.Context, q sqlx.QueryerContext, dest any, t *sqltext.Template, slots any, args sqltext.Args) error {
	p, err := t.Prepare(slots)
	if err != nil {
		return err
	}
	return p.Get(ctx, q, dest, args)
}

// statements is the repairer's SQL over the sidecar's own tables, rendered
// once for its schema (New): their text depends on nothing else; each
// call gives the parameters by name (Prepared.Get, Select, Exec).
type statements struct {
	// Runs (runs.go, recovery.go).
	beginRun, endRun, addPlanned, addClaimsExpired, unfinishedRuns, interruptRun, getRun, runChain, clock,
	listRuns, actedRuns, batchSettings sqltext.Prepared
	// Attempts rows: due retries (attempts.go), holds and operators'
	// retries (operator.go), an instance's (instance.go), the settle
	// pass's looks (settle.go).
	due, listHeld, listWaiting, listHeldFiltered, listWaitingFiltered, holdsOpen, lockAllHolds, lockHolds, lockAttempt, insertRetry, updateRetry,
	instanceAttempts, retriedExist, heldExist, waitingExist sqltext.Prepared
	// The settle pass's cursor of retries at once (settle.go), and an
	// instance's retries at once (instance.go).
	settleCursor, moveSettleCursor, instanceCases sqltext.Prepared
	// Failure marks (failures.go).
	insertMark, moveMark, readMarks, dropMarks sqltext.Prepared
	// The protocol doctor (doctor.go).
	doctorRun, doctorLate, doctorPrune, doctorSummary, doctorExamples sqltext.Prepared

	// set holds every statement and fragment rendered, for the tests.
	set *sqltext.Files
}

// newStatements renders the repairer's own statements for the sidecar
// schema.
func newStatements(schema string) statements {
	sc := sqltext.Ident(schema)
	runs, attempts, marks, violations := sc+".runs", sc+".attempts", sc+".failure_marks", sc+".protocol_violations"
	st := statements{set: sqltext.NewFiles(files)}
	prepare := st.set.MustPrepare
	runColumns := st.set.MustFragment("run_columns", nil)
	type (
		attemptsTable struct{ Attempts string }
		marksTable    struct{ Marks string }
		parkedList    struct {
			Attempts string
			// Waiting selects the waiting rows (else the held);
			// Filtered adds the console's filters and the count.
			Waiting, Filtered bool
		}
		holdsLock struct {
			Attempts string
			// All selects every hold (else the named instances').
			All bool
		}
		parkedState struct {
			Attempts string
			// State is the parked state, as a literal.
			State string
		}
		runsTable struct{ Runs string }
		runRows   struct{ Runs, Columns string }
		listSlots struct {
			Runs, Columns string
			// Acted selects only the runs that did something or did not
			// finish well; Periodic: the periodic trigger, as a
			// literal.
			Acted    bool
			Periodic string
		}
	)
	type violationsTable struct{ Violations string }
	st.doctorRun = prepare("doctor_run", struct{ Violations, Events, Runs, RepairKinds string }{violations, sc + ".events", runs, repairKinds()})
	st.doctorLate = prepare("doctor_late", violationsTable{violations})
	st.doctorPrune = prepare("doctor_prune", violationsTable{violations})
	st.doctorSummary = prepare("doctor_summary", violationsTable{violations})
	st.doctorExamples = prepare("doctor_examples", violationsTable{violations})
	st.beginRun = prepare("begin_run", runsTable{runs})
	st.endRun = prepare("end_run", runsTable{runs})
	st.addPlanned = prepare("add_planned", runsTable{runs})
	st.addClaimsExpired = prepare("add_claims_expired", runsTable{runs})
	st.unfinishedRuns = prepare("unfinished_runs", runRows{runs, runColumns})
	st.interruptRun = prepare("interrupt_run", runsTable{runs})
	st.getRun = prepare("get_run", runRows{runs, runColumns})
	st.runChain = prepare("run_chain", runsTable{runs})
	st.clock = prepare("clock", nil)
	st.listRuns = prepare("list_runs", listSlots{Runs: runs, Columns: runColumns})
	st.actedRuns = prepare("list_runs", listSlots{Runs: runs, Columns: runColumns, Acted: true, Periodic: pq.QuoteLiteral(string(TriggerPeriodic))})
	st.batchSettings = prepare("batch_settings", nil)

	st.due = prepare("due", attemptsTable{attempts})
	st.listHeld = prepare("list_parked", parkedList{Attempts: attempts})
	st.listWaiting = prepare("list_parked", parkedList{Attempts: attempts, Waiting: true})
	st.listHeldFiltered = prepare("list_parked", parkedList{Attempts: attempts, Filtered: true})
	st.listWaitingFiltered = prepare("list_parked", parkedList{Attempts: attempts, Waiting: true, Filtered: true})
	st.holdsOpen = prepare("holds_open", attemptsTable{attempts})
	st.lockAllHolds = prepare("lock_holds", holdsLock{Attempts: attempts, All: true})
	st.lockHolds = prepare("lock_holds", holdsLock{Attempts: attempts})
	st.lockAttempt = prepare("lock_attempt", attemptsTable{attempts})
	st.insertRetry = prepare("insert_retry", attemptsTable{attempts})
	st.updateRetry = prepare("update_retry", attemptsTable{attempts})
	st.instanceAttempts = prepare("instance_attempts", attemptsTable{attempts})
	st.retriedExist = prepare("retried_exist", attemptsTable{attempts})
	st.heldExist = prepare("parked_exist", parkedState{attempts, pq.QuoteLiteral(AttemptHeld)})
	st.waitingExist = prepare("parked_exist", parkedState{attempts, pq.QuoteLiteral(AttemptWaiting)})

	st.settleCursor = prepare("settle_cursor", struct{ Cursors, Events string }{sc + ".settle_cursors", sc + ".events"})
	st.moveSettleCursor = prepare("move_settle_cursor", struct{ Cursors string }{sc + ".settle_cursors"})
	st.instanceCases = prepare("instance_cases", struct{ Events, Attempts, KindRepair string }{
		sc + ".events", attempts, pq.QuoteLiteral(string(audit.KindRepair))})

	st.insertMark = prepare("insert_mark", marksTable{marks})
	st.moveMark = prepare("move_mark", marksTable{marks})
	st.readMarks = prepare("read_marks", marksTable{marks})
	st.dropMarks = prepare("drop_marks", marksTable{marks})
	return st
}

// catalog holds the repairer's queries of PostgreSQL's catalogs (catalog.go,
// settle.go), prepared once for the process: they have no slots.
var catalog = newCatalog()

type catalogStatements struct {
	tableExists, tableColumns, patternCompiles, updatedColumn, idType sqltext.Prepared
	// set holds every statement rendered, for the tests.
	set *sqltext.Files
}

func newCatalog() catalogStatements {
	c := catalogStatements{set: sqltext.NewFiles(files)}
	c.tableExists = c.set.MustPrepare("table_exists", nil)
	c.tableColumns = c.set.MustPrepare("table_columns", nil)
	c.patternCompiles = c.set.MustPrepare("pattern_compiles", nil)
	c.updatedColumn = c.set.MustPrepare("updated_column", nil)
	c.idType = c.set.MustPrepare("id_type", nil)
	return c
}
