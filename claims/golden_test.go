package claims

import (
	"flag"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/internal/testkit/sqltest"
)

var update = flag.Bool("update", false, "rewrite the golden statements in testdata/ from the templates")

// goldenTable is a claimable workflow's tables: Expire's statement for
// them is one of its shapes, and every statement over them plans.
type goldenTable struct {
	name  string
	table Table
	// ddl: the tables, with the indexes Expire's plan must use (by
	// name), and rows: many instances, few claims, as the planner should
	// expect.
	ddl, rows string
	indexes   []string
	// id: an instance's id, of its column's type.
	id string
}

// quoted: a claimable workflow whose names all need quoting.
var quoted = Table{
	Instances: "Billing.Invoice Queue", IDColumn: "Id", StatusColumn: "State",
	Claims: "Billing.Claims", InstanceColumn: "Invoice Id", NodeColumn: "Node",
	TokenColumn: "Token", ClaimedAtColumn: "Claimed At", ExpiresAtColumn: "Expires At",
}

func goldenTables() []goldenTable {
	return []goldenTable{
		// The tables of docs/claim-protocol.md.
		{name: "claim_protocol", table: table, ddl: DDL,
			rows: `INSERT INTO app.invoice (status) SELECT 'Sent' FROM generate_series(1, 10000);
				INSERT INTO app.invoice_claim (instance_id, node, token, expires_at) SELECT id, 'n1', 't', now() FROM app.invoice LIMIT 10;
				ANALYZE app.invoice, app.invoice_claim`,
			indexes: []string{"invoice_claim_expires_at_idx", "invoice_pkey"}, id: "1"},
		// A schema, tables and columns whose names need quoting.
		{name: "quoted_names", table: quoted,
			ddl: `CREATE SCHEMA "Billing";
				CREATE TABLE "Billing"."Invoice Queue" ("Id" uuid CONSTRAINT queue_pkey PRIMARY KEY, "State" text NOT NULL);
				CREATE TABLE "Billing"."Claims" ("Invoice Id" uuid PRIMARY KEY REFERENCES "Billing"."Invoice Queue" ("Id"),
					"Node" text NOT NULL, "Token" text NOT NULL, "Claimed At" timestamptz NOT NULL, "Expires At" timestamptz NOT NULL);
				CREATE INDEX claims_expiry_idx ON "Billing"."Claims" ("Expires At");`,
			rows: `INSERT INTO "Billing"."Invoice Queue" SELECT gen_random_uuid(), 'Sent' FROM generate_series(1, 10000);
				INSERT INTO "Billing"."Claims" SELECT "Id", 'n1', 't', now(), now() FROM "Billing"."Invoice Queue" LIMIT 10;
				ANALYZE "Billing"."Invoice Queue", "Billing"."Claims"`,
			indexes: []string{"claims_expiry_idx", "queue_pkey"}, id: "00000000-0000-4000-8000-000000000001"},
	}
}

// goldenRecord records the expired claims as the master does (one event
// a claim, here in a log of the test's own), with one parameter.
func goldenRecord(expired string) (string, []any) {
	return `INSERT INTO expiry_log (kind, node, instance, from_state, reason)
		SELECT $2, x.node, x.instance, x.state, 'claim ' || x.token || ' of node ' || x.node || ' expired at ' || x.expires_at
		FROM ` + expired + ` x`, []any{"claim_expired"}
}

const expiryLogDDL = `CREATE TABLE expiry_log (kind text, node text, instance text, from_state text, reason text)`

// goldenStatements: each shape of Expire's statement, by the name of
// its golden file in testdata/expire/, with its parameters (the limit,
// numbered by hand, and goldenRecord's), checked by sqltest.ByHand.
func goldenStatements(t *testing.T) map[string]sqltext.Prepared {
	t.Helper()
	record, _ := goldenRecord("expired")
	gs := map[string]sqltext.Prepared{}
	for _, g := range goldenTables() {
		stmt, err := g.table.expireStatement(record)
		if err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		gs[g.name] = sqltest.ByHand(t, files, "expire", g.table.expireSlots(record), stmt, "kind (the Record statement's)")
	}
	return gs
}

// byHand: statements by the name of their files, checked by
// sqltest.ByHand.
func byHand(t *testing.T, sts ...statement) map[string]sqltext.Prepared {
	t.Helper()
	gs := map[string]sqltext.Prepared{}
	for _, s := range sts {
		gs[s.name] = sqltest.ByHand(t, files, s.name, s.slots, s.sql)
	}
	return gs
}

// goldenGrades: the statements of Grade and Grades for the schema
// enginehealth.
func goldenGrades(t *testing.T) map[string]sqltext.Prepared {
	t.Helper()
	st := gradeStatementsOf("")
	return byHand(t, st.grade, st.grades)
}

// goldenProtocol: the claim protocol's statements over tbl, and
// HolderSQL's expression over its instance row i.
func goldenProtocol(t *testing.T, tbl Table) map[string]sqltext.Prepared {
	t.Helper()
	return byHand(t, append(tbl.protocol().all(), tbl.holder("i"))...)
}

// TestGoldenStatements: each shape of Expire's statement, as it runs, is
// committed in testdata/expire/; Grade's and Grades' for the schema
// enginehealth, and the claim protocol's for the tables of
// docs/claim-protocol.md, in testdata/ (go test ./claims -run
// TestGoldenStatements -update rewrites them): a change to a statement
// shows in the diff as the SQL that will run. Every file of sql/ is one
// of them.
func TestGoldenStatements(t *testing.T) {
	sqltest.Golden(t, filepath.Join("testdata", "expire"), goldenStatements(t), *update)
	grades, golden := goldenGrades(t), goldenProtocol(t, table)
	maps.Copy(golden, grades)
	sqltest.Golden(t, "testdata", golden, *update)
	sqltest.FilesUsed(t, files, append(slices.Collect(maps.Keys(golden)), "expire"))
	for name, p := range grades {
		for _, m := range literal.FindAllStringSubmatch(p.SQL, -1) {
			if m[1] != GradeNormal {
				t.Errorf("%s: the literal '%s' is not GradeNormal", name, m[1])
			}
		}
	}
}

// literal: a string literal of SQL.
var literal = regexp.MustCompile(`'((?:[^']|'')*)'`)

// TestGradeStatementsPlan: Grade's and Grades' statements plan on real
// PostgreSQL, over the migrated sidecar schema.
func TestGradeStatementsPlan(t *testing.T) {
	t.Parallel()
	sqltest.Plans(t, pg.MigratedDB(t), goldenGrades(t), map[string]sqltext.Args{"grade": {"node": "a"}, "grades": nil})
}

// TestStatementsPlan: Expire's statement, the claim protocol's and
// HolderSQL's (in the operator's statement over one instance row) plan
// on real PostgreSQL over each golden table, and with sequential scans
// off they scan no table: Expire picks the expired claims through the
// index on the expiry column and reads their instances by primary key;
// the others find their rows through an index.
func TestStatementsPlan(t *testing.T) {
	t.Parallel()
	db, err := sqlx.Open("postgres", pg.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, g := range goldenTables() {
		db.MustExec(g.ddl + ";" + g.rows)
	}
	db.MustExec(expiryLogDDL)
	var shapes []sqltest.Shape
	for _, g := range goldenTables() {
		record, args := goldenRecord("expired")
		stmt, err := g.table.expireStatement(record)
		if err != nil {
			t.Fatal(err)
		}
		shapes = append(shapes, sqltest.Shape{Statement: "expire", Name: g.name,
			Rendered: sqltext.Statement{SQL: stmt, Args: append([]any{500}, args...)}, Indexes: g.indexes})

		id := g.id
		params := map[string]sqltext.Args{
			"lock_instance": {"id": id, "begin": "Created"},
			"lock_next":     {"begin": "Created"},
			"insert_claim":  {"instance": id, "node": "n1", "token": "t", "timeout": seconds(DefaultTimeout)},
			"enter_interim": {"instance": id, "interim": "Sending"},
			"renew":         {"instance": id, "token": "t", "timeout": seconds(DefaultTimeout)},
			"delete_claim":  {"instance": id, "token": "t"},
			"leave_interim": {"instance": id, "interim": "Sending", "to": "Sent"},
			"count_expired": nil,
			"lookup":        {"instance": id},
			"holder":        {"id": id},
		}
		protocol := goldenProtocol(t, g.table)
		// HolderSQL as the operator's retry reads it: over the instance
		// row it locks.
		holder := protocol["holder"]
		holder.SQL = "SELECT " + holder.SQL + " FROM " + Ident(g.table.Instances) + " AS i WHERE i." + Ident(g.table.IDColumn) + " = $1"
		holder.Names = []string{"id"}
		protocol["holder"] = holder
		for name, p := range protocol {
			st, err := p.Statement(params[name])
			if err != nil {
				t.Fatalf("%s, %s: %v", g.name, name, err)
			}
			shapes = append(shapes, sqltest.Shape{Statement: name, Name: g.name, Rendered: st})
		}
	}
	sqltest.PlanShapes(t, db, shapes)
}
