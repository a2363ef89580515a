package claims

import (
	"context"
	"database/sql"
	"flag"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/internal/testkit/sqltest"
)

var update = flag.Bool("update", false, "rewrite the golden statements in testdata/ from the templates")

// goldenExpiry is one shape of Expire's statement.
type goldenExpiry struct {
	name  string
	table Table
	// ddl: the tables, with the indexes the plan must use (by name),
	// and rows: many instances, few claims, as the planner should
	// expect.
	ddl, rows string
	indexes   []string
}

// quoted: a claimable workflow whose names all need quoting.
var quoted = Table{
	Instances: "Billing.Invoice Queue", IDColumn: "Id", StatusColumn: "State",
	Claims: "Billing.Claims", InstanceColumn: "Invoice Id", NodeColumn: "Node",
	TokenColumn: "Token", ClaimedAtColumn: "Claimed At", ExpiresAtColumn: "Expires At",
}

func goldenExpiries() []goldenExpiry {
	return []goldenExpiry{
		// The tables of docs/claim-protocol.md.
		{name: "claim_protocol", table: table, ddl: DDL,
			rows: `INSERT INTO app.invoice (status) SELECT 'Sent' FROM generate_series(1, 10000);
				INSERT INTO app.invoice_claim (instance_id, node, token, expires_at) SELECT id, 'n1', 't', now() FROM app.invoice LIMIT 10;
				ANALYZE app.invoice, app.invoice_claim`,
			indexes: []string{"invoice_claim_expires_at_idx", "invoice_pkey"}},
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
			indexes: []string{"claims_expiry_idx", "queue_pkey"}},
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
	for _, g := range goldenExpiries() {
		stmt, err := g.table.expireStatement(record)
		if err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		gs[g.name] = sqltest.ByHand(t, files, "expire", g.table.expireSlots(record), stmt, "kind (the Record statement's)")
	}
	return gs
}

// goldenGrades: the statements of Grade and Grades for the schema
// enginehealth, by the name of their files, checked by sqltest.ByHand.
func goldenGrades(t *testing.T) map[string]sqltext.Prepared {
	t.Helper()
	st, slots := gradeStatementsOf(""), newGradeSlots("")
	return map[string]sqltext.Prepared{
		"grade":  sqltest.ByHand(t, files, "grade", slots, st.grade),
		"grades": sqltest.ByHand(t, files, "grades", slots, st.grades),
	}
}

// TestGoldenStatements: each shape of Expire's statement, as it runs, is
// committed in testdata/expire/, and Grade's and Grades' for the schema
// enginehealth in testdata/ (go test ./claims -run TestGoldenStatements
// -update rewrites them): a change to a statement shows in the diff as
// the SQL that will run. Every file of sql/ is one of them.
func TestGoldenStatements(t *testing.T) {
	sqltest.Golden(t, filepath.Join("testdata", "expire"), goldenStatements(t), *update)
	grades := goldenGrades(t)
	sqltest.Golden(t, "testdata", grades, *update)
	sqltest.FilesUsed(t, files, []string{"expire", "grade", "grades"})
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

// TestStatementsPlan: Expire's statement plans on real PostgreSQL, and
// with sequential scans off it scans no table: it picks the expired
// claims through the index on the expiry column and reads their
// instances by primary key.
func TestStatementsPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sql.Open("postgres", pg.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, g := range goldenExpiries() {
		if _, err := db.Exec(g.ddl + ";" + g.rows); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(expiryLogDDL); err != nil {
		t.Fatal(err)
	}
	for _, g := range goldenExpiries() {
		record, args := goldenRecord("expired")
		stmt, err := g.table.expireStatement(record)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := explain(ctx, db, stmt, append([]any{500}, args...))
		if err != nil {
			t.Fatalf("%s does not plan: %v", g.name, err)
		}
		if strings.Contains(plan, "Seq Scan on ") {
			t.Errorf("%s scans a table sequentially although sequential scans are off (no index serves it):\n%s", g.name, plan)
		}
		for _, index := range g.indexes {
			if !strings.Contains(plan, "using "+index) && !strings.Contains(plan, "Index Scan on "+index) {
				t.Errorf("%s does not use the index %s:\n%s", g.name, index, plan)
			}
		}
	}
}

// explain returns the plan of stmt, with sequential scans off.
func explain(ctx context.Context, db *sql.DB, stmt string, args []any) (string, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		return "", err
	}
	rows, err := tx.QueryContext(ctx, "EXPLAIN "+stmt, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			return "", err
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n"), rows.Err()
}
