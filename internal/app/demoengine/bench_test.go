package demoengine

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/recovery"
)

// benchDB returns a migrated database with the demo schema and n orders in
// status, and the sidecar's and an engine's pools.
func benchDB(b *testing.B, n int, status string) (*sqlx.DB, *sql.DB) {
	b.Helper()
	dsn := pg.NewDatabase(b)
	sidecar, err := pgdb.Open(pgdb.Config{DSN: dsn, ApplicationName: "enginehealth/bench", StatementTimeout: 5 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sidecar.Close() })
	if _, err := pgdb.Migrate(context.Background(), sidecar, "enginehealth"); err != nil {
		b.Fatal(err)
	}
	engine, err := sql.Open("postgres", dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { engine.Close() })
	if _, err := engine.Exec(Schema); err != nil {
		b.Fatal(err)
	}
	if _, err := engine.Exec(`INSERT INTO demo.orders (status) SELECT $1 FROM generate_series(1, $2)`, status, n); err != nil {
		b.Fatal(err)
	}
	if _, err := engine.Exec(`VACUUM ANALYZE demo.orders`); err != nil {
		b.Fatal(err)
	}
	return sidecar, engine
}

// BenchmarkCheckIdle times a check pass with nothing stuck on 10k and on
// 1M instance rows; idle-ratio = large / small. Target: ≤ 1.5 (index
// driven, never a table scan).
func BenchmarkCheckIdle(b *testing.B) {
	pass := func(n int) time.Duration {
		sidecar, _ := benchDB(b, n, "Shipped")
		wfs := loadWorkflows(b, time.Minute)
		office, checker := master(b, sidecar, wfs)
		// Warm up caches and plans, then take the best of several passes.
		best := time.Duration(1 << 62)
		for range 20 {
			start := time.Now()
			if _, err := checker.RunOnce(context.Background(), office, recovery.TriggerPeriodic, nil); err != nil {
				b.Fatal(err)
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	var small, large time.Duration
	for range b.N {
		small += pass(10_000)
		large += pass(1_000_000)
	}
	b.ReportMetric(float64(small.Microseconds())/float64(b.N)/1000, "idle-10k-ms")
	b.ReportMetric(float64(large.Microseconds())/float64(b.N)/1000, "idle-1M-ms")
	b.ReportMetric(large.Seconds()/small.Seconds(), "idle-ratio")
}

// BenchmarkCheckParked times check passes over work that policies have
// parked, against an idle pass (nothing stuck) on a table of the same
// size, 1M orders: with 100k shipments waiting for a retry an hour away
// (ratio-100k-waiting), and with 1M old failures under an on_failure
// retry policy (ratio-1M-old-failures). Targets (retry issue): each ≤ 1.5
// (index driven: neither walks the parked rows). The first pass of an
// office sweeps every interrupted instance, the parked ones included:
// sweep-100k-waiting-ms says what that costs.
func BenchmarkCheckParked(b *testing.B) {
	const rows = 1_000_000
	best := func(b *testing.B, wfs []recovery.Workflow, setup string) (first, best time.Duration) {
		sidecar, engine := benchDB(b, rows, "Shipped")
		if _, err := engine.Exec(setup); err != nil {
			b.Fatal(err)
		}
		for _, t := range []string{"demo.orders", "enginehealth.attempts"} {
			if _, err := engine.Exec(`VACUUM ANALYZE ` + t); err != nil {
				b.Fatal(err)
			}
		}
		office, checker := master(b, sidecar, wfs)
		best = time.Duration(1 << 62)
		for i := range 21 {
			start := time.Now()
			res, err := checker.RunOnce(context.Background(), office, recovery.TriggerPeriodic, nil)
			if err != nil {
				b.Fatal(err)
			}
			if res.Recovery.Done() != 0 || res.Retries.Retried != 0 || len(res.Failures) != 0 {
				b.Fatalf("pass %d did work: %+v", i, res)
			}
			if i == 0 {
				first = time.Since(start)
				continue
			}
			best = min(best, time.Since(start))
		}
		return first, best
	}
	var idle, waiting, failures, sweep time.Duration
	for range b.N {
		_, d := best(b, loadWorkflows(b, time.Minute), "SELECT 1")
		idle += d

		wfs := loadWorkflows(b, time.Minute)
		wfs[0].Tasks[1].OnInterrupt = recovery.Policy{Strategy: recovery.StrategyRetry, MaxAttempts: 3,
			Backoff: recovery.Backoff{Kind: recovery.BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}}
		first, d := best(b, wfs, `UPDATE demo.orders SET status = 'Shipping' WHERE id <= 100000;
			INSERT INTO enginehealth.attempts (workflow, instance, task, attempt, state, cause, left_in, next_attempt_at)
			SELECT 'orders', id::text, 'ship', 0, 'waiting', 'interrupt', 'Shipping', now() + interval '1h'
			FROM generate_series(1, 100000) AS id`)
		waiting += d
		sweep += first

		wfs = loadWorkflows(b, time.Minute)
		wfs[0].Tasks[1].OnFailure = recovery.Policy{Strategy: recovery.StrategyRetry, MaxAttempts: 3,
			Backoff: recovery.Backoff{Kind: recovery.BackoffFixed, Base: time.Minute, MaxDelay: time.Hour}}
		_, d = best(b, wfs, `ALTER TABLE demo.orders DISABLE TRIGGER orders_touch;
			UPDATE demo.orders SET status = 'ShipFailed', updated_at = now() - interval '1 day';
			ALTER TABLE demo.orders ENABLE TRIGGER orders_touch`)
		failures += d
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) / 1000 }
	b.ReportMetric(ms(idle), "idle-ms")
	b.ReportMetric(ms(waiting), "waiting-100k-ms")
	b.ReportMetric(ms(failures), "old-failures-1M-ms")
	b.ReportMetric(ms(sweep), "sweep-100k-waiting-ms")
	b.ReportMetric(waiting.Seconds()/idle.Seconds(), "ratio-100k-waiting")
	b.ReportMetric(failures.Seconds()/idle.Seconds(), "ratio-1M-old-failures")
}
