package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/app/demoengine"
	"github.com/enginehealth/enginehealth/nodes"
)

// TestCrashedEngineGradesItsNode: an engine on node-a killed while it
// holds claims on three instances makes node-a ERROR once they are
// repaired (three interruptions, other work within the window); with
// failover.error_not_ready its /readyz answers 503, also after a clean
// restart (and systemd gets no READY=1), until an operator resets the
// grade with the CLI.
func TestCrashedEngineGradesItsNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	const token = "grade-test-token-0123"
	extra := fmt.Sprintf("failover:\n  max_error_fraction: 1\n  error_not_ready: true\n%s\n", demoengine.WorkflowsYAML(crashClaimTimeout))
	cfg := c.configWith("node-a", cfgOpts{Schedule: "@every " + crashCheckInterval.String(), TokenEnv: "EH_TEST_TOKEN", Extra: extra})
	c.seed(cfg, 50, "EH_TEST_TOKEN="+token)
	d := c.startEnv("node-a", cfg, "EH_TEST_TOKEN="+token)
	n := c.waitRegistered(d, 30*time.Second)
	cl := api.NewClient(n.APIAddress, "")
	eventually(t, 30*time.Second, "readyz 200", func() (bool, error) {
		r, err := cl.Ready(context.Background())
		return err == nil && r.Ready && r.Grade == nodes.GradeNormal, err
	})

	// The engine of node-a (claims name the sidecar's node) dies mid-task.
	engine := c.startProcess("engine-a", cfg, []string{"EH_TEST_TOKEN=" + token}, engineBin,
		"run", "--node", "node-a", "--workers", "3", "--task-duration", "1h")
	eventually(t, 30*time.Second, "the engine holds its claims", func() (bool, error) {
		var held int
		err := c.db.Get(&held, `SELECT count(*) FROM demo.orders_claim WHERE node = 'node-a'`)
		return err == nil && held == 3, err
	})
	engine.signal(t, syscall.SIGKILL)
	engine.wait(t, 10*time.Second)

	eventually(t, time.Minute, "readyz 503 for the ERROR grade", func() (bool, error) {
		r, err := cl.Ready(context.Background())
		var se *api.StatusError
		return errors.As(err, &se) && se.Code == 503 && r.Grade == nodes.GradeError && strings.Contains(r.Reason, "reset-grade"), nil
	})
	out, errOut, code := cli(t, nil, "nodes", "node-a", "--api", n.APIAddress)
	if code != 0 || !strings.Contains(out, "ERROR") || !strings.Contains(out, "second interruption within failover.window") {
		t.Fatalf("nodes node-a: exit %d\n%s%s", code, out, errOut)
	}
	// The same, as Prometheus sees it.
	scrape := func() string {
		t.Helper()
		resp, err := http.Get("http://" + n.APIAddress + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET /metrics: %d\n%s", resp.StatusCode, b)
		}
		return string(b)
	}
	m := scrape()
	for _, want := range []string{`enginehealth_self_failover_grade{grade="ERROR"} 1`, `enginehealth_node_failover_grade{grade="ERROR",node="node-a"} 1`,
		`enginehealth_is_master 1`, `enginehealth_nodes{status="Ready"} 1`, `enginehealth_database_up 1`, `enginehealth_grade_changes_total{grade="ERROR"} 1`,
		`enginehealth_api_requests_total{code="503",route="GET /readyz"}`, `enginehealth_check_passes_total{result="ok"}`, "process_start_time_seconds"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(m, `enginehealth_claims_expired_total 0`) || !strings.Contains(m, `enginehealth_claims_expired_total`) {
		t.Errorf("/metrics counts no expired claim")
	}
	var grades int
	if err := c.db.Get(&grades, `SELECT count(*) FROM enginehealth.events WHERE kind = 'node_grade' AND node = 'node-a'`); err != nil || grades != 2 {
		t.Fatalf("%d grade events (NORMAL→WARNING→ERROR), %v", grades, err)
	}

	// A clean restart keeps the grade: the node is Ready, but not ready
	// for engines, and systemd hears no READY=1.
	d.signal(t, syscall.SIGTERM)
	if code := d.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	notify := newNotifySocket(t)
	d = c.startEnv("node-a", cfg, "EH_TEST_TOKEN="+token, "NOTIFY_SOCKET="+notify.path)
	n = c.waitRegistered(d, 30*time.Second)
	cl = api.NewClient(n.APIAddress, "")
	notify.expectBefore(t, "not ready: failover grade ERROR", "READY=1")
	if r, err := cl.Ready(context.Background()); err == nil || r.Grade != nodes.GradeError || r.Status != string(nodes.StatusReady) {
		t.Fatalf("readyz of a restarted ERROR node: %+v, %v", r, err)
	}

	env := []string{"ENGINEHEALTH_TOKEN=" + token}
	out, errOut, code = cli(t, env, "node", "reset-grade", "node-a", "--reason", "engine fixed", "--api", n.APIAddress, "-o", "json")
	var ch apitype.GradeChange
	if code != 0 || json.Unmarshal([]byte(out), &ch) != nil || ch.From != nodes.GradeError || ch.To != nodes.GradeNormal {
		t.Fatalf("reset-grade: exit %d\n%s%s", code, out, errOut)
	}
	notify.expect(t, "READY=1")
	eventually(t, 30*time.Second, "readyz 200 after the reset", func() (bool, error) {
		r, err := cl.Ready(context.Background())
		return err == nil && r.Ready, err
	})
	_, errOut, code = cli(t, env, "node", "reset-grade", "node-a", "--api", n.APIAddress)
	if code != 4 || !strings.Contains(errOut, "NORMAL already") {
		t.Fatalf("second reset-grade: exit %d: %s", code, errOut)
	}
	_, errOut, code = cli(t, env, "node", "reset-grade", "nobody", "--api", n.APIAddress)
	if code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("reset-grade of an unknown node: exit %d: %s", code, errOut)
	}
	d.signal(t, syscall.SIGTERM)
	if code := d.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
