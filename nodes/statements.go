package nodes

import (
	"embed"
	"strings"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// files holds the store's SQL, as templates (internal/infra/sqltext), one
// statement a file; the golden files in testdata/ show them rendered.
//
//go:embed sql/*.sql
var files embed.FS

// statements is the store's SQL, rendered once for its schema (NewStore):
// their text depends on nothing else; each call gives the parameters by
// name (Prepared.Get, Select, Exec).
type statements struct {
	lockRecord, register, restore, get, list, heartbeat, activeReady, promoteRecovering,
	ackLock, ack, deregisterLock, deregisterKeep, deregister, setMaster, clearMaster,
	stale, countNodes, markNotResponding, revive, forget, fleetKnows sqltext.Prepared
	// The grader's and ResetGrade's (grade.go).
	ensureGrade, lockGrade, updateGrade, countErrors, ungraded, markGraded, interruptedOn, noteInterruption,
	ownInterruptions, setRule, watched, away, endWatch, seeClaimant, quiet, forgive,
	dropOldInterruptions, dropGoneGrades, known, resetGrade sqltext.Prepared

	// all holds every statement, and fragments the files that are parts of
	// statements (a select list, a SET list), for the tests.
	all       []sqltext.Prepared
	fragments []string
}

// newStatements renders the store's statements for the sidecar schema;
// ackOff: a faultinject build with the operator's ack turned off
// (PromoteRecovering takes nodes in Unexpected shutdown too).
func newStatements(schema string, ackOff bool) statements {
	sc := sqltext.Ident(schema)
	nodes, grades, intr := sc+".nodes", sc+".node_grades", sc+".interruptions"
	var st statements
	fragment := func(name string, slots any) string {
		st.fragments = append(st.fragments, name)
		return strings.TrimRight(load(name).MustPrepare(slots).SQL, "\n")
	}
	columns := fragment("node_columns", struct{ Grades string }{grades})
	takeOver := fragment("take_over", nil)
	gradeColumns := fragment("grade_columns", nil)
	prepare := func(name string, slots any) sqltext.Prepared {
		p := load(name).MustPrepare(slots)
		st.all = append(st.all, p)
		return p
	}
	type (
		table    struct{ Nodes string }
		node     struct{ Nodes, Columns string }
		written  struct{ Nodes, Columns, TakeOver string }
		both     struct{ Nodes, Grades string }
		grade    struct{ Grades string }
		gradeRow struct{ Grades, Columns string }
		intrs    struct{ Interruptions string }
	)
	st.lockRecord = prepare("lock_record", table{nodes})
	st.register = prepare("register", written{nodes, columns, takeOver})
	st.restore = prepare("restore", written{nodes, columns, takeOver})
	st.get = prepare("get", node{nodes, columns})
	st.list = prepare("list", node{nodes, columns})
	st.heartbeat = prepare("heartbeat", both{nodes, grades})
	st.activeReady = prepare("active_ready", table{nodes})
	st.promoteRecovering = prepare("promote_recovering", struct {
		Nodes  string
		AckOff bool
	}{nodes, ackOff})
	st.ackLock = prepare("ack_lock", table{nodes})
	st.ack = prepare("ack", node{nodes, columns})
	st.deregisterLock = prepare("deregister_lock", table{nodes})
	st.deregisterKeep = prepare("deregister_keep", table{nodes})
	st.deregister = prepare("deregister", table{nodes})
	st.setMaster = prepare("set_master", table{nodes})
	st.clearMaster = prepare("clear_master", table{nodes})
	st.stale = prepare("stale", table{nodes})
	st.countNodes = prepare("count_nodes", table{nodes})
	st.fleetKnows = prepare("fleet_knows", table{nodes})
	st.markNotResponding = prepare("mark_not_responding", table{nodes})
	st.revive = prepare("revive", table{nodes})
	st.forget = prepare("forget", table{nodes})

	st.ensureGrade = prepare("ensure_grade", grade{grades})
	st.lockGrade = prepare("lock_grade", gradeRow{grades, gradeColumns})
	st.updateGrade = prepare("update_grade", grade{grades})
	st.countErrors = prepare("count_errors", both{nodes, grades})
	st.ungraded = prepare("ungraded", intrs{intr})
	st.markGraded = prepare("mark_graded", intrs{intr})
	st.interruptedOn = prepare("interrupted_on", intrs{intr})
	st.noteInterruption = prepare("note_interruption", grade{grades})
	st.ownInterruptions = prepare("own_interruptions", struct{ Interruptions, Grades string }{intr, grades})
	st.setRule = prepare("set_rule", grade{grades})
	st.watched = prepare("watched", gradeRow{grades, gradeColumns})
	st.away = prepare("away", table{nodes})
	st.endWatch = prepare("end_watch", grade{grades})
	st.seeClaimant = prepare("see_claimant", grade{grades})
	st.quiet = prepare("quiet", gradeRow{grades, gradeColumns})
	st.forgive = prepare("forgive", grade{grades})
	st.dropOldInterruptions = prepare("drop_old_interruptions", intrs{intr})
	st.dropGoneGrades = prepare("drop_gone_grades", both{nodes, grades})
	st.known = prepare("known", table{nodes})
	st.resetGrade = prepare("reset_grade", grade{grades})
	return st
}

// load parses sql/<name>.sql.
func load(name string) *sqltext.Template { return sqltext.Load(files, "sql/"+name+".sql") }
