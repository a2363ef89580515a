package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/app/demoengine"
)

// TestStuckMasterIsUnhealthy: when every check pass of the acting master
// fails, /v1/leader says so at once; after max(3 × period, 1 min) without a
// successful pass /healthz answers 503 and the systemd watchdog is no
// longer fed, so the master is replaced; both recover with the next
// successful pass.
func TestStuckMasterIsUnhealthy(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.db.MustExec(demoengine.Schema)
	cfg := c.configWith("node-a", cfgOpts{Schedule: "@every 1s", Extra: demoengine.WorkflowsYAML(time.Minute)})
	n := newNotifySocket(t)
	d := c.startEnv("node-a", cfg, "NOTIFY_SOCKET="+n.path, "WATCHDOG_USEC=1000000")
	rec := c.waitRegistered(d, 30*time.Second)
	cl := api.NewClient(rec.APIAddress, "")
	ctx := context.Background()
	eventually(t, 30*time.Second, "a successful pass", func() (bool, error) {
		l, err := cl.Leader(ctx)
		return err == nil && !l.Passes.LastSuccess.IsZero(), err
	})

	// Every pass now fails: the claims table is gone.
	c.db.MustExec(`ALTER TABLE demo.orders_claim RENAME TO orders_claim_gone`)
	var lastSuccess time.Time
	eventually(t, 10*time.Second, "failures shown by /v1/leader", func() (bool, error) {
		l, err := cl.Leader(ctx)
		lastSuccess = l.Passes.LastSuccess
		return err == nil && l.Passes.ConsecutiveFailures >= 2 && strings.Contains(l.Passes.LastError, "undefined_table") && !strings.Contains(l.Passes.LastError, "orders_claim"), err
	})
	out, _, _ := cli(t, nil, "status", "--api", rec.APIAddress)
	if !strings.Contains(out, "consecutive failures") {
		t.Fatalf("status does not show the failing passes:\n%s", out)
	}
	if h, err := cl.Health(ctx); err != nil || h.Status != "ok" {
		t.Fatalf("healthz before the limit: %+v %v", h, err)
	}

	eventually(t, 90*time.Second, "healthz 503 naming the stuck master", func() (bool, error) {
		h, err := cl.Health(ctx)
		return isCode(err, 503) && strings.Contains(h.Checks["master"], "no check pass succeeded"), nil
	})
	if took := time.Since(lastSuccess); took < time.Minute {
		t.Fatalf("stuck %s after the last successful pass, before the 1 min floor", took)
	}
	l, err := cl.Leader(ctx)
	if err != nil || l.Stuck == "" {
		t.Fatalf("/v1/leader of a stuck master: %+v %v", l, err)
	}
	// The watchdog is no longer fed (it is pinged every 500 ms when healthy).
	drain(n)
	never(t, 2*time.Second, "WATCHDOG=1 sent by a stuck master", func() bool { return n.seen("WATCHDOG=1") })

	// Repaired: the next pass succeeds; healthy again, watchdog fed.
	c.db.MustExec(`ALTER TABLE demo.orders_claim_gone RENAME TO orders_claim`)
	eventually(t, 10*time.Second, "healthz 200 after a successful pass", func() (bool, error) {
		h, err := cl.Health(ctx)
		return err == nil && h.Status == "ok", err
	})
	n.expect(t, "WATCHDOG=1")
}

// drain empties the notify socket's queue.
func drain(n *notifySocket) {
	for {
		select {
		case <-n.msgs:
		default:
			return
		}
	}
}
