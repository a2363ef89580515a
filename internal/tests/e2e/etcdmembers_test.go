package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/testkit/etcdtest"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
)

// syncEvery is etcd.auto_sync_interval in these tests: short, so that
// they run fast (the default is 30s).
const syncEvery = "  auto_sync_interval: 1s\n"

// logLine is one JSON line of a daemon's log, the fields these tests read.
type logLine struct {
	Level, Msg string
	Endpoints  []string
	Added      []string
	Removed    []string
	MemberID   string `json:"member_id"`
	Causes     []string
}

// lines returns the daemon's log lines whose message is msg.
func (d *daemon) lines(msg string) []logLine {
	var out []logLine
	for _, s := range strings.Split(d.stderr.String(), "\n") {
		var l logLine
		if json.Unmarshal([]byte(s), &l) == nil && l.Msg == msg {
			out = append(out, l)
		}
	}
	return out
}

const endpointsChanged = "etcd endpoints changed: following the cluster's members"

// endpointsNow returns the etcd endpoints the daemon's client uses, as
// its log says: its last change, else what it was configured with.
func (d *daemon) endpointsNow(configured []string) []string {
	if ls := d.lines(endpointsChanged); len(ls) > 0 {
		return ls[len(ls)-1].Endpoints
	}
	return configured
}

// TestEtcdMemberReplacement: three sidecars run on a 3-member etcd
// cluster of processes at the default lease_ttl (10 s), configured with
// the members' addresses. Each member is replaced in turn, one at a time,
// as an operator replaces a dead host (member remove, its process gone,
// member add of a new one with a new name, data directory and ports,
// started with initial-cluster-state existing, the cluster healthy
// again), the raft leader included. Every sidecar follows the members
// (etcd.auto_sync_interval), the master stays in office throughout (the
// same node, its term unchanged, never two acting), and at the end none
// of the original endpoints exists (their processes gone, their ports
// closed), no sidecar uses one, and the cluster still elects a new
// master after a SIGKILL of the master. Plain, and with TLS everywhere
// (the daemon dials the members itself: the https:// client URLs the
// members advertise go through its dialer).
func TestEtcdMemberReplacement(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "tls"}[secure]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var c *cluster
			var cl *etcdtest.Cluster
			if secure {
				c = newTLSCluster(t)
				cl = c.tls.etcd
			} else {
				c, cl = newCluster(t), startEtcdCluster(t)
			}
			replaceEveryMember(t, c, cl)
		})
	}
}

func replaceEveryMember(t *testing.T, c *cluster, cl *etcdtest.Cluster) {
	c.logDir = t.ArtifactDir() // every sidecar's log, with -artifacts
	configured := cl.Endpoints()
	var ds []*daemon
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		ds = append(ds, c.start(name, c.configWith(name, cfgOpts{Endpoints: configured, LeaseTTL: leader.DefaultLeaseTTL,
			Heartbeat: time.Second, Etcd: syncEvery})))
	}
	p := c.probeActing(t, ds)
	master, term := p.waitActing(t, 60*time.Second)
	first := c.term(t)
	if first.Node != master || first.Term != term {
		t.Fatalf("acting master %s term %d, the database says %s term %d", master, term, first.Node, first.Term)
	}
	from := time.Now()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	original := slices.Clone(cl.Members)
	lead, err := cl.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The raft leader among them: last, when the others are new.
	i := slices.Index(original, lead)
	original = append(slices.Delete(original, i, i+1), lead)
	for _, m := range original {
		started := time.Now()
		next, err := cl.Replace(ctx, m)
		if err != nil {
			t.Fatalf("replace %s: %v", m.Name, err)
		}
		// Every sidecar learns the new member and drops the old.
		eventually(t, 30*time.Second, "every sidecar following "+next.Name+" in place of "+m.Name, func() (bool, error) {
			for _, d := range ds {
				eps := d.endpointsNow(configured)
				if !slices.Contains(eps, next.Endpoint()) || slices.Contains(eps, m.Endpoint()) {
					return false, fmt.Errorf("%s uses %v", d.name, eps)
				}
			}
			return true, nil
		})
		t.Logf("replaced %s (%s) by %s (%s) in %s", m.Name, m.Endpoint(), next.Name, next.Endpoint(), time.Since(started).Round(time.Millisecond))
		if now := c.term(t); now.Node != master || now.Term != term {
			t.Fatalf("after replacing %s: the database's term is %s %d, was %s %d", m.Name, now.Node, now.Term, master, term)
		}
	}
	r := p.report(from, time.Now())
	t.Logf("during the replacements: %d samples, no acting master for %s in all (suspended office), terms %v", r.samples, r.quiet.Round(time.Millisecond), r.terms)
	if len(r.twoActing) > 0 {
		t.Fatalf("two masters acting at once: %v", r.twoActing)
	}
	if len(r.terms) != 1 || r.terms[0] != term || !r.actingAtEnd {
		t.Fatalf("the master did not stay in office: terms %v (was %d), acting at the end %v, gaps %v", r.terms, term, r.actingAtEnd, r.gaps)
	}
	// None of the original endpoints exists; no sidecar uses one, and
	// each uses the members there are.
	now := cl.Endpoints()
	slices.Sort(now)
	for _, m := range original {
		if m.Running() {
			t.Fatalf("%s still runs", m.Name)
		}
		if conn, err := net.DialTimeout("tcp", m.Endpoint(), time.Second); err == nil {
			conn.Close()
			t.Fatalf("%s's address %s still accepts connections", m.Name, m.Endpoint())
		}
	}
	for _, d := range ds {
		if eps := d.endpointsNow(configured); !slices.Equal(eps, now) {
			t.Fatalf("%s uses %v, the members are %v", d.name, eps, now)
		}
		if !d.running() {
			t.Fatalf("%s exited", d.name)
		}
	}

	// The cluster still elects: SIGKILL the master, another takes office.
	for _, d := range ds {
		if d.name == master {
			d.signal(t, syscall.SIGKILL)
		}
	}
	next := c.waitTerm(t, term, 60*time.Second)
	if next.Node == master {
		t.Fatalf("the killed master %s is master again", master)
	}
	t.Logf("after the replacements, %s killed: %s took office, term %d", master, next.Node, next.Term)
}

// TestEtcdEndpointsPartlyWrong: a sidecar configured with three etcd
// endpoints of which one refuses connections (nothing listens there: a
// member gone, a typo) starts normally, becomes master, and says so once
// in its log: one warning naming that endpoint and why, not one per
// retry or per sync. With auto-sync on it drops the endpoint for the
// member it did not know; with auto-sync off it keeps all three and runs
// on the two that answer.
func TestEtcdEndpointsPartlyWrong(t *testing.T) {
	t.Parallel()
	cl := startEtcdCluster(t)
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	gone := fmt.Sprintf("127.0.0.1:%d", port)
	// silent accepts connections and never answers (a frozen process, a
	// proxy to nothing).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	silent := ln.Addr().String()
	configured := []string{cl.Members[0].Endpoint(), gone, cl.Members[1].Endpoint(), silent}
	const warning = "2 of 4 etcd endpoints did not answer; this node uses the others"
	for _, sync := range []string{syncEvery, "  auto_sync_interval: 0\n"} {
		on := sync == syncEvery
		t.Run(map[bool]string{true: "auto-sync", false: "no auto-sync"}[on], func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			d := c.start("node-a", c.configWith("node-a", cfgOpts{Endpoints: configured, Etcd: sync}))
			if term := c.waitTerm(t, 0, 30*time.Second); term.Node != "node-a" {
				t.Fatalf("master %s", term.Node)
			}
			waitNodeStatus(t, c, "node-a", nodes.StatusReady)
			if on {
				eventually(t, 30*time.Second, "the endpoints following the members", func() (bool, error) {
					eps := d.endpointsNow(configured)
					return slices.Equal(eps, sorted(cl.Endpoints())), fmt.Errorf("endpoints %v", eps)
				})
			}
			// A few sync rounds and etcd checks (every lease_ttl, 3s) later,
			// still the one warning.
			never(t, 4*time.Second, "a second warning of the endpoint", func() bool { return len(d.lines(warning)) > 1 })
			ws := d.lines(warning)
			if len(ws) != 1 || ws[0].Level != "WARN" || !slices.Equal(ws[0].Endpoints, []string{gone, silent}) || len(ws[0].Causes) != 2 ||
				!strings.Contains(ws[0].Causes[0], gone+": ") || !strings.Contains(ws[0].Causes[0], "connection refused") ||
				!strings.Contains(ws[0].Causes[1], silent+": accepts connections but did not answer an etcd status request") {
				t.Fatalf("want one warning naming %s and %s and why, got %+v\n%s", gone, silent, ws, d.stderr.String())
			}
			if strings.Contains(d.stderr.String(), "connect to etcd failed, retrying") {
				t.Fatalf("the start retried:\n%s", d.stderr.String())
			}
			changes := d.lines(endpointsChanged)
			switch {
			case on && (len(changes) != 1 || !slices.Equal(sorted(changes[0].Removed), sorted([]string{gone, silent})) || !slices.Equal(changes[0].Added, []string{cl.Members[2].Endpoint()})):
				t.Fatalf("want one change, %s and %s for %s: %+v", gone, silent, cl.Members[2].Endpoint(), changes)
			case !on && len(changes) > 0:
				t.Fatalf("endpoints changed with auto-sync off: %+v", changes)
			}
		})
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestEtcdUnreachableLearner: the etcd cluster's member list holds a
// learner that never started (member add --learner, and no process), one
// added before the sidecars start, then (etcd allows one learner at a
// time) another in its place while they run. The sidecars
// never use it (learners serve no client requests; it has no client URL):
// each says so once per learner in its log (member not used, with its
// member ID), its endpoints stay the members', and nothing breaks — a
// master takes office, and after its SIGKILL another does.
func TestEtcdUnreachableLearner(t *testing.T) {
	t.Parallel()
	cl := startEtcdCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before, err := cl.AddLearner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t)
	configured := cl.Endpoints()
	ds := map[string]*daemon{}
	for _, name := range []string{"node-a", "node-b"} {
		ds[name] = c.start(name, c.configWith(name, cfgOpts{Endpoints: configured, Etcd: syncEvery}))
	}
	first := c.waitTerm(t, 0, 30*time.Second)
	const notUsed = "etcd member not used: it is a learner: learners serve no client requests until promoted"
	saidOnce := func(id uint64) {
		t.Helper()
		eventually(t, 30*time.Second, fmt.Sprintf("every sidecar saying learner %x is not used", id), func() (bool, error) {
			for _, d := range ds {
				n := 0
				for _, l := range d.lines(notUsed) {
					if l.MemberID == fmt.Sprintf("%x", id) {
						n++
					}
				}
				if n != 1 {
					return false, fmt.Errorf("%s said it %d times", d.name, n)
				}
			}
			return true, nil
		})
	}
	saidOnce(before)
	// etcd allows one learner at a time: another in its place.
	if err := cl.RemoveID(ctx, before); err != nil {
		t.Fatal(err)
	}
	during, err := cl.AddLearner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	saidOnce(during)
	never(t, 3*time.Second, "a learner said again, or used", func() bool {
		for _, d := range ds {
			if len(d.lines(notUsed)) != 2 || len(d.lines(endpointsChanged)) > 0 {
				return true
			}
		}
		return false
	})
	ds[first.Node].signal(t, syscall.SIGKILL)
	if next := c.waitTerm(t, first.Term, 30*time.Second); next.Node == first.Node {
		t.Fatalf("the killed master %s is master again", first.Node)
	}
	for name, d := range ds {
		if name != first.Node && (!d.running() || strings.Contains(d.stderr.String(), "panic")) {
			t.Fatalf("%s:\n%s", name, d.stderr.String())
		}
	}
}
