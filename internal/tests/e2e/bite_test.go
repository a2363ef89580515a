package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/nodes"
)

var (
	unsafeOnce sync.Once
	unsafeBin  string
	unsafeErr  error
)

// unsafeBinary builds enginehealth with the tag faultinject, which reads
// EH_UNSAFE to turn safety mechanisms off (internal/infra/faultinject).
func unsafeBinary(t *testing.T) string {
	t.Helper()
	unsafeOnce.Do(func() {
		dir := filepath.Dir(bin)
		unsafeBin = filepath.Join(dir, "enginehealth-unsafe")
		out, err := exec.Command("go", "build", "-tags", "faultinject", "-o", unsafeBin,
			"github.com/enginehealth/enginehealth/cmd/enginehealth").CombinedOutput()
		if err != nil {
			unsafeErr = err
			unsafeBin = string(out)
		}
	})
	if unsafeErr != nil {
		t.Fatalf("build the faultinject binary: %v\n%s", unsafeErr, unsafeBin)
	}
	return unsafeBin
}

// TestCheckerBites turns each safety mechanism off in turn, on a real
// cluster (the fault suite's), brings about what it prevents, and checks
// that the checker reports it: the invariants are not vacuous. The
// attempt-number guard has no biting test yet: with a single master
// nothing races an attempts row between its read and its write.
func TestCheckerBites(t *testing.T) {
	for _, tc := range []struct {
		unsafe, check string
		opts          faultOpts
		scenario      func(r *faultRun)
	}{
		{
			// Manual checks sweep every interim instance: with the
			// predicate off, those under live claims are repaired too.
			unsafe: "predicate", check: "no instance under a live claim was repaired",
			scenario: func(r *faultRun) {
				m := r.waitMaster()
				for range 5 {
					r.op("check", "check", "--api", m.listen)
					pause(time.Second)
				}
			},
		},
		{
			// Every node but the master is cut from PostgreSQL; once both
			// are stale, one manual pass (no periodic pass runs) marks
			// them both: the guard would have held.
			unsafe: "guard", check: "the disruption guard: no pass marks most nodes", opts: faultOpts{schedule: "@every 1h"},
			scenario: func(r *faultRun) {
				m := r.waitMaster()
				for _, s := range r.sidecars {
					if s != m {
						r.check1(s.db.Blackhole())
					}
				}
				eventually(r.t, 60*time.Second, "the cut nodes are stale", func() (bool, error) {
					var n int
					err := r.c.db.Get(&n, `SELECT count(*) FROM enginehealth.nodes WHERE last_active < now() - interval '3 seconds'`)
					return n == len(r.sidecars)-1, err
				})
				r.op("check", "check", "--api", m.listen)
				for _, s := range r.sidecars {
					if s != m {
						r.check1(s.db.Restore())
					}
				}
			},
		},
		{
			// A node restarted after a crash must wait in Unexpected
			// shutdown for an ack; the master promotes it anyway.
			unsafe: "ack", check: "a node leaves Unexpected shutdown only by an ack",
			scenario: func(r *faultRun) {
				s := r.other(r.waitMaster())
				old := r.incarnation(s)
				r.signal(s, syscall.SIGKILL)
				<-s.d.done
				r.startSidecar(s)
				eventually(r.t, 60*time.Second, s.name+" back and Ready without an ack", func() (bool, error) {
					n, err := r.c.node(s.name)
					return err == nil && n.Incarnation != old && n.Status == nodes.StatusReady, nil
				})
			},
		},
		{
			// The master is cut from etcd and never told: another takes
			// office and both act, the old one under its old term.
			unsafe: "fencing", check: "terms never go back (runs in commit order)",
			scenario: func(r *faultRun) {
				m := r.waitMaster()
				for _, p := range m.etcd {
					r.check1(p.Blackhole())
				}
				eventually(r.t, 60*time.Second, "another master in office", func() (bool, error) {
					var n int
					err := r.c.db.Get(&n, `SELECT count(*) FROM enginehealth.leader_term WHERE node <> $1`, m.name)
					return n == 1, err
				})
				pause(5 * time.Second) // both act
				for _, p := range m.etcd {
					r.check1(p.Restore())
				}
			},
		},
	} {
		t.Run(tc.unsafe, func(t *testing.T) {
			tc.opts.bin, tc.opts.unsafe = unsafeBinary(t), tc.unsafe
			r := startFaultRun(t, 1, tc.opts)
			tc.scenario(r)
			close(r.stop)
			<-r.stopped
			for _, s := range r.sidecars {
				if !strings.Contains(s.d.stderr.String(), "UNSAFE BUILD, safety mechanisms turned off: "+tc.unsafe) {
					t.Fatalf("%s does not say it runs unsafe", s.name)
				}
			}
			var bit bool
			for _, c := range r.check() {
				if c.name == tc.check {
					bit = len(c.violations) > 0
					t.Logf("with %s off, %q: %s %v", tc.unsafe, c.name, c.summary(), c.violations[:min(len(c.violations), 3)])
				}
			}
			if !bit {
				t.Errorf("with %s off, the checker did not report %q", tc.unsafe, tc.check)
			}
		})
	}
}

// waitMaster waits for an acting master and returns it.
func (r *faultRun) waitMaster() *sidecar {
	var m *sidecar
	eventually(r.t, 60*time.Second, "an acting master", func() (bool, error) {
		m = r.master()
		return m != nil, nil
	})
	return m
}
