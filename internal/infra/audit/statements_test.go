package audit

import (
	"github.com/lib/pq"

	"flag"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/internal/testkit/sqltest"
)

var update = flag.Bool("update", false, "rewrite the golden statements in testdata/ from the templates")

// goldenStatements: every statement (and part of one) of the schema
// enginehealth, by the name of its golden file: those prepared by New;
// LatestExpiryNode and ExpiredSince over parameters; List without a
// filter (list) and with every one (list_filtered).
func goldenStatements(t *testing.T) map[string]sqltext.Prepared {
	t.Helper()
	l := New("enginehealth")
	gs := sqltest.ByName(l.st.write, l.st.runCounts, l.st.lastID, l.st.changes, l.st.perMinute)
	arg := sqltext.Arg
	gs["latest_expiry_node"] = sqltest.Fragment(t, "latest_expiry_node", l.LatestExpiryNode(arg("workflow"), arg("instance"), arg("runs")))
	gs["expired_since"] = sqltest.Fragment(t, "expired_since", l.ExpiredSince(arg("workflow"), arg("instance"), arg("state"), arg("since")))
	for name, p := range listShapes() {
		slots, _ := l.listArgs(p)
		gs[name] = listSQL.MustPrepare(slots)
	}
	return gs
}

// listShapes: List's parameters, by the name of the golden file of the
// shape they give its statement: no filter, and every one.
func listShapes() map[string]ListParams {
	at := time.Now()
	return map[string]ListParams{
		"list":          {},
		"list_filtered": {Node: "a", Workflow: "w", Instance: "1", Kind: KindRepair, RunID: 7, Since: &at, Until: &at},
		"list_newest":   {Workflow: "w", Instance: "1", Newest: true, BeforeID: 9},
	}
}

// literal: a string literal of SQL.
var literal = regexp.MustCompile(`'((?:[^']|'')*)'`)

// TestStatements: each statement, as it runs for the schema
// enginehealth, is committed in testdata/<statement>.sql (go test
// ./internal/infra/audit -run TestStatements -update rewrites them: a
// change to a statement shows in the diff as the SQL that will run);
// every file of sql/ is rendered; the kinds the statements spell are the
// package's; and each plans on real PostgreSQL, over the migrated schema,
// with parameters of the types the package gives them (the parts of
// statements inside a SELECT).
func TestStatements(t *testing.T) {
	t.Parallel()
	gs := goldenStatements(t)
	sqltest.Golden(t, "testdata", gs, *update)
	sqltest.FilesUsed(t, files, slices.Collect(maps.Keys(gs)))
	for name, p := range gs {
		for _, m := range literal.FindAllStringSubmatch(p.SQL, -1) {
			if m[1] != "" && !Kind(m[1]).Valid() {
				t.Errorf("%s: the literal '%s' is none of the package's kinds", name, m[1])
			}
		}
	}

	db := pg.MigratedDB(t)
	for _, part := range []string{"latest_expiry_node", "expired_since"} {
		p := gs[part]
		p.SQL = "SELECT " + p.SQL
		gs[part] = p
	}
	at, run := time.Now(), int64(7)
	args := map[string]sqltext.Args{
		"write":              Event{Kind: KindRepair, RunID: &run, Workflow: Str("w"), Instance: Str("1"), Reason: "repaired"}.args(),
		"run_counts":         {"run": int64(7), "from": at, "to": at},
		"last_id":            nil,
		"cluster_changes":    {"since": at, "limit": 1000},
		"per_minute":         {"since": at},
		"latest_expiry_node": {"workflow": "w", "instance": "1", "runs": pq.Int64Array{7}},
		"expired_since":      {"workflow": "w", "instance": "1", "state": "Sending", "since": at},
	}
	for name, p := range listShapes() {
		_, args[name] = New("enginehealth").listArgs(p)
	}
	sqltest.Plans(t, db, gs, args)
}

// TestWriteNamesEveryColumn: write's parameters are the db tags of an
// Event, but id and at (the database's), each given by Event.args.
func TestWriteNamesEveryColumn(t *testing.T) {
	var tags []string
	typ := reflect.TypeFor[Event]()
	for i := range typ.NumField() {
		if tag := typ.Field(i).Tag.Get("db"); tag != "-" && tag != "id" && tag != "at" {
			tags = append(tags, tag)
		}
	}
	names := slices.Clone(New("enginehealth").st.write.Names)
	slices.Sort(tags)
	slices.Sort(names)
	if !slices.Equal(tags, names) {
		t.Fatalf("write names %v, an Event's columns are %v", names, tags)
	}
	if _, err := New("enginehealth").st.write.Bind(Event{}.args()); err != nil {
		t.Fatal(err)
	}
}
