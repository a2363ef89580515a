package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/app/demoengine"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/nodes"
)

// threeNodes starts node-a, node-b and node-c on the demo workflows with
// a 1 s check and token tok, and waits until they are Ready with a master.
func threeNodes(t *testing.T, c *cluster) (map[string]*daemon, string, int64) {
	t.Helper()
	cfg := func(name string) string {
		return c.configWith(name, cfgOpts{Schedule: "@every 1s", TokenEnv: "EH_TOKEN", Extra: demoengine.WorkflowsYAML(time.Minute)})
	}
	c.seed(cfg("seed"), 20, "EH_TOKEN=tok")
	ds := map[string]*daemon{}
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		ds[name] = c.startEnv(name, cfg(name), "EH_TOKEN=tok")
	}
	for name := range ds {
		waitNodeStatus(t, c, name, nodes.StatusReady)
	}
	first := c.waitTerm(t, 0, 30*time.Second)
	return ds, first.Node, first.Term
}

func (c *cluster) stuckOrders(t *testing.T) (stuck, claims int) {
	t.Helper()
	if err := c.db.Get(&stuck, `SELECT count(*) FROM demo.orders WHERE status = 'Reserving'`); err != nil {
		t.Fatal(err)
	}
	if err := c.db.Get(&claims, `SELECT count(*) FROM demo.orders_claim`); err != nil {
		t.Fatal(err)
	}
	return stuck, claims
}

func apiOf(t *testing.T, c *cluster, name string) string {
	t.Helper()
	n, err := c.node(name)
	if err != nil {
		t.Fatal(err)
	}
	return n.APIAddress
}

// TestPauseAcrossFailover: a paused cluster marks nodes but repairs
// nothing, across a master failover; resume catches up. Pause is sent to
// a non-master and done by the master; a second pause exits 4; check says
// it is paused and exits 4; /metrics says paused.
func TestPauseAcrossFailover(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ds, master, term := threeNodes(t, c)
	var other, third string
	for _, n := range []string{"node-a", "node-b", "node-c"} {
		switch {
		case n == master:
		case other == "":
			other = n
		default:
			third = n
		}
	}
	tok := []string{"ENGINEHEALTH_TOKEN=tok"}
	addr := apiOf(t, c, other)

	if _, errOut, code := cli(t, nil, "pause", "--reason", "x", "--api", addr); code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("pause without a token: exit %d: %s", code, errOut)
	}
	if _, errOut, code := cli(t, tok, "pause", "--api", addr); code != 2 || !strings.Contains(errOut, "--reason is required") {
		t.Fatalf("pause without a reason: exit %d: %s", code, errOut)
	}
	if _, errOut, code := cli(t, tok, "resume", "--api", addr); code != 4 || !strings.Contains(errOut, "not paused") {
		t.Fatalf("resume of a running cluster: exit %d: %s", code, errOut)
	}
	out, errOut, code := cli(t, tok, "pause", "--reason", "engine schema migration", "-o", "json", "--api", addr)
	var p apitype.Pause
	if code != 0 || json.Unmarshal([]byte(out), &p) != nil || !p.Paused || p.Actor != "operator (operator)" || p.Term == nil || *p.Term != term {
		t.Fatalf("pause through %s: exit %d: %s%s; want it done by the master %s in its term, by an operator at %s", other, code, out, errOut, master, other)
	}
	if _, errOut, code := cli(t, tok, "pause", "--reason", "again", "--api", addr); code != 4 || !strings.Contains(errOut, "engine schema migration") {
		t.Fatalf("second pause: exit %d: %s", code, errOut)
	}

	// An engine crash leaves 5 orders mid-reserve and one under an
	// expired claim.
	c.db.MustExec(`UPDATE demo.orders SET status = 'Reserving' WHERE id <= 6`)
	c.db.MustExec(`INSERT INTO demo.orders_claim VALUES (6, 'engine-x', 'tok6', now() - interval '1h', now() - interval '1m')`)
	c.waitCheckPassAfter(t, time.Now())
	out, _, code = cli(t, tok, "check", "--api", addr)
	if code != 4 || !strings.Contains(out, "paused by operator (operator)") || !strings.Contains(out, "nothing repaired") ||
		!strings.Contains(out, "done by "+master+"\n") {
		t.Fatalf("check while paused: exit %d:\n%s", code, out)
	}

	// The master dies; the next one stays paused and marks it.
	ds[master].signal(t, syscall.SIGKILL)
	next := c.waitTerm(t, term, 30*time.Second)
	waitNodeStatus(t, c, master, nodes.StatusNotResponding)
	eventually(t, 30*time.Second, "two check passes of the new master", func() (bool, error) {
		var n int
		err := c.db.Get(&n, `SELECT count(*) FROM enginehealth.runs WHERE kind = 'check' AND status = 'finished' AND term = $1`, next.Term)
		return n >= 2, err
	})
	if stuck, claims := c.stuckOrders(t); stuck != 6 || claims != 1 {
		t.Fatalf("paused cluster repaired across the failover: %d stuck, %d claims", stuck, claims)
	}
	resp, err := http.Get("http://" + apiOf(t, c, third) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "\nenginehealth_paused 1\n") {
		t.Fatal("/metrics does not say paused")
	}

	out, errOut, code = cli(t, tok, "resume", "--reason", "migration done", "--api", apiOf(t, c, next.Node))
	if code != 0 || !strings.Contains(out, "resumed by operator (operator)") {
		t.Fatalf("resume: exit %d: %s%s", code, out, errOut)
	}
	eventually(t, 30*time.Second, "the paused work caught up", func() (bool, error) {
		stuck, claims := c.stuckOrders(t)
		return stuck == 0 && claims == 0, nil
	})
	var es []audit.Event
	if err := c.db.Select(&es, `SELECT kind, actor, reason, term, via FROM enginehealth.events WHERE kind IN ('paused', 'resumed') ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	// The single token is the operator "operator"; via: the node asked.
	if len(es) != 2 || es[0].Kind != audit.KindPaused || es[0].Reason != "engine schema migration" || es[0].Via == nil || *es[0].Via != other ||
		es[1].Kind != audit.KindResumed || *es[1].Term != next.Term || es[1].Via == nil || *es[1].Via != next.Node {
		t.Fatalf("pause events %+v", es)
	}

	// Operator actions and status changes are in the masters' logs, at
	// info, with their events' fields.
	for _, want := range []struct {
		d      *daemon
		fields map[string]any
	}{
		{ds[master], map[string]any{"kind": string(audit.KindPaused), "actor": "operator (operator)", "via": other, "term": float64(term), "reason": "engine schema migration"}},
		{ds[next.Node], map[string]any{"kind": string(audit.KindNodeStatus), "node": master, "from_state": string(nodes.StatusReady),
			"to_state": string(nodes.StatusNotResponding), "term": float64(next.Term)}},
		{ds[next.Node], map[string]any{"kind": string(audit.KindResumed), "actor": "operator (operator)", "via": next.Node, "reason": "migration done"}},
	} {
		if !want.d.logged("event", want.fields) {
			t.Errorf("%s logged no event line with %v:\n%s", want.d.name, want.fields, want.d.stderr.String())
		}
	}
}

// TestCheckForceOverridesGuard: with two of three nodes dead the guard
// holds and check says why (exit 4); check --force --reason marks them
// and repairs, once, recorded as a guard_override event.
func TestCheckForceOverridesGuard(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ds, master, _ := threeNodes(t, c)
	tok := []string{"ENGINEHEALTH_TOKEN=tok"}
	var dead []string
	for name, d := range ds {
		if name != master {
			d.signal(t, syscall.SIGKILL)
			d.wait(t, 10*time.Second)
			dead = append(dead, name)
		}
	}
	// Their last heartbeats were up to an interval apart: a pass could
	// fall between the two going stale and mark one alone, which the
	// guard allows (1 of 3). Both last beat at the same time, as two
	// nodes lost at once do.
	c.db.MustExec(`UPDATE enginehealth.nodes SET last_active = (SELECT min(last_active) FROM enginehealth.nodes WHERE name = ANY($1))
		WHERE name = ANY($1)`, pq.Array(dead))
	c.db.MustExec(`UPDATE demo.orders SET status = 'Reserving' WHERE id <= 3`)
	c.db.MustExec(`INSERT INTO demo.orders_claim VALUES (3, $1, 'tok3', now() - interval '1h', now() - interval '1m')`, dead[0])
	eventually(t, 30*time.Second, "the disruption guard holds", func() (bool, error) {
		var n int
		err := c.db.Get(&n, `SELECT count(*) FROM enginehealth.events WHERE kind = 'disruption'`)
		return n > 0, err
	})
	addr := apiOf(t, c, master)
	out, errOut, code := cli(t, tok, "check", "--api", addr)
	if code != 4 || !strings.Contains(out, "disruption guard holds: 2 of 3 nodes look unresponsive") || !strings.Contains(errOut, "--force") {
		t.Fatalf("check under the guard: exit %d:\n%s%s", code, out, errOut)
	}
	if _, errOut, code := cli(t, tok, "check", "--force", "--api", addr); code != 2 || !strings.Contains(errOut, "--force needs --reason") {
		t.Fatalf("check --force without a reason: exit %d: %s", code, errOut)
	}
	out, errOut, code = cli(t, tok, "check", "--force", "--reason", "both hosts were decommissioned", "--api", addr)
	if code != 0 || !strings.Contains(out, "disruption guard overridden for this pass") {
		t.Fatalf("check --force: exit %d:\n%s%s", code, out, errOut)
	}
	for _, name := range dead {
		if n, err := c.node(name); err != nil || n.Status != nodes.StatusNotResponding {
			t.Fatalf("%s after check --force: %+v %v", name, n.Status, err)
		}
	}
	if stuck, claims := c.stuckOrders(t); stuck != 0 || claims != 0 {
		t.Fatalf("check --force left %d stuck, %d claims", stuck, claims)
	}
	var reasons []string
	if err := c.db.Select(&reasons, `SELECT reason FROM enginehealth.events WHERE kind = 'guard_override'`); err != nil {
		t.Fatal(err)
	}
	if len(reasons) != 1 || !strings.Contains(reasons[0], "both hosts were decommissioned") {
		t.Fatalf("guard_override events %q", reasons)
	}
}
