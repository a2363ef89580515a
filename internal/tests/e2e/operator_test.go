package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/app/demoengine"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// TestManualRecoveryThroughNonMaster: the operator's check and recover,
// sent to a node that is not the master, reach the master; a dry run
// changes nothing; a bad scope is a 400.
func TestManualRecoveryThroughNonMaster(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	base := c.config("NAME", demoengine.WorkflowsYAML(time.Minute))
	base = replaceOnce(t, base, "health:\n", "health:\n  schedule: \"@every 1h\"\n")
	base = replaceOnce(t, base, "api:\n  listen: 127.0.0.1:0\n", "api:\n  listen: 127.0.0.1:0\n  token_env: EH_TOKEN\n")
	seedCfg := filepath.Join(c.dir, "seed.yaml")
	if err := os.WriteFile(seedCfg, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	seed := exec.Command(engineBin, "seed", "--config", seedCfg, "--instances", "20")
	seed.Env = append(os.Environ(), "ENGINEHEALTH_DSN="+c.dsn, "EH_TOKEN=tok")
	if out, err := seed.CombinedOutput(); err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	env := []string{"EH_TOKEN=tok"}
	a := c.startEnv("node-a", strings.ReplaceAll(base, "NAME", "node-a"), env...)
	b := c.startEnv("node-b", strings.ReplaceAll(base, "NAME", "node-b"), env...)
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
	tok := []string{"ENGINEHEALTH_TOKEN=tok"}

	out, errOut, code := cli(t, tok, "recover", "--dry-run", "-o", "json", "--api", addr)
	if code != 0 {
		t.Fatalf("recover --dry-run: exit %d: %s", code, errOut)
	}
	var plan api.RecoveryAnswer
	if err := json.Unmarshal([]byte(out), &plan); err != nil || !plan.DryRun || len(plan.Plan) != 1 {
		t.Fatalf("dry run answer: %v\n%s", err, out)
	}
	if p := plan.Plan[0]; p.ClaimsToExpire != 1 || p.Tasks[0].Task != "reserve" || p.Tasks[0].Planned != 6 || p.Tasks[0].To != "Created" {
		t.Fatalf("plan %+v", p)
	}
	var stuck int
	c.db.Get(&stuck, `SELECT count(*) FROM demo.orders WHERE status = 'Reserving'`)
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
	var res api.RecoveryAnswer
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Result == nil || res.Result.Done() != 6 || res.Result.ClaimsExpired != 1 {
		t.Fatalf("recover answer: %v\n%s", err, out)
	}
	c.db.Get(&stuck, `SELECT count(*) FROM demo.orders WHERE status = 'Reserving'`)
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
	out, _, code = cli(t, nil, "runs", "--api", addr)
	if code != 0 || !strings.Contains(out, "manual") || !strings.Contains(out, master) {
		t.Fatalf("runs:\n%s", out)
	}
	out, _, code = cli(t, nil, "events", "-o", "json", "--limit", "1000", "--api", addr)
	var es []audit.Event
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
}
