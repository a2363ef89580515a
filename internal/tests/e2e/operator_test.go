package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/app/demoengine"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// TestManualRecoveryThroughNonMaster: the operator's check, recover,
// holds decisions and retries, sent to a node that is not the master,
// reach the master; a dry run changes nothing; a bad scope is a 400; a
// refused retry exits 4. The operators are named (api.tokens_file) and
// reads need a token (api.auth_reads): the decisions are recorded as
// alice's, via the node she asked; a read token may read but not decide.
func TestManualRecoveryThroughNonMaster(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	tokens := filepath.Join(c.dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte(operatorEntry("alice", "alice-token", "operate")+operatorEntry("reader", "reader-token", "read")), 0o600); err != nil {
		t.Fatal(err)
	}
	base := c.config("NAME", demoengine.WorkflowsYAML(time.Minute))
	base = replaceOnce(t, base, "failed: ShipFailed\n", "failed: ShipFailed\n        on_interrupt: {strategy: hold}\n")
	base = replaceOnce(t, base, "health:\n", "health:\n  schedule: \"@every 1h\"\n")
	base = replaceOnce(t, base, "api:\n  listen: 127.0.0.1:0\n", "api:\n  listen: 127.0.0.1:0\n  tokens_file: "+tokens+"\n  auth_reads: true\n")
	c.seed(base, 20)
	a := c.start("node-a", strings.ReplaceAll(base, "NAME", "node-a"))
	b := c.start("node-b", strings.ReplaceAll(base, "NAME", "node-b"))
	c.waitRegistered(a, 30*time.Second)
	c.waitRegistered(b, 30*time.Second)
	waitNodeStatus(t, c, "node-a", nodes.StatusReady)
	waitNodeStatus(t, c, "node-b", nodes.StatusReady)
	master := c.waitTerm(t, 0, 30*time.Second).Node
	other := "node-a"
	if master == "node-a" {
		other = "node-b"
	}
	on, _ := c.node(other)
	addr := on.APIAddress

	// A crash left 5 orders mid-reserve without claims, and one under an
	// expired claim.
	c.db.MustExec(`UPDATE demo.orders SET status = 'Reserving' WHERE id <= 6`)
	c.db.MustExec(`INSERT INTO demo.orders_claim VALUES (6, 'engine-x', 'tok6', now() - interval '1h', now() - interval '1m')`)
	tok := []string{"ENGINEHEALTH_TOKEN=alice-token"}
	ro := []string{"ENGINEHEALTH_TOKEN=reader-token"}
	if _, errOut, code := cli(t, nil, "runs", "--api", addr); code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("runs without a token, reads behind tokens: exit %d: %s", code, errOut)
	}

	out, errOut, code := cli(t, tok, "recover", "--dry-run", "-o", "json", "--api", addr)
	if code != 0 {
		t.Fatalf("recover --dry-run: exit %d: %s", code, errOut)
	}
	var plan apitype.RecoveryAnswer
	if err := json.Unmarshal([]byte(out), &plan); err != nil || !plan.DryRun || len(plan.Plan) != 1 {
		t.Fatalf("dry run answer: %v\n%s", err, out)
	}
	if p := plan.Plan[0]; p.ClaimsToExpire != 1 || p.Tasks[0].Task != "reserve" || p.Tasks[0].Planned != 6 || p.Tasks[0].To != "Created" ||
		len(p.Tasks[0].Plan) != 1 || p.Tasks[0].Plan[0].Instances != 6 || p.Tasks[0].Plan[0].Effect != "→ Created, retry 1 of 10 at once" {
		t.Fatalf("plan %+v", p)
	}
	var stuck int
	if err := c.db.Get(&stuck, `SELECT count(*) FROM demo.orders WHERE status = 'Reserving'`); err != nil {
		t.Fatal(err)
	}
	if stuck != 6 {
		t.Fatalf("the dry run changed something: %d stuck", stuck)
	}
	out, _, _ = cli(t, tok, "recover", "--dry-run", "--api", addr)
	if !strings.Contains(out, "dry run: nothing was changed") || !strings.Contains(out, "Reserving") {
		t.Fatalf("dry run table:\n%s", out)
	}

	_, errOut, code = cli(t, tok, "recover", "--workflow", "reports", "--api", addr)
	if code != 1 || !strings.Contains(errOut, "400") || !strings.Contains(errOut, "not claimable") {
		t.Fatalf("recover of a non-claimable workflow: exit %d: %s", code, errOut)
	}
	_, errOut, code = cli(t, nil, "recover", "--api", addr)
	if code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("recover without a token: exit %d: %s", code, errOut)
	}

	out, errOut, code = cli(t, tok, "recover", "--workflow", "orders", "-o", "json", "--api", addr)
	if code != 0 {
		t.Fatalf("recover: exit %d: %s", code, errOut)
	}
	var res apitype.RecoveryAnswer
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Result == nil || res.Result.Done() != 6 || res.Result.ClaimsExpired != 1 {
		t.Fatalf("recover answer: %v\n%s", err, out)
	}
	if err := c.db.Get(&stuck, `SELECT count(*) FROM demo.orders WHERE status = 'Reserving'`); err != nil {
		t.Fatal(err)
	}
	if stuck != 0 {
		t.Fatalf("%d orders still stuck after recover", stuck)
	}
	var run recovery.RunRow
	if err := c.db.Get(&run, `SELECT id, term, master, kind, trigger, scope::text AS scope, claims_expired, planned, done, status, started_at, finished_at, error, resumed_from
		FROM enginehealth.runs WHERE id = $1`, res.Result.RunID); err != nil {
		t.Fatal(err)
	}
	if run.Master != master || run.Trigger != recovery.TriggerManual || run.Status != "finished" ||
		run.ClaimsExpired != 1 || run.Planned != 6 || run.Done != 6 {
		t.Fatalf("run %+v: want a finished manual run by the master %s", run, master)
	}

	out, errOut, code = cli(t, tok, "check", "-o", "json", "--api", addr)
	if code != 0 || !strings.Contains(out, `"run_id"`) {
		t.Fatalf("check through %s: exit %d: %s%s", other, code, out, errOut)
	}
	out, _, code = cli(t, ro, "runs", "--api", addr)
	if code != 0 || !strings.Contains(out, "manual") || !strings.Contains(out, master) {
		t.Fatalf("runs:\n%s", out)
	}
	out, _, code = cli(t, ro, "events", "-o", "json", "--limit", "1000", "--api", addr)
	var es []apitype.Event
	if err := json.Unmarshal([]byte(out), &es); code != 0 || err != nil {
		t.Fatalf("events: exit %d, %v", code, err)
	}
	repaired := 0
	for _, e := range es {
		if e.Kind == audit.KindRepair && e.Workflow != nil && *e.Workflow == "orders" {
			repaired++
		}
	}
	if repaired != 6 {
		t.Fatalf("%d repair events listed, want 6", repaired)
	}

	holdsAndRetry(t, c, addr, tok, ro, other)
}

// operatorEntry is an entry of a tokens file.
func operatorEntry(name, token, role string) string {
	sum := sha256.Sum256([]byte(token))
	return "- {name: " + name + ", sha256: " + hex.EncodeToString(sum[:]) + ", role: " + role + "}\n"
}

// holdsAndRetry: two shipments interrupted under a hold policy are
// listed, one released by holds retry and one failed by holds fail
// --all, then retried by hand; a repeated retry is refused. tok may
// decide, ro (a read token) only read; the decisions are recorded as
// alice's, via the node at addr (via).
func holdsAndRetry(t *testing.T, c *cluster, addr string, tok, ro []string, via string) {
	status := func(id int) string {
		var s string
		if err := c.db.Get(&s, `SELECT status FROM demo.orders WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		return s
	}
	c.db.MustExec(`UPDATE demo.orders SET status = 'Shipping', last_error = 'carrier timeout' WHERE id IN (7, 8)`)
	if out, errOut, code := cli(t, tok, "check", "--api", addr); code != 0 {
		t.Fatalf("check: exit %d: %s%s", code, out, errOut)
	}
	out, errOut, code := cli(t, ro, "holds", "-o", "json", "--api", addr)
	var hs []apitype.Hold
	if err := json.Unmarshal([]byte(out), &hs); code != 0 || err != nil || len(hs) != 2 || hs[0].State != "Shipping" ||
		hs[0].LastError == nil || *hs[0].LastError != "carrier timeout" {
		t.Fatalf("holds: exit %d, %v: %s%s", code, err, out, errOut)
	}
	out, _, _ = cli(t, ro, "holds", "--api", addr)
	if !strings.Contains(out, "LAST ERROR") || !strings.Contains(out, "carrier timeout") {
		t.Fatalf("holds table:\n%s", out)
	}
	if _, errOut, code := cli(t, nil, "holds", "retry", "orders/7", "--api", addr); code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("holds retry without a token: exit %d: %s", code, errOut)
	}
	if _, errOut, code := cli(t, ro, "holds", "retry", "orders/7", "--api", addr); code != 1 || !strings.Contains(errOut, "403") ||
		!strings.Contains(errOut, "needs role operate") {
		t.Fatalf("holds retry with a read token: exit %d: %s", code, errOut)
	}
	out, errOut, code = cli(t, tok, "holds", "retry", "orders/7", "orders/99", "--reason", "carrier back", "--api", addr)
	if code != 0 || !strings.Contains(out, "1 held instance sent back to begin") || !strings.Contains(out, "not held   orders/99") {
		t.Fatalf("holds retry: exit %d: %s%s", code, out, errOut)
	}
	if s := status(7); s != "Reserved" {
		t.Fatalf("released order in %s, want Reserved", s)
	}
	out, errOut, code = cli(t, tok, "holds", "fail", "--all", "--workflow", "orders", "--api", addr)
	if code != 0 || !strings.Contains(out, "1 held instance failed") || status(8) != "ShipFailed" {
		t.Fatalf("holds fail --all: exit %d: %s%s (order 8 in %s)", code, out, errOut, status(8))
	}
	out, errOut, code = cli(t, tok, "retry", "orders", "8", "--reason", "customer called", "--api", addr)
	if code != 0 || !strings.Contains(out, "orders/8: ShipFailed -> Reserved (task ship), manual retry 1") || status(8) != "Reserved" {
		t.Fatalf("retry: exit %d: %s%s", code, out, errOut)
	}
	if _, errOut, code = cli(t, tok, "retry", "orders", "8", "--api", addr); code != 4 || !strings.Contains(errOut, "409") ||
		!strings.Contains(errOut, "is in Reserved") {
		t.Fatalf("repeated retry: exit %d: %s", code, errOut)
	}
	if _, errOut, code = cli(t, tok, "retry", "orders", "x'; drop table demo.orders; --", "--api", addr); code != 1 ||
		!strings.Contains(errOut, "404") {
		t.Fatalf("retry of a hostile id: exit %d: %s", code, errOut)
	}
	// The instance's timeline, through the non-master.
	out, errOut, code = cli(t, ro, "events", "--instance", "orders/8", "-o", "json", "--api", addr)
	var v apitype.InstanceView
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.State == nil || *v.State != "Reserved" ||
		len(v.Attempts) != 1 || v.Attempts[0].Manual != 1 || v.Attempts[0].State != recovery.AttemptRetried {
		t.Fatalf("events --instance -o json: exit %d, %v: %s%s", code, err, out, errOut)
	}
	var timeline []string
	for _, e := range v.Events {
		timeline = append(timeline, string(e.Kind))
	}
	if got := strings.Join(timeline, " "); got != "instance_held hold_decided manual_retry" {
		t.Fatalf("timeline of orders/8: %s", got)
	}
	out, _, _ = cli(t, ro, "events", "--instance", "orders/8", "--api", addr)
	if !strings.HasPrefix(out, "orders/8: in Reserved, unclaimed\ntask ship: retried (failure), 0 retries by the policy, 1 by operators") {
		t.Fatalf("events --instance:\n%s", out)
	}
	if _, errOut, code = cli(t, ro, "events", "--instance", "orders/424242", "--api", addr); code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("events --instance of an unknown instance: exit %d: %s", code, errOut)
	}
	out, errOut, code = cli(t, ro, "retries", "stats", "-o", "json", "--api", addr)
	var st []apitype.RetryStats
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || len(st) != 2 || st[0].Task != "reserve" ||
		st[0].Scheduled != 6 || st[1].Task != "ship" || st[1].Instances != 2 || st[1].Manual != 2 || st[1].Failed != 0 || st[1].HoldsOpen != 0 {
		t.Fatalf("retries stats: exit %d, %v: %s%s", code, err, out, errOut)
	}
	if out, _, _ = cli(t, ro, "retries", "stats", "--api", addr); !strings.Contains(out, "SUCCESS RATE") {
		t.Fatalf("retries stats table:\n%s", out)
	}
	var kinds []string
	if err := c.db.Select(&kinds, `SELECT kind || ':' || actor || ' via ' || coalesce(via, '-') FROM enginehealth.event_log
		WHERE workflow = 'orders' AND instance IN ('7', '8') AND kind IN ('hold_decided', 'manual_retry') ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	by := "alice (operator) via " + via
	if len(kinds) != 3 || kinds[0] != "hold_decided:"+by || kinds[1] != "hold_decided:"+by || kinds[2] != "manual_retry:"+by {
		t.Fatalf("operator events: %q, want each by %s", kinds, by)
	}
	if out, _, _ = cli(t, ro, "events", "--kind", "manual_retry", "--api", addr); !strings.Contains(out, by) {
		t.Fatalf("events table of the manual retry, want %q:\n%s", by, out)
	}
}
