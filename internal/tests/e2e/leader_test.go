package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
)

// masterWatch polls the master flags until stopped and records the largest
// number of simultaneous masters it ever saw.
type masterWatch struct {
	mu   sync.Mutex
	max  int
	bad  []string
	stop chan struct{}
	done chan struct{}
}

func (c *cluster) watchMasters() *masterWatch {
	w := &masterWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var names []string
			if err := c.db.Select(&names, `SELECT name FROM enginehealth.nodes WHERE is_master ORDER BY name`); err == nil {
				w.mu.Lock()
				if len(names) > w.max {
					w.max = len(names)
				}
				if len(names) > 1 {
					w.bad = append(w.bad, strings.Join(names, ","))
				}
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *masterWatch) finish(t *testing.T) {
	t.Helper()
	close(w.stop)
	<-w.done
	if w.max > 1 {
		t.Fatalf("more than one master at once: %v", w.bad)
	}
}

// term reads the recorded fencing term.
func (c *cluster) term(t testing.TB) leader.Term {
	t.Helper()
	cur, err := testkit.Must(leader.NewFence(leader.FenceConfig{DB: c.db, Schema: "enginehealth", Events: audit.New("enginehealth")})).Current(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cur
}

// waitTerm waits for a recorded term above after and returns it.
func (c *cluster) waitTerm(t testing.TB, after int64, timeout time.Duration) leader.Term {
	t.Helper()
	var cur leader.Term
	eventually(t, timeout, "a new master in office", func() (bool, error) {
		var err error
		cur, err = testkit.Must(leader.NewFence(leader.FenceConfig{DB: c.db, Schema: "enginehealth", Events: audit.New("enginehealth")})).Current(context.Background())
		return err == nil && cur.Term > after, err
	})
	return cur
}

func TestThreeNodesFailover(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ds := map[string]*daemon{}
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		ds[name] = c.start(name, c.config(name, ""))
	}
	for _, d := range ds {
		c.waitRegistered(d, 30*time.Second)
	}
	watch := c.watchMasters()
	first := c.waitTerm(t, 0, 30*time.Second)
	for name := range ds {
		waitNodeStatus(t, c, name, nodes.StatusReady)
	}

	// Every node's API names the same master.
	for name := range ds {
		n, _ := c.node(name)
		l, err := api.NewClient(n.APIAddress, "").Leader(context.Background())
		if err != nil || l.Name != first.Node || l.Term != first.Term {
			t.Fatalf("GET /v1/leader on %s: %+v %v; want %s term %d", name, l, err, first.Node, first.Term)
		}
	}

	// SIGKILL the master: another takes office after the lease expires.
	killed := first.Node
	ds[killed].signal(t, syscall.SIGKILL)
	ds[killed].wait(t, 10*time.Second)
	second := c.waitTerm(t, first.Term, 30*time.Second)
	if second.Node == killed {
		t.Fatalf("the killed node %s is master again", killed)
	}
	old, err := c.node(killed)
	if err != nil {
		t.Fatal(err)
	}
	if old.IsMaster {
		t.Fatalf("the killed master's record keeps the master flag: %+v", old)
	}
	if n, _ := c.node(second.Node); !n.IsMaster {
		t.Fatalf("the new master %s has no master flag", second.Node)
	}

	// SIGTERM the new master: it resigns before it exits, so the last one
	// takes office without waiting for the lease TTL.
	start := time.Now()
	ds[second.Node].signal(t, syscall.SIGTERM)
	if code := ds[second.Node].wait(t, 10*time.Second); code != 0 {
		t.Fatalf("SIGTERMed master exit %d", code)
	}
	if keys := c.electionKeys(t); strings.Contains(keys, `"name":"`+second.Node+`"`) {
		t.Fatalf("the master exited without resigning: its election key is still there: %s", keys)
	}
	third := c.waitTerm(t, second.Term, 30*time.Second)
	if third.Node == second.Node || third.Node == killed {
		t.Fatalf("unexpected master %s", third.Node)
	}
	watch.finish(t)
	t.Logf("terms %d → %d → %d; graceful failover %s", first.Term, second.Term, third.Term, time.Since(start).Round(time.Millisecond))
}

func waitNodeStatus(t testing.TB, c *cluster, name string, status nodes.Status) {
	t.Helper()
	eventually(t, 30*time.Second, name+" "+string(status), func() (bool, error) {
		n, err := c.node(name)
		return err == nil && n.Status == status, err
	})
}

func TestReadinessAndNodeAck(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	cfg := strings.Replace(c.config("node-a", ""), "api:\n  listen: 127.0.0.1:0\n",
		"api:\n  listen: 127.0.0.1:0\n  token_env: EH_TEST_TOKEN\n", 1)
	const token = "s3cret-token"
	env := "EH_TEST_TOKEN=" + token

	d := c.startEnv("node-a", cfg, env)
	n := c.waitRegistered(d, 30*time.Second)
	cl := api.NewClient(n.APIAddress, "")
	eventually(t, 30*time.Second, "readyz 200 on a cold single-node cluster", func() (bool, error) {
		r, err := cl.Ready(context.Background())
		return err == nil && r.Ready, err
	})
	out, errOut, code := cli(t, nil, "status", "--api", n.APIAddress)
	if code != 0 || !strings.Contains(out, "node     Ready") || !strings.Contains(out, "master   node-a") {
		t.Fatalf("status of a ready node: exit %d\n%s%s", code, out, errOut)
	}

	// A crash: the restarted node stays out until acknowledged.
	d.signal(t, syscall.SIGKILL)
	d.wait(t, 10*time.Second)
	notify := newNotifySocket(t)
	d2 := c.startEnv("node-a", cfg, env, "NOTIFY_SOCKET="+notify.path)
	var n2 nodes.Node
	eventually(t, 30*time.Second, "restarted", func() (bool, error) {
		var err error
		n2, err = c.node("node-a")
		return err == nil && n2.Incarnation != n.Incarnation && d2.running(), err
	})
	cl = api.NewClient(n2.APIAddress, "")
	eventually(t, 30*time.Second, "readyz 503 naming the ack", func() (bool, error) {
		r, err := cl.Ready(context.Background())
		var se *api.StatusError
		return errors.As(err, &se) && se.Code == 503 && r.Status == string(nodes.StatusUnexpectedShutdown) &&
			strings.Contains(r.Reason, "node ack"), nil
	})
	// Alone and un-acknowledged, it does not campaign: no master at all.
	never(t, leaseTTL+time.Second, "the un-acknowledged node takes office", func() bool {
		cur := c.term(t)
		return cur.Incarnation != nil && *cur.Incarnation == n2.Incarnation
	})
	if _, err := cl.Leader(context.Background()); !isCode(err, 503) {
		t.Fatalf("GET /v1/leader with no node acting: %v, want 503", err)
	}
	if notify.seen("READY=1") {
		t.Fatal("READY=1 sent before the unexpected shutdown was acknowledged")
	}
	_, _, code = cli(t, nil, "status", "--api", n2.APIAddress)
	if code != 1 {
		t.Fatalf("status of a node that is not ready: exit %d, want 1", code)
	}
	// An engine unit's ExecStartPre waits, and gives up with the reason.
	_, errOut, code = cli(t, nil, "wait", "ready", "--timeout", "1500ms", "--api", n2.APIAddress)
	if code != 1 || !strings.Contains(errOut, "after 1.5s, not ready: Unexpected shutdown") || !strings.Contains(errOut, "node ack") {
		t.Fatalf("wait ready on an un-acknowledged node: exit %d: %s", code, errOut)
	}
	// One waiting through the ack returns once the node is Ready.
	waited := make(chan int, 1)
	var waitOut string
	go func() {
		var c int
		waitOut, _, c = cli(t, nil, "wait", "ready", "--timeout", "60s", "--api", n2.APIAddress)
		waited <- c
	}()

	// Without the token: refused, nothing changes.
	_, errOut, code = cli(t, nil, "node", "ack", "node-a", "--api", n2.APIAddress)
	if code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("ack without token: exit %d: %s", code, errOut)
	}
	_, errOut, code = cli(t, []string{"ENGINEHEALTH_TOKEN=wrong"}, "node", "ack", "node-a", "--api", n2.APIAddress)
	if code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("ack with a wrong token: exit %d: %s", code, errOut)
	}
	if m, _ := c.node("node-a"); m.Status != nodes.StatusUnexpectedShutdown {
		t.Fatalf("a refused ack changed the status to %s", m.Status)
	}
	// An unknown node: 404.
	_, errOut, code = cli(t, []string{"ENGINEHEALTH_TOKEN=" + token}, "node", "ack", "nope", "--api", n2.APIAddress)
	if code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("ack of an unknown node: exit %d: %s", code, errOut)
	}

	out, errOut, code = cli(t, []string{"ENGINEHEALTH_TOKEN=" + token}, "node", "ack", "node-a", "--api", n2.APIAddress,
		"--reason", "checked the host", "-o", "json")
	if code != 0 {
		t.Fatalf("ack: exit %d: %s", code, errOut)
	}
	var acked apitype.Node
	if err := json.Unmarshal([]byte(out), &acked); err != nil || acked.Status != nodes.StatusRecovering || acked.StatusReason != "checked the host" {
		t.Fatalf("ack answer: %v\n%s", err, out)
	}
	// Acknowledged, it campaigns, takes office and, after start-up
	// recovery, is Ready.
	notify.expect(t, "READY=1")
	if cur := c.term(t); cur.Incarnation == nil || *cur.Incarnation != n2.Incarnation {
		t.Fatalf("ready but not in office: %+v", cur)
	}
	eventually(t, 30*time.Second, "readyz 200 after ack", func() (bool, error) {
		r, err := cl.Ready(context.Background())
		return err == nil && r.Ready, err
	})
	if c := <-waited; c != 0 || !strings.Contains(waitOut, "ready: Ready") {
		t.Fatalf("wait ready through the ack: exit %d: %s", c, waitOut)
	}
	// A second ack: conflict, exit code 4 (refused).
	_, errOut, code = cli(t, []string{"ENGINEHEALTH_TOKEN=" + token}, "node", "ack", "node-a", "--api", n2.APIAddress)
	if code != 4 || !strings.Contains(errOut, "409") {
		t.Fatalf("second ack: exit %d: %s", code, errOut)
	}

	d2.signal(t, syscall.SIGTERM)
	if code := d2.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	// No daemon: the CLI says so.
	_, errOut, code = cli(t, []string{"ENGINEHEALTH_TOKEN=" + token}, "node", "ack", "node-a", "--api", n2.APIAddress)
	if code != 3 || !strings.Contains(errOut, "no enginehealth daemon answered") {
		t.Fatalf("ack without a daemon: exit %d: %s", code, errOut)
	}
	_, errOut, code = cli(t, nil, "wait", "ready", "--timeout", "1s", "--api", n2.APIAddress)
	if code != 3 || !strings.Contains(errOut, "no enginehealth daemon answered") {
		t.Fatalf("wait ready without a daemon: exit %d: %s", code, errOut)
	}
}

func TestMutationsOffWithoutToken(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	d := c.start("node-a", c.config("node-a", ""))
	n := c.waitRegistered(d, 30*time.Second)
	_, errOut, code := cli(t, []string{"ENGINEHEALTH_TOKEN=anything"}, "node", "ack", "node-a", "--api", n.APIAddress)
	if code != 1 || !strings.Contains(errOut, "403") || !strings.Contains(errOut, "no operator is configured") {
		t.Fatalf("ack on a daemon without a token: exit %d: %s", code, errOut)
	}
}

// electionKeys returns the values of this test's election keys.
func (c *cluster) electionKeys(t testing.TB) string {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, leader.ElectionPrefix("/"+strings.ReplaceAll(c.t.Name(), "/", "_")+"/"), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var vals []string
	for _, kv := range resp.Kvs {
		vals = append(vals, string(kv.Value))
	}
	return strings.Join(vals, " ")
}

// TestPausedMasterWritesNothingAfterNewMaster: SIGSTOP the master until
// another node takes office, then SIGCONT it. The old master, waking up
// with its check schedule due, must not commit anything under its old term
// after the new master took office, and must step down.
func TestPausedMasterWritesNothingAfterNewMaster(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	cfg := func(name string) string {
		return replaceOnce(t, c.config(name, ""), "health:\n", "health:\n  schedule: \"@every 1s\"\n")
	}
	ds := map[string]*daemon{"node-a": c.start("node-a", cfg("node-a")), "node-b": c.start("node-b", cfg("node-b"))}
	for name, d := range ds {
		c.waitRegistered(d, 30*time.Second)
		waitNodeStatus(t, c, name, nodes.StatusReady)
	}
	first := c.waitTerm(t, 0, 30*time.Second)
	old := ds[first.Node]
	// Let it run a few periodic passes first.
	eventually(t, 30*time.Second, "the master's periodic runs", func() (bool, error) {
		var n int
		err := c.db.Get(&n, `SELECT count(*) FROM enginehealth.runs WHERE term = $1`, first.Term)
		return n >= 2, err
	})
	old.signal(t, syscall.SIGSTOP)
	second := c.waitTerm(t, first.Term, 30*time.Second)
	var tookOffice int64
	if err := c.db.Get(&tookOffice, `SELECT max(id) FROM enginehealth.events WHERE kind = 'master_elected' AND term = $1`, second.Term); err != nil {
		t.Fatal(err)
	}
	var runsBefore int
	if err := c.db.Get(&runsBefore, `SELECT count(*) FROM enginehealth.runs WHERE term = $1`, first.Term); err != nil {
		t.Fatal(err)
	}
	old.signal(t, syscall.SIGCONT)
	// It notices it lost office and goes on as a standby.
	eventually(t, 30*time.Second, "the old master steps down", func() (bool, error) {
		return strings.Contains(old.stderr.String(), "lost master office"), nil
	})
	// A few of the new master's passes later, still nothing from the old term.
	eventually(t, 30*time.Second, "new master's passes", func() (bool, error) {
		var n int
		err := c.db.Get(&n, `SELECT count(*) FROM enginehealth.runs WHERE term = $1`, second.Term)
		return n >= 3, err
	})
	var late, runsAfter int
	if err := c.db.Get(&late, `SELECT count(*) FROM enginehealth.events WHERE term = $1 AND id > $2`, first.Term, tookOffice); err != nil {
		t.Fatal(err)
	}
	if err := c.db.Get(&runsAfter, `SELECT count(*) FROM enginehealth.runs WHERE term = $1`, first.Term); err != nil {
		t.Fatal(err)
	}
	if late != 0 || runsAfter != runsBefore {
		t.Fatalf("the paused master wrote after the new master took office: %d events, %d runs", late, runsAfter-runsBefore)
	}
	if n, _ := c.node(first.Node); n.IsMaster {
		t.Fatal("the old master's record has the master flag")
	}
	if !old.running() {
		t.Fatalf("the old master exited: %v", old.err)
	}
}
