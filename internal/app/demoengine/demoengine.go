// Package demoengine is a small real workflow engine on the claims API: the
// engine that the tests, the benchmarks and the demo run and kill.
//
// Its workflow "orders" (claimable) moves rows of demo.orders through two
// tasks: reserve (atomic) Created → Reserving → Reserved | ReserveFailed,
// and ship (not atomic) Reserved → Shipping → Shipped | ShipFailed. Its
// workflow "reports" (not claimable) has one task: render Queued →
// Rendering → Rendered | RenderFailed.
package demoengine

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enginehealth/enginehealth/claims"
)

// Schema creates the demo tables (idempotent).
const Schema = `
CREATE SCHEMA IF NOT EXISTS demo;
CREATE TABLE IF NOT EXISTS demo.orders (
    id         bigserial PRIMARY KEY,
    status     text NOT NULL,
    last_error text
);
CREATE INDEX IF NOT EXISTS orders_status_id_idx ON demo.orders (status, id);
-- updated_at: set on every change of status (a trigger, as many engine
-- tables have); on_failure policies find new failures by it.
ALTER TABLE demo.orders ADD COLUMN IF NOT EXISTS updated_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX IF NOT EXISTS orders_status_updated_idx ON demo.orders (status, updated_at);
CREATE OR REPLACE FUNCTION demo.touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END
$$;
CREATE OR REPLACE TRIGGER orders_touch BEFORE UPDATE OF status ON demo.orders
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION demo.touch();
CREATE TABLE IF NOT EXISTS demo.orders_claim (
    instance_id bigint PRIMARY KEY REFERENCES demo.orders (id),
    node        text        NOT NULL,
    token       text        NOT NULL,
    claimed_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS orders_claim_expires_idx ON demo.orders_claim (expires_at);
CREATE TABLE IF NOT EXISTS demo.reports (
    id    bigserial PRIMARY KEY,
    state text NOT NULL
);
CREATE INDEX IF NOT EXISTS reports_state_id_idx ON demo.reports (state, id);
`

// Workflows is the enginehealth configuration of the demo workflows.
const Workflows = `workflows:
  - name: orders
    table: demo.orders
    id_column: id
    status_column: status
    error_column: last_error
    updated_column: updated_at
    claimable: true
    claims: {table: demo.orders_claim}
    tasks:
      - name: reserve
        begin: Created
        interim: Reserving
        end: Reserved
        failed: ReserveFailed
        atomic_internal: true
        claim_timeout: %[1]s
      - name: ship
        begin: Reserved
        interim: Shipping
        end: Shipped
        failed: ShipFailed
        claim_timeout: %[1]s
  - name: reports
    table: demo.reports
    id_column: id
    status_column: state
    claimable: false
    tasks:
      - name: render
        begin: Queued
        interim: Rendering
        end: Rendered
        failed: RenderFailed
`

// WorkflowsYAML returns Workflows with the given claim timeout.
func WorkflowsYAML(claimTimeout time.Duration) string {
	return fmt.Sprintf(Workflows, claimTimeout)
}

// Seed inserts n orders in Created and n reports in Queued.
func Seed(ctx context.Context, db *sql.DB, n int) error {
	if _, err := db.ExecContext(ctx, Schema); err != nil {
		return fmt.Errorf("demo schema: %w", err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO demo.orders (status) SELECT 'Created' FROM generate_series(1, $1)`, n); err != nil {
		return fmt.Errorf("seed orders: %w", err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO demo.reports (state) SELECT 'Queued' FROM generate_series(1, $1)`, n); err != nil {
		return fmt.Errorf("seed reports: %w", err)
	}
	return nil
}

// Config of a Worker.
type Config struct {
	DB   *sql.DB
	Node string
	// Table and Tasks: the claimable workflow the worker runs.
	Table claims.Table
	Tasks []claims.Task
	// TaskDuration of the simulated work of one task.
	TaskDuration time.Duration
	// FailureRate is the fraction of tasks that end in their failed state.
	FailureRate float64
	// Idle is how long to wait when there is nothing to claim.
	Idle time.Duration
	// Poison instances crash the worker that claims them, every time: it
	// leaves the claim behind, unrenewed and unfinished, as a worker that
	// died on it would, and starts over (as a supervisor restarts it).
	Poison []string
	// OnCrash, when set, is called with each poison instance the worker
	// crashed on.
	OnCrash func(instance string)
}

// Stats counts a worker's outcomes.
type Stats struct {
	Claimed   atomic.Int64
	Finished  atomic.Int64
	Failed    atomic.Int64
	Lost      atomic.Int64 // Finish or Renew found the claim gone
	Abandoned atomic.Int64 // claims left behind by Die
	Crashed   atomic.Int64 // claims left behind on poison instances
}

// Worker claims and runs tasks of one claimable workflow.
type Worker struct {
	cfg   Config
	table claims.Table
	tasks []claims.Task
	Stats Stats

	dieOnce sync.Once
	dying   chan struct{}
}

// New returns a worker.
func New(cfg Config) (*Worker, error) {
	if cfg.Table.Claims == "" || len(cfg.Tasks) == 0 {
		return nil, fmt.Errorf("demoengine: a claims table and at least one task are required")
	}
	cfg.Idle = cmp.Or(cfg.Idle, 50*time.Millisecond)
	return &Worker{cfg: cfg, table: cfg.Table, tasks: cfg.Tasks, dying: make(chan struct{})}, nil
}

// Table returns the claims table the worker uses.
func (w *Worker) Table() claims.Table { return w.table }

// Die makes the worker stop as if killed: its current claim (or the next)
// is abandoned unrenewed and unfinished, and Run returns ErrDied.
func (w *Worker) Die() { w.dieOnce.Do(func() { close(w.dying) }) }

// ErrDied is returned by Run after Die.
var ErrDied = errors.New("demoengine: worker died")

// Abandoned is called with each claim left behind by Die; tests use it to
// send a late "zombie" Finish.
type Abandoned func(c claims.Claim)

// Run works until ctx is done (finishing the task in hand first) or Die.
func (w *Worker) Run(ctx context.Context, onAbandon Abandoned) error {
	for {
		select {
		case <-w.dying:
			return ErrDied
		default:
		}
		if ctx.Err() != nil {
			return nil
		}
		worked := false
		for _, task := range w.tasks {
			if ctx.Err() != nil {
				return nil
			}
			c, err := w.table.ClaimNext(ctx, w.cfg.DB, w.cfg.Node, task)
			if errors.Is(err, claims.ErrNothingToClaim) {
				continue
			}
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			worked = true
			w.Stats.Claimed.Add(1)
			if slices.Contains(w.cfg.Poison, c.Instance) {
				w.Stats.Crashed.Add(1)
				if w.cfg.OnCrash != nil {
					w.cfg.OnCrash(c.Instance)
				}
				continue
			}
			if err := w.work(ctx, &c, onAbandon); err != nil {
				return err
			}
		}
		if !worked {
			select {
			case <-ctx.Done():
				return nil
			case <-w.dying:
				return ErrDied
			case <-time.After(w.cfg.Idle):
			}
		}
	}
}

// work simulates the task, renewing the claim every third of its timeout,
// then finishes it.
func (w *Worker) work(ctx context.Context, c *claims.Claim, onAbandon Abandoned) error {
	done := time.After(w.cfg.TaskDuration)
	renew := time.NewTicker(max(c.Task.Timeout/3, time.Millisecond))
	defer renew.Stop()
	for {
		select {
		case <-w.dying:
			w.Stats.Abandoned.Add(1)
			if onAbandon != nil {
				onAbandon(*c)
			}
			return ErrDied
		case <-renew.C:
			if err := w.table.Renew(context.WithoutCancel(ctx), w.cfg.DB, c); errors.Is(err, claims.ErrClaimLost) {
				w.Stats.Lost.Add(1)
				return nil
			} else if err != nil {
				return err
			}
		case <-done:
			to := c.Task.Ends[0]
			if rand.Float64() < w.cfg.FailureRate {
				to = c.Task.Failed
			}
			err := w.table.Finish(context.WithoutCancel(ctx), w.cfg.DB, *c, to)
			switch {
			case errors.Is(err, claims.ErrClaimLost):
				w.Stats.Lost.Add(1)
			case err != nil:
				return err
			case to == c.Task.Failed:
				w.Stats.Failed.Add(1)
			default:
				w.Stats.Finished.Add(1)
			}
			return nil
		}
	}
}
