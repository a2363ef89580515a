package e2e

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/nodes"
)

// waitCheckPassAfter waits for a periodic check pass that started after t
// and finished.
func (c *cluster) waitCheckPassAfter(tb testing.TB, after time.Time) {
	tb.Helper()
	eventually(tb, 30*time.Second, "a check pass after "+after.Format(time.TimeOnly+".000"), func() (bool, error) {
		var n int
		err := c.db.Get(&n, `SELECT count(*) FROM enginehealth.runs
			WHERE kind = 'check' AND status = 'finished' AND started_at > $1`, after)
		return n > 0, err
	})
}

// TestUnexpectedShutdownLeftOnlyByAck: a node whose last run died stays in
// Unexpected shutdown whatever its heartbeats do (missed, then fresh
// again), never campaigns while others fail over around it, and leaves it
// only through an operator's ack.
func TestUnexpectedShutdownLeftOnlyByAck(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	const token = "ack-token"
	cfg := func(name string) string {
		return c.configWith(name, cfgOpts{Schedule: "@every 1s", TokenEnv: "EH_ACK_TOKEN"})
	}
	env := "EH_ACK_TOKEN=" + token
	ds := map[string]*daemon{}
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		ds[name] = c.startEnv(name, cfg(name), env)
	}
	for name := range ds {
		waitNodeStatus(t, c, name, nodes.StatusReady)
	}
	first := c.waitTerm(t, 0, 30*time.Second)

	// A non-master node crashes and comes back: Unexpected shutdown.
	var crashed string
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		if name != first.Node {
			crashed = name
			break
		}
	}
	ds[crashed].signal(t, syscall.SIGKILL)
	ds[crashed].wait(t, 10*time.Second)
	ds[crashed] = c.startEnv(crashed, cfg(crashed), env)
	eventually(t, 30*time.Second, crashed+" restarted in Unexpected shutdown", func() (bool, error) {
		n, err := c.node(crashed)
		return err == nil && n.Status == nodes.StatusUnexpectedShutdown && n.PreviousIncarnation != nil, err
	})

	// Its heartbeats stop for longer than not_responding_after while the
	// master checks, then resume: it must stay where it is.
	ds[crashed].signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	c.waitCheckPassAfter(t, stopped.Add(1500*time.Millisecond))
	ds[crashed].signal(t, syscall.SIGCONT)
	eventually(t, 10*time.Second, crashed+" heartbeats again", func() (bool, error) {
		n, err := c.node(crashed)
		return err == nil && n.SecondsSinceActive < 0.5, err
	})
	c.waitCheckPassAfter(t, time.Now())
	if n, _ := c.node(crashed); n.Status != nodes.StatusUnexpectedShutdown {
		t.Fatalf("%s left Unexpected shutdown without an ack: %s (%s)", crashed, n.Status, n.StatusReason)
	}

	// A clean stop is not an ack: the record outlives it, and the restarted
	// node is still in Unexpected shutdown.
	ds[crashed].signal(t, syscall.SIGTERM)
	if code := ds[crashed].wait(t, 10*time.Second); code != 0 {
		t.Fatalf("SIGTERM of the un-acknowledged node: exit %d", code)
	}
	if n, err := c.node(crashed); err != nil || n.Status != nodes.StatusUnexpectedShutdown {
		t.Fatalf("after a clean stop %s is %+v (%v), want its record kept in Unexpected shutdown", crashed, n, err)
	}
	ds[crashed] = c.startEnv(crashed, cfg(crashed), env)
	eventually(t, 30*time.Second, crashed+" restarted, heartbeating, still in Unexpected shutdown", func() (bool, error) {
		n, err := c.node(crashed)
		if err == nil && n.Status != nodes.StatusUnexpectedShutdown {
			return false, fmt.Errorf("%s left Unexpected shutdown by a restart: %s (%s)", crashed, n.Status, n.StatusReason)
		}
		return err == nil && n.SecondsSinceActive < 0.5, err
	})

	// The others fail over around it: it never takes office.
	probeDs := []*daemon{}
	for _, d := range ds {
		probeDs = append(probeDs, d)
	}
	p := c.probeActing(t, probeDs)
	ds[first.Node].signal(t, syscall.SIGKILL)
	second := c.waitTerm(t, first.Term, 30*time.Second)
	if second.Node == crashed {
		t.Fatalf("the un-acknowledged node %s took office", crashed)
	}
	ds[second.Node].signal(t, syscall.SIGKILL)
	never(t, leaseTTL+2*time.Second, "the un-acknowledged node acts as master", func() bool {
		name, _, ok := p.acting()
		return ok && name == crashed
	})
	if cur := c.term(t); cur.Node == crashed {
		t.Fatalf("the un-acknowledged node recorded a term: %+v", cur)
	}
	if n, _ := c.node(crashed); n.Status != nodes.StatusUnexpectedShutdown {
		t.Fatalf("%s is %s without an ack", crashed, n.Status)
	}

	// The ack: it campaigns, takes office, recovers and becomes Ready.
	n, _ := c.node(crashed)
	out, errOut, code := cli(t, []string{"ENGINEHEALTH_TOKEN=" + token}, "node", "ack", crashed, "--api", n.APIAddress, "--reason", "disk checked")
	if code != 0 {
		t.Fatalf("ack: exit %d\n%s%s", code, out, errOut)
	}
	third := c.waitTerm(t, second.Term, 30*time.Second)
	if third.Node != crashed {
		t.Fatalf("after the ack the master is %s, want %s", third.Node, crashed)
	}
	waitNodeStatus(t, c, crashed, nodes.StatusReady)

	// Its history: registered, Unexpected shutdown, ack to Recovering,
	// Ready; never Not responding.
	es, err := audit.New("enginehealth").List(context.Background(), c.db, audit.ListParams{Node: crashed, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var path []string
	for _, e := range es {
		if e.ToState != nil {
			path = append(path, string(e.Kind)+":"+*e.ToState)
		}
	}
	crash := slices.Index(path, string(audit.KindNodeStatus)+":"+string(nodes.StatusUnexpectedShutdown))
	ack := slices.Index(path, string(audit.KindNodeAck)+":"+string(nodes.StatusRecovering))
	if crash < 0 || ack < crash || slices.Contains(path, string(audit.KindNodeStatus)+":"+string(nodes.StatusNotResponding)) ||
		slices.Contains(path[crash:ack], string(audit.KindNodeStatus)+":"+string(nodes.StatusReady)) {
		t.Fatalf("status history of %s: %v", crashed, path)
	}
}
