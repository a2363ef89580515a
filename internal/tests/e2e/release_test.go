package e2e

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/enginehealth/enginehealth/internal/infra/leasefile"
	"github.com/enginehealth/enginehealth/nodes"
)

// TestReleaseLeaseAfterCrash: a master SIGKILLed on a host that lives is
// replaced at once when release-lease runs as systemd runs the unit's
// ExecStopPost= (the same configuration and environment, once the process
// is gone), not when its lease's TTL runs out. Three real daemons, a real
// etcd:
//
//   - each running daemon keeps its lease in its state directory
//     ($STATE_DIRECTORY/lease.json): the master's is the lease of its
//     election key;
//   - release-lease while the master runs is refused (exit 4, "still
//     running"): the lease lives, the term is unchanged;
//   - SIGKILL, then release-lease: exit 0, one line saying the lease was
//     released; a new master is in office well before the TTL; the
//     state file is gone, and a second run says nothing, exit 0;
//   - the killed node's record is as it was (release-lease never touches
//     it) and the node, restarted, comes back in Unexpected shutdown;
//   - a master killed without release-lease is replaced at the TTL, as
//     before; release-lease run after that (its lease expired) does
//     nothing harmful: exit 0, silent, the state file removed.
func TestReleaseLeaseAfterCrash(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ds := map[string]*daemon{}
	started := time.Now()
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		ds[name] = c.start(name, c.config(name, ""))
	}
	for _, d := range ds {
		c.waitRegistered(d, 30*time.Second)
	}
	cur := c.waitTerm(t, 0, 30*time.Second)
	m := ds[cur.Node]
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	var rec leasefile.Record
	eventually(t, 10*time.Second, "the master's lease file", func() (bool, error) {
		rec, err = leasefile.Read(c.stateDir(m.name))
		return err == nil, err
	})
	key, err := cli.Get(ctx, electionPrefix(t)+rec.Lease.String())
	if err != nil || len(key.Kvs) != 1 || key.Kvs[0].CreateRevision != cur.Term || rec.Process.PID != m.cmd.Process.Pid || rec.Node != m.name {
		t.Fatalf("lease file %+v: want the lease of the master's election key (term %d), its pid %d: %v %v", rec, cur.Term, m.cmd.Process.Pid, key, err)
	}

	_, errOut, code := runReleaseLease(t, m)
	if code != 4 || !strings.Contains(errOut, "still running") {
		t.Fatalf("release-lease beside the running master: exit %d, %s; want 4, still running", code, errOut)
	}
	if ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(rec.Lease)); err != nil || ttl.TTL <= 0 {
		t.Fatalf("the master's lease after a refused release-lease: %v %v", ttl, err)
	}
	// The standbys have campaigned for longer than a trust window (a
	// cluster that runs; see failovers).
	<-time.After(time.Until(started.Add(leaseTTL)))
	if now := c.waitTerm(t, 0, time.Second); now.Term != cur.Term {
		t.Fatalf("the term moved from %d to %d after a refused release-lease", cur.Term, now.Term)
	}
	before, err := c.node(m.name)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	m.signal(t, syscall.SIGKILL)
	out, errOut, code := releaseLease(t, m)
	if code != 0 || out != "" || !strings.Contains(loud(errOut), "released the etcd lease of a daemon whose process is gone") || strings.Count(loud(errOut), "\n") != 1 {
		t.Fatalf("release-lease after the kill: exit %d, %q %q; want 0 and one line above debug", code, out, errOut)
	}
	// Read at once: the next master does not act (and could not mark the
	// node) until a trust window after the release.
	if after, err := c.node(m.name); err != nil || after.Incarnation != before.Incarnation || after.Status != before.Status ||
		!after.StatusChangedAt.Equal(before.StatusChangedAt) {
		t.Fatalf("the killed node's record after release-lease: %+v %v; want it as it was (%+v)", after, err, before)
	}
	next := c.waitTerm(t, cur.Term, 10*time.Second)
	inOffice := time.Since(start)
	t.Logf("a new master (%s, term %d) in office %s after the SIGKILL and release-lease", next.Node, next.Term, inOffice.Round(time.Millisecond))
	if inOffice >= leaseTTL-time.Second {
		t.Fatalf("a new master in office %s after the kill: release-lease did not hand over before the lease's TTL (%s)", inOffice, leaseTTL)
	}
	if _, err := leasefile.Read(c.stateDir(m.name)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the state file after release-lease: %v, want it removed", err)
	}
	if out, errOut, code := releaseLease(t, m); code != 0 || out != "" || errOut != "" {
		t.Fatalf("release-lease again (no state file): exit %d, %q %q; want 0 and silence", code, out, errOut)
	}
	ds[m.name] = c.start(m.name, c.config(m.name, ""))
	eventually(t, 30*time.Second, m.name+" back in "+string(nodes.StatusUnexpectedShutdown), func() (bool, error) {
		n, err := c.node(m.name)
		return err == nil && n.Incarnation != before.Incarnation && n.Status == nodes.StatusUnexpectedShutdown, nil
	})

	// Without release-lease: the lease expires at its TTL; run after
	// that, release-lease finds it gone and does nothing harmful.
	m2 := ds[next.Node]
	start = time.Now()
	m2.signal(t, syscall.SIGKILL)
	m2.wait(t, 10*time.Second)
	third := c.waitTerm(t, next.Term, 30*time.Second)
	t.Logf("without release-lease, a new master (%s, term %d) in office %s after the SIGKILL", third.Node, third.Term, time.Since(start).Round(time.Millisecond))
	if took := time.Since(start); took < leaseTTL-time.Second {
		t.Fatalf("a new master %s after a kill without release-lease: before the lease could expire", took)
	}
	if _, err := leasefile.Read(c.stateDir(m2.name)); err != nil {
		t.Fatalf("the killed master's state file: %v", err)
	}
	if out, errOut, code := releaseLease(t, m2); code != 0 || out != "" || loud(errOut) != "" {
		t.Fatalf("release-lease of an expired lease: exit %d, %q %q; want 0 and nothing above debug", code, out, errOut)
	}
	if _, err := leasefile.Read(c.stateDir(m2.name)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the state file of an expired lease after release-lease: %v, want it removed", err)
	}
	if now := c.waitTerm(t, 0, time.Second); now.Term != third.Term {
		t.Fatalf("release-lease of an expired lease moved the term from %d to %d", third.Term, now.Term)
	}
}

// loud returns the lines of a JSON log above debug (the harness's
// daemons log at debug).
func loud(log string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(strings.TrimSpace(log), "\n") {
		if line != "" && !strings.Contains(line, `"level":"DEBUG"`) {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
