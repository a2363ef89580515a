package audit

import (
	"flag"
	"maps"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/internal/testkit/sqltest"
	"github.com/jmoiron/sqlx"
)

var update = flag.Bool("update", false, "rewrite the golden statements in testdata/ from the templates")

// goldenStatements: every statement (and part of one) of the schema
// enginehealth, by the name of its golden file, checked by
// sqltest.ByHand: those rendered by New; InsertSelect as the master's
// claim expiry calls it; LatestExpiryNode and ExpiredSince over
// parameters; List without a filter (list) and with every one
// (list_filtered).
func goldenStatements(t *testing.T) map[string]sqltext.Prepared {
	t.Helper()
	l := New("enginehealth")
	byHand := func(name string, slots any, rendered string, more ...string) sqltext.Prepared {
		return sqltest.ByHand(t, files, name, slots, rendered, more...)
	}
	table := events{l.table}
	expiry := Columns{Kind: "$1", RunID: "$2", Node: "x.node", Workflow: "$3", Instance: "x.instance", FromState: "x.state", Reason: "x.reason"}
	expired := "(VALUES ($4, $5, $6, $7)) AS x (node, instance, state, reason)"
	latest := latestExpirySlots{Events: l.table, Workflow: "$1", Instance: "$2"}
	since := expiredSinceSlots{Events: l.table, Workflow: "$1", Instance: "$2", State: "$3", Since: "$4"}
	list, _ := l.listArgs(ListParams{})
	at := time.Now()
	filtered, _ := l.listArgs(ListParams{Node: "a", Workflow: "w", Instance: "1", Kind: KindRepair, RunID: 7, Since: &at, Until: &at})
	return map[string]sqltext.Prepared{
		"write":      byHand("write", table, l.st.write),
		"run_counts": byHand("run_counts", table, l.st.runCounts),
		"last_id":    byHand("last_id", table, l.st.lastID),
		"insert_select": byHand("insert_select", l.insertSelectSlots(expiry, expired), l.InsertSelect(expiry, expired),
			"kind", "run_id", "workflow", "node", "instance", "state", "reason"),
		"latest_expiry_node": byHand("latest_expiry_node", latest, l.LatestExpiryNode("$1", "$2"), "workflow", "instance"),
		"expired_since":      byHand("expired_since", since, l.ExpiredSince("$1", "$2", "$3", "$4"), "workflow", "instance", "state", "since"),
		"list":               byHand("list", list, render("list", list)),
		"list_filtered":      byHand("list", filtered, render("list", filtered), "node", "workflow", "instance", "kind", "run_id", "since", "until"),
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
// statements inside a SELECT; write through sqlx, which binds its named
// parameters).
func TestStatements(t *testing.T) {
	t.Parallel()
	gs := goldenStatements(t)
	sqltest.Golden(t, "testdata", gs, *update)
	sqltest.FilesUsed(t, files, slices.Collect(maps.Keys(gs)))
	for name, p := range gs {
		for _, m := range literal.FindAllStringSubmatch(p.SQL, -1) {
			if m[1] != "" && !slices.Contains(Kinds, m[1]) {
				t.Errorf("%s: the literal '%s' is none of the package's kinds", name, m[1])
			}
		}
	}

	db := pg.MigratedDB(t)
	write := gs["write"]
	delete(gs, "write")
	for _, part := range []string{"latest_expiry_node", "expired_since"} {
		p := gs[part]
		p.SQL = "SELECT " + p.SQL
		gs[part] = p
	}
	at := time.Now()
	sqltest.Plans(t, db, gs, map[string]sqltext.Args{
		"run_counts": {"run": int64(7), "from": at, "to": at},
		"last_id":    nil,
		"insert_select": {"kind": KindClaimExpired, "run_id": int64(7), "workflow": "w", "node": "a", "instance": "1",
			"state": "Sending", "reason": "expired"},
		"latest_expiry_node": {"workflow": "w", "instance": "1"},
		"expired_since":      {"workflow": "w", "instance": "1", "state": "Sending", "since": at},
		"list":               {"after_id": int64(0), "limit": DefaultListLimit, "max_bytes": int64(1 << 20)},
		"list_filtered": {"after_id": int64(0), "limit": DefaultListLimit, "max_bytes": int64(1 << 20), "node": "a", "workflow": "w",
			"instance": "1", "kind": KindRepair, "run_id": int64(7), "since": at, "until": at},
	})
	run := int64(7)
	q, args, err := sqlx.Named(write.SQL, Event{Kind: KindRepair, RunID: &run, Workflow: Str("w"), Instance: Str("1"), Reason: "repaired"})
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	if err := db.Select(&plan, "EXPLAIN "+sqlx.Rebind(sqlx.DOLLAR, q), args...); err != nil {
		t.Errorf("write does not plan: %v", err)
	}
}
