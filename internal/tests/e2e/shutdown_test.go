package e2e

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/testkit/etcdtest"
	"github.com/enginehealth/enginehealth/nodes"
)

// shutdownBudget is node.shutdown_timeout in the harness config.
const shutdownBudget = 5 * time.Second

// stopWithin sends SIGTERM and checks the exit: 0, within the shutdown
// budget, with the node record deleted.
func (c *cluster) stopWithin(t *testing.T, d *daemon) time.Duration {
	t.Helper()
	start := time.Now()
	d.signal(t, syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(shutdownBudget):
		t.Fatalf("%s still running %s after SIGTERM (node.shutdown_timeout)", d.name, shutdownBudget)
	}
	took := time.Since(start)
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("%s exited %d after SIGTERM, want 0:\n%s", d.name, code, d.stderr.String())
	}
	if _, err := c.node(d.name); !errors.Is(err, nodes.ErrNotFound) {
		t.Fatalf("%s's record not deleted on SIGTERM: %v", d.name, err)
	}
	return took
}

// TestShutdownUnderEtcdFaults: SIGTERM ends master and standby cleanly
// (exit 0, record deleted) within node.shutdown_timeout whether etcd is
// healthy, has a frozen member, or has lost its quorum; and GET /v1/leader
// answers within a second meanwhile.
func TestShutdownUnderEtcdFaults(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"healthy", "frozen-leader", "no-quorum"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			cl := startEtcdCluster(t)
			c := newCluster(t)
			var ds []*daemon
			for _, name := range []string{"node-a", "node-b"} {
				ds = append(ds, c.start(name, c.configWith(name, cfgOpts{Endpoints: cl.Endpoints()})))
			}
			p := c.probeActing(t, ds)
			master, _ := p.waitActing(t, 30*time.Second)
			for _, d := range ds {
				waitNodeStatus(t, c, d.name, nodes.StatusReady)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			lead, err := cl.Leader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			switch fault {
			case "frozen-leader":
				freeze(t, lead)
			case "no-quorum":
				for _, m := range cl.Members {
					if m != lead {
						freeze(t, m)
					}
				}
			}

			// /v1/leader answers within a second on every node.
			for _, d := range ds {
				n, err := c.node(d.name)
				if err != nil {
					t.Fatal(err)
				}
				cl := api.NewClient(n.APIAddress, "")
				start := time.Now()
				_, err = cl.Leader(context.Background())
				if took := time.Since(start); took > time.Second {
					t.Errorf("GET /v1/leader on %s took %s with etcd %s", d.name, took.Round(time.Millisecond), fault)
				}
				var se *api.StatusError
				if err != nil && !errors.As(err, &se) {
					t.Errorf("GET /v1/leader on %s: %v", d.name, err)
				}
			}

			// Standby first, then the master.
			for _, d := range []*daemon{other(ds, master), named(ds, master)} {
				took := c.stopWithin(t, d)
				t.Logf("etcd %s: %s stopped in %s", fault, d.name, took.Round(time.Millisecond))
			}
		})
	}
}

func freeze(t *testing.T, m *etcdtest.Member) {
	t.Helper()
	if err := m.Freeze(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Thaw() })
}

func named(ds []*daemon, name string) *daemon {
	for _, d := range ds {
		if d.name == name {
			return d
		}
	}
	return nil
}

func other(ds []*daemon, name string) *daemon {
	for _, d := range ds {
		if d.name != name {
			return d
		}
	}
	return nil
}
