package health

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// TestStuckMaster: an acting master whose check passes keep failing counts
// as stuck once none succeeded for StuckAfter, says why, and stops being
// stuck when a pass succeeds again.
func TestStuckMaster(t *testing.T) {
	b := setup(t)
	inc := uuid.NewString()
	if _, err := b.nodes.Register(context.Background(), nodes.Registration{Name: "m", Incarnation: inc, Hostname: "m"}); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	fence := testkit.Must(leader.NewFence(leader.FenceConfig{DB: b.db, Schema: "enginehealth", Events: audit.New("enginehealth")}))
	rep := testkit.Must(recovery.New(recovery.Config{DB: b.db, Fence: fence, Events: audit.New("enginehealth"), Schema: "enginehealth", Workflows: workflows, BatchSize: 10, Log: quiet}))
	checker := testkit.Must(NewChecker(CheckConfig{Fence: fence, Nodes: b.nodes, Recovery: rep, Events: audit.New("enginehealth"),
		Pauses: testkit.Must(NewPauses(PausesConfig{DB: b.db, Events: audit.New("enginehealth")})), Interval: time.Second, Log: quiet}))
	m := testkit.Must(NewMaster(MasterConfig{
		Fence: fence, Nodes: b.nodes, Recovery: rep, Checker: checker, Schedule: mustSchedule(t, "@every 1s"),
		Tick: 50 * time.Millisecond, StuckAfter: 2 * time.Second, Log: quiet,
	}))
	// The gate (the node's own heartbeat, in the daemon) can take trust
	// away for a moment: flapping must not restart the count.
	var gateDown atomic.Bool
	el := testkit.Must(leader.New(leader.Config{Client: cli, Prefix: "/" + t.Name() + "/", TTL: leader.MinLeaseTTL, TrustMargin: 500 * time.Millisecond,
		Candidate: leader.Candidate{Name: "m", Incarnation: inc}, Log: quiet,
		Gate: func() error {
			if gateDown.Load() {
				return errors.New("heartbeat late")
			}
			return nil
		}}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = el.Run(ctx, m.Lead) }()
	defer func() { cancel(); <-done }()

	if st := m.Status(); st.Acting || m.Stuck() != nil {
		t.Fatalf("before office: %+v, stuck %v", st, m.Stuck())
	}
	testkit.Eventually(t, 15*time.Second, "an acting master with a successful pass", func() (bool, error) {
		st := m.Status()
		return st.Acting && !st.Passes.LastSuccess.IsZero(), nil
	})

	// Every pass now fails: the claims table is gone.
	b.db.MustExec(`ALTER TABLE app.invoice_claim RENAME TO invoice_claim_gone`)
	// Trust flaps: 150 ms down every 600 ms, shorter than StuckAfter.
	stopFlap := make(chan struct{})
	flapped := make(chan struct{})
	go func() {
		defer close(flapped)
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopFlap:
				gateDown.Store(false)
				return
			case <-tick.C:
				gateDown.Store(i%4 == 0)
			}
		}
	}()
	testkit.Eventually(t, 10*time.Second, "failing passes counted", func() (bool, error) {
		p := m.Status().Passes
		return p.ConsecutiveFailures >= 2 && strings.Contains(p.LastError, "undefined_table") && !strings.Contains(p.LastError, "invoice_claim"), nil
	})
	testkit.Eventually(t, 15*time.Second, "the master counts as stuck although its trust flaps", func() (bool, error) {
		return m.Stuck() != nil, nil
	})
	close(stopFlap)
	<-flapped
	testkit.Eventually(t, 5*time.Second, "acting again", func() (bool, error) {
		return m.Status().Acting, nil
	})
	if err := m.Stuck(); !strings.Contains(err.Error(), "no check pass succeeded") || !strings.Contains(err.Error(), "undefined_table") {
		t.Fatalf("stuck reason: %v", err)
	}
	if st := m.Status(); !st.Acting || st.Stuck == "" {
		t.Fatalf("status of a stuck master: %+v", st)
	}

	// Repaired: the next pass succeeds and the signal clears.
	b.db.MustExec(`ALTER TABLE app.invoice_claim_gone RENAME TO invoice_claim`)
	testkit.Eventually(t, 10*time.Second, "not stuck after a successful pass", func() (bool, error) {
		return m.Stuck() == nil && m.Status().Passes.ConsecutiveFailures == 0, nil
	})
}

// TestStuckAfterFromSchedule: the stuck window follows the schedule unless
// set; without a periodic check there is none.
func TestStuckAfterFromSchedule(t *testing.T) {
	for _, c := range []struct {
		sched string
		set   time.Duration
		want  time.Duration
	}{{"@every 30s", 0, 90 * time.Second}, {"@every 5s", 0, time.Minute}, {"@every 30s", 5 * time.Second, 5 * time.Second}, {"", 0, 0}} {
		var s Schedule
		if c.sched != "" {
			s = mustSchedule(t, c.sched)
		}
		cfg := offline()
		cfg.Schedule, cfg.StuckAfter = s, c.set
		if got := testkit.Must(NewMaster(cfg)).cfg.StuckAfter; got != c.want {
			t.Errorf("schedule %q, StuckAfter %s: %s, want %s", c.sched, c.set, got, c.want)
		}
	}
}
