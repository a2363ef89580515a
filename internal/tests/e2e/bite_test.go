package e2e

import (
	"os"
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
// attempt-number guard is the second line behind fencing (one master
// runs one pass at a time, so nothing else writes an attempts row between
// a batch's read and its write): its test turns fencing off too.
func TestCheckerBites(t *testing.T) {
	t.Parallel()
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
					r.op("check", "check", "--api", m.api)
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
				r.op("check", "check", "--api", m.api)
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
			unsafe: "fencing", check: "terms never go back (runs in the order begun)",
			scenario: func(r *faultRun) {
				restore := r.secondMaster()
				pause(5 * time.Second) // both act
				restore()
			},
		},
		{
			// Two masters (fencing off) decide on the same interrupted
			// instances, and both masters' batches park them, each over
			// the other's decision.
			unsafe: "fencing,window,attempts", check: parkedOnce,
			scenario: func(r *faultRun) {
				r.twoMastersRace(func() (bool, error) { return r.violated(parkedOnce) })
			},
		},
	} {
		t.Run(tc.unsafe, func(t *testing.T) {
			// Three sidecars: each case needs a master and two others
			// (most nodes cut, a second master), not the fault run's five.
			tc.opts.bin, tc.opts.unsafe, tc.opts.sidecars = unsafeBinary(t), tc.unsafe, 3
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

// parkedOnce is the invariant the attempt-number guard keeps.
const parkedOnce = "an instance is parked (retry scheduled, held) once at a time"

// twoMastersRace makes a second master (fencing off: both act) and kills
// engines under load until done: instances of the
// tasks that wait or hold are interrupted, and both masters' batches
// (their window between snapshot and write widened) decide on them.
func (r *faultRun) twoMastersRace(done func() (bool, error)) {
	restore := r.secondMaster()
	eventually(r.t, 4*time.Minute, "the masters' race", func() (bool, error) {
		r.inject("kill-engine")
		return done()
	})
	restore()
}

// secondMaster cuts the master from etcd and waits until another node
// took office; with fencing off, the first is never told and acts on.
// restore reconnects it.
func (r *faultRun) secondMaster() (restore func()) {
	m := r.waitMaster()
	for _, p := range m.etcd {
		r.check1(p.Blackhole())
	}
	eventually(r.t, 60*time.Second, "another master in office", func() (bool, error) {
		var n int
		err := r.c.db.Get(&n, `SELECT count(*) FROM enginehealth.leader_term WHERE node <> $1`, m.name)
		return n == 1, err
	})
	return func() {
		for _, p := range m.etcd {
			r.check1(p.Restore())
		}
	}
}

// TestAttemptGuardHolds is TestCheckerBites' attempts case with the guard
// on: the same two masters race on the same attempts rows, and the guard
// fails the batch that lost (nothing of it written), so no instance is
// parked twice; it races until three batches lost.
func TestAttemptGuardHolds(t *testing.T) {
	t.Parallel()
	r := startFaultRun(t, 1, faultOpts{bin: unsafeBinary(t), unsafe: "fencing,window", sidecars: 3})
	// As long as the biting test races, at least: until three batches
	// lost to the guard.
	lost := func() bool {
		n := 0
		for _, s := range r.sidecars {
			s.mu.Lock()
			out := s.d.stderr.String()
			s.mu.Unlock()
			n += strings.Count(out, "attempts rows changed while the batch ran") + strings.Count(out, "attempts_pkey")
		}
		return n >= 3
	}
	r.twoMastersRace(func() (bool, error) { return lost(), nil })
	close(r.stop)
	<-r.stopped
	for _, c := range r.check() {
		if c.name == parkedOnce {
			if len(c.violations) > 0 || c.checked == 0 {
				t.Errorf("with the guard on: %s %v", c.summary(), c.violations)
			}
			t.Logf("with the guard on, %q: %s", c.name, c.summary())
		}
	}
	// The record a violation's post-mortem reads is dumped to the
	// artifacts (dumpRecord): each file with its header and the nodes.
	r.dumpRecord()
	for _, f := range []string{"kills.tsv", "node_moves.tsv", "nodes.tsv", "node_events.tsv"} {
		b, err := os.ReadFile(filepath.Join(t.ArtifactDir(), f))
		if err != nil || !strings.Contains(string(b), "\n") {
			t.Errorf("dumped %s: %q (%v)", f, b, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(t.ArtifactDir(), "nodes.tsv")); !strings.Contains(string(b), r.sidecars[0].name) {
		t.Errorf("nodes.tsv does not list %s:\n%s", r.sidecars[0].name, b)
	}
}
