package recovery

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/internal/testkit/leadertest"
)

var update = flag.Bool("update", false, "rewrite the golden statements in testdata/ from the templates")

// goldenBatch is one shape of a repair batch's statement.
type goldenBatch struct {
	name, about string
	w           Workflow
	c           Cause
	attr        attribution
	cur         cursor
	skipLocked  bool
	debug       bool
}

// goldenWorkflows: invoices, claimable, with error and updated columns
// and a task whose policies match non-retryable errors; reports, not
// claimable, without either.
func goldenWorkflows() (invoices, reports Workflow) {
	tbl := &claims.Table{Instances: "app.invoices", IDColumn: "id", StatusColumn: "status",
		Claims: "app.invoice_claim", InstanceColumn: "instance_id", NodeColumn: "node", TokenColumn: "token",
		ClaimedAtColumn: "claimed_at", ExpiresAtColumn: "expires_at"}
	send := Task{Task: claims.Task{Name: "send", Begin: "Created", Interim: "Sending", Ends: []string{"Sent"}, Failed: "SendFailed"},
		OnInterrupt: Policy{Strategy: StrategyRetry, MaxAttempts: 3, Backoff: Backoff{Kind: BackoffExponential, Base: time.Second, MaxDelay: time.Minute, Jitter: 0.2},
			NonRetryable: []string{`^card declined`, `\bfatal\b`}},
		OnFailure: Policy{Strategy: StrategyRetry, MaxAttempts: 2, Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}}}
	invoices = Workflow{Name: "invoices", Table: "app.invoices", IDColumn: "id", StatusColumn: "status", Claims: tbl,
		ErrorColumn: "last_error", UpdatedColumn: "updated_at", Tasks: []Task{send}}
	reports = Workflow{Name: "reports", Table: "app.reports", IDColumn: "id", StatusColumn: "state",
		Tasks: []Task{{Task: claims.Task{Name: "render", Begin: "Queued", Interim: "Rendering", Ends: []string{"Done"}, Failed: "Failed"}, AtomicInternal: true}}}
	return invoices, reports
}

func goldenBatches() []goldenBatch {
	invoices, reports := goldenWorkflows()
	return []goldenBatch{
		{name: "interrupt_first", about: "the first batch of a claimable task's interruptions, with non-retryable patterns",
			w: invoices, c: CauseInterrupt},
		{name: "interrupt_attributed", about: "a later batch of the instances whose claims the run expired, attributed to their nodes, beside running engines, with the debug log on",
			w: invoices, c: CauseInterrupt, attr: attribution{on: true, expired: []string{"1", "2"}}, cur: cursor{id: "2", ids: []string{"1", "2", "3"}}, skipLocked: true, debug: true},
		{name: "failure_first", about: "the first batch of a task's failed instances, from the watermark",
			w: invoices, c: CauseFailure, cur: cursor{at: "2026-11-26 09:00:00+00"}},
		{name: "failure_cursor", about: "a later batch of failed instances, after the last (updated, id) picked",
			w: invoices, c: CauseFailure, cur: cursor{at: "2026-11-26 09:00:00+00", id: "17"}},
		{name: "not_claimable", about: "an atomic task of a workflow without claims or an error column",
			w: reports, c: CauseInterrupt, cur: cursor{id: "9"}},
	}
}

func goldenRepairer() *Repairer {
	invoices, reports := goldenWorkflows()
	events := audit.New("enginehealth")
	return New(Config{Events: events, Schema: "enginehealth", Workflows: []Workflow{invoices, reports}, BatchSize: 500, Log: leadertest.Quiet})
}

func (g goldenBatch) render(t *testing.T, r *Repairer) sqltext.Statement {
	t.Helper()
	st, err := r.renderBatch(g.w, g.w.Tasks[0], g.c, g.w.Claims, g.attr, g.cur, g.skipLocked, g.debug, 42)
	if err != nil {
		t.Fatalf("%s: %v", g.name, err)
	}
	return st
}

// TestGoldenStatements: each shape of the repair batch's statement, as it
// runs, is committed in testdata/policy_batch/ (go test ./recovery -run
// TestGoldenStatements -update rewrites them): a change to a statement
// shows in the diff as the SQL that will run.
func TestGoldenStatements(t *testing.T) {
	r := goldenRepairer()
	for _, g := range goldenBatches() {
		st := g.render(t, r)
		got := "-- policy_batch: " + g.about + "\n" + st.Header() + st.SQL + "\n"
		path := filepath.Join("testdata", "policy_batch", g.name+".sql")
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test ./recovery -run TestGoldenStatements -update writes it)", err)
		}
		if got != string(want) {
			t.Errorf("%s renders differently from %s (rerun with -update if the change is meant, and review the diff):\n%s", g.name, path, got)
		}
	}
}

// TestStatementsPlan: every golden statement plans on real PostgreSQL,
// and the pick reaches the instance table through its index on the
// status column when sequential scans are off (an index exists: none is
// needed).
func TestStatementsPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pg.MigratedDB(t)
	db.MustExec(`CREATE SCHEMA app;
		CREATE TABLE app.invoices (id bigserial PRIMARY KEY, status text NOT NULL, last_error text, updated_at timestamptz NOT NULL DEFAULT now());
		CREATE INDEX ON app.invoices (status, id);
		CREATE INDEX ON app.invoices (status, updated_at, id);
		CREATE TABLE app.invoice_claim (instance_id bigint PRIMARY KEY, node text NOT NULL, token text NOT NULL,
			claimed_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL);
		CREATE TABLE app.reports (id bigserial PRIMARY KEY, state text NOT NULL);
		CREATE INDEX ON app.reports (state, id);`)
	r := goldenRepairer()
	for _, g := range goldenBatches() {
		st := g.render(t, r)
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		tx.MustExec(`SET LOCAL enable_seqscan = off`)
		var lines []string
		err = tx.SelectContext(ctx, &lines, "EXPLAIN "+st.SQL, st.Args...)
		_ = tx.Rollback()
		if err != nil {
			t.Fatalf("%s does not plan: %v", g.name, err)
		}
		plan := strings.Join(lines, "\n")
		table := strings.TrimPrefix(g.w.Table, "app.")
		for _, l := range lines {
			if strings.Contains(l, "Seq Scan on "+table+" b") {
				t.Errorf("%s: the pick scans %s sequentially although an index on its status exists:\n%s", g.name, table, plan)
			}
		}
		// The indexes above are named table_status_…_idx.
		if index := table + "_" + g.w.StatusColumn + "_"; !strings.Contains(plan, "using "+index) && !strings.Contains(plan, "Index Scan on "+index) {
			t.Errorf("%s: the pick does not use an index on %s.%s:\n%s", g.name, table, g.w.StatusColumn, plan)
		}
	}
}
