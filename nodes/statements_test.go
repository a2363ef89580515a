package nodes

import (
	"flag"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/internal/testkit/sqltest"
)

var update = flag.Bool("update", false, "rewrite the golden statements in testdata/ from the templates")

// goldenStatements: every statement of a store of the schema
// enginehealth, by the name of its file, and the shape of
// promote_recovering that a faultinject build with the ack turned off
// runs (promote_recovering_ack_off).
func goldenStatements() map[string]sqltext.Prepared {
	st := newStatements("enginehealth", false)
	gs := map[string]sqltext.Prepared{}
	for _, p := range st.all {
		gs[sqltest.Name(p)] = p
	}
	gs["promote_recovering_ack_off"] = newStatements("enginehealth", true).promoteRecovering
	return gs
}

// TestGoldenStatements: each statement, as it runs for the schema
// enginehealth, is committed in testdata/<statement>.sql (go test
// ./nodes -run TestGoldenStatements -update rewrites them): a change to a
// statement shows in the diff as the SQL that will run.
func TestGoldenStatements(t *testing.T) {
	sqltest.Golden(t, "testdata", goldenStatements(), *update)
}

// TestEveryFileIsUsed: every file of sql/ is a statement of the store or
// a fragment of some (no file is left behind when its statement goes).
func TestEveryFileIsUsed(t *testing.T) {
	st := newStatements("enginehealth", false)
	used := slices.Clone(st.fragments)
	for _, p := range st.all {
		used = append(used, sqltest.Name(p))
	}
	sqltest.FilesUsed(t, files, used)
}

// literal: a string literal of SQL.
var literal = regexp.MustCompile(`'((?:[^']|'')*)'`)

// comment: an SQL comment to the end of the line.
var comment = regexp.MustCompile(`--[^\n]*`)

// TestStatementLiterals: the statuses, grades and rules the statements
// name are the package's (the text spells them; a constant renamed in Go
// and not in the text fails here), and their other literals are the few
// known ones.
func TestStatementLiterals(t *testing.T) {
	known := []string{
		string(StatusRecovering), string(StatusReady), string(StatusUnexpectedShutdown), string(StatusNotResponding),
		GradeNormal, GradeWarning, GradeError, ruleReset,
		// Not constants of the package: the empty string, the parts of
		// a signature and of the reason of a registration after a
		// crash, a time before any.
		"", "/", "registered", "restarted without a clean shutdown (previous incarnation ", ", status ", ")", "-infinity",
	}
	for name, p := range goldenStatements() {
		for _, m := range literal.FindAllStringSubmatch(comment.ReplaceAllString(p.SQL, ""), -1) {
			if !slices.Contains(known, m[1]) {
				t.Errorf("%s: the literal '%s' is none of the package's statuses, grades or rules, nor a known literal", name, m[1])
			}
		}
	}
}

// planArgs: values for every statement's parameters, of the types the
// store gives them.
func planArgs() map[string]sqltext.Args {
	now, inc := time.Now(), "4c0e8f5e-1a36-4b8e-9a55-0d6f5c2b7e11"
	sig := "x"
	return map[string]sqltext.Args{
		"lock_record": {"name": "a"},
		"register": {"name": "a", "incarnation": inc, "hostname": "h", "version": "v", "api_address": "127.0.0.1:1",
			"schema_version": 3, "recover_after_crash": false},
		"restore": {"name": "a", "incarnation": inc, "hostname": "h", "status": StatusReady, "version": "v", "api_address": "127.0.0.1:1",
			"reason": "restored", "schema_version": 3, "previous": (*string)(nil)},
		"get":                        {"name": "a"},
		"list":                       nil,
		"heartbeat":                  {"name": "a", "incarnation": inc},
		"active_ready":               {"within": 30.0},
		"promote_recovering":         {"actor": "m", "reason": "recovered"},
		"promote_recovering_ack_off": {"actor": "m", "reason": "recovered"},
		"ack_lock":                   {"name": "a"},
		"ack":                        {"name": "a", "actor": "alice", "reason": "checked"},
		"deregister_lock":            {"name": "a", "incarnation": inc},
		"deregister_keep":            {"name": "a"},
		"deregister":                 {"name": "a"},
		"set_master":                 {"name": "a", "incarnation": inc},
		"clear_master":               {"name": "a", "incarnation": inc},
		"stale":                      {"threshold": 30.0},
		"count_nodes":                nil,
		"fleet_knows":                {"version": 17},
		"mark_not_responding":        {"names": pq.Array([]string{"a", "b"}), "threshold": 30.0, "actor": "m", "reason": "silent"},
		"revive":                     {"threshold": 30.0, "actor": "m", "reason": "heartbeats resumed"},
		"forget":                     {"after": 600.0},
		"ensure_grade":               {"node": "a"},
		"lock_grade":                 {"node": "a"},
		"update_grade": {"node": "a", "grade": GradeWarning, "workflow": &sig, "task": &sig, "instance": &sig,
			"reason": "interrupted", "watching": true, "rule": ruleInterrupted, "changed": true},
		"count_errors": {"node": "a"},
		"ungraded":     {"batch": gradeBatch},
		"mark_graded":  {"ids": pq.Array([]int64{1, 2})},
		"interrupted_on": {"workflows": pq.Array([]string{"w", "w"}), "instances": pq.Array([]string{"1", "2"}), "tasks": pq.Array([]string{"t", "t"}),
			"retention": 7200.0},
		"note_interruption":      {"node": "a", "at": now},
		"own_interruptions":      {"node": "a", "window": 3600.0, "retention": 7200.0},
		"set_rule":               {"node": "a", "rule": ruleInterrupted, "reason": "one left"},
		"watched":                nil,
		"away":                   {"node": "a", "since": now},
		"end_watch":              {"node": "a", "seen": "b"},
		"see_claimant":           {"node": "a", "seen": "b"},
		"quiet":                  {"quiet_period": 3600.0},
		"forgive":                {"node": "a"},
		"drop_old_interruptions": {"retention": 7200.0},
		"drop_gone_grades":       nil,
		"known":                  {"name": "a"},
		"reset_grade":            {"node": "a", "reason": "replaced"},
	}
}

// TestStatementsPlan: every statement plans on real PostgreSQL, over the
// migrated schema, with parameters of the types the store gives them.
func TestStatementsPlan(t *testing.T) {
	t.Parallel()
	sqltest.Plans(t, pg.MigratedDB(t), goldenStatements(), planArgs())
}
