// Package health holds the master's duties: taking office, start-up recovery
// on a cold cluster, and bringing nodes to Ready; the periodic
// CheckEngineHealth task joins them here.
//
// Master.Lead is the leader function given to leader.Elector.Run: it runs
// under the leader-scoped context and returns when the office is lost.
//
// Start-up recovery repairs non-claimable workflows, where nothing tells a
// live engine's instance from an interrupted one. It therefore runs only on
// a cold cluster: no other node Ready and active within
// not_responding_after (engines run only on Ready nodes). After it (or its
// skip), every node in Recovering becomes Ready, and later joiners are
// promoted on each tick.
package health

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/enginehealth/enginehealth/internal/backoff"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
	"github.com/jmoiron/sqlx"
	"github.com/lmittmann/tint"
)

// MasterConfig wires the master's duties.
type MasterConfig struct {
	Fence    *leader.Fence
	Nodes    *nodes.Store
	Recovery *recovery.Repairer
	// NotRespondingAfter: a node active within it counts as live.
	NotRespondingAfter time.Duration
	// Tick: how often the master promotes newly registered nodes.
	Tick time.Duration
	Log  *slog.Logger
}

// Master runs the duties of the master node.
type Master struct {
	cfg MasterConfig
	log *slog.Logger
}

// NewMaster returns the master's duty runner.
func NewMaster(cfg MasterConfig) *Master {
	return &Master{cfg: cfg, log: cfg.Log.With("component", "master")}
}

// Lead takes office, runs start-up recovery when the cluster is cold,
// promotes Recovering nodes to Ready, then keeps promoting new ones each
// tick until ctx is done. It returns an error only when the office cannot
// be taken (the elector then resigns and campaigns again).
func (m *Master) Lead(ctx context.Context, o *leader.Office) error {
	log := m.log.With("term", o.Term)
	bo := backoff.Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second}
	for {
		err := m.cfg.Fence.TakeOffice(ctx, o)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, leader.ErrDeposed) || bo.Attempts() >= 5 {
			return err
		}
		log.WarnContext(ctx, "take office failed, retrying", tint.Err(err))
		if backoff.Sleep(ctx, bo.Next()) != nil {
			return nil
		}
	}
	log.InfoContext(ctx, "took office")
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := m.cfg.Fence.StepDown(sctx, o, "left office: "+causeOf(ctx)); err != nil {
			log.DebugContext(ctx, "clear master flag", tint.Err(err))
		}
	}()

	startupDone := false
	t := time.NewTicker(m.cfg.Tick)
	defer t.Stop()
	for {
		if !startupDone {
			startupDone = m.startup(ctx, o, log)
		}
		if startupDone {
			m.promote(ctx, o, log)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// startup runs start-up recovery if the cluster is cold and reports whether
// it is done (run or rightly skipped).
func (m *Master) startup(ctx context.Context, o *leader.Office, log *slog.Logger) bool {
	live, err := m.cfg.Nodes.ActiveReady(ctx, o.Candidate.Name, m.cfg.NotRespondingAfter)
	if err != nil {
		log.WarnContext(ctx, "start-up recovery: cannot tell whether the cluster is cold", tint.Err(err))
		return false
	}
	if len(live) > 0 {
		log.InfoContext(ctx, "start-up recovery skipped: warm cluster, engines may be running",
			"ready_nodes", strings.Join(live, ","))
		return true
	}
	res, err := m.cfg.Recovery.Startup(ctx, o)
	if err != nil {
		if ctx.Err() == nil {
			log.ErrorContext(ctx, "start-up recovery failed; retrying next tick", tint.Err(err))
		}
		return false
	}
	log.InfoContext(ctx, "start-up recovery done", "run", res.RunID, "repaired", res.Done())
	return true
}

func (m *Master) promote(ctx context.Context, o *leader.Office, log *slog.Logger) {
	var names []string
	err := m.cfg.Fence.InTx(ctx, o, func(tx *sqlx.Tx) error {
		var err error
		names, err = m.cfg.Nodes.PromoteRecovering(ctx, tx, o.Candidate.Name, o.Term, "recovery done by master")
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			log.WarnContext(ctx, "promote recovering nodes", tint.Err(err))
		}
		return
	}
	if len(names) > 0 {
		log.InfoContext(ctx, "nodes ready", "nodes", strings.Join(names, ","))
	}
}

func causeOf(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil {
		return c.Error()
	}
	return "shutdown"
}
