package demoengine

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/audit"
	"github.com/enginehealth/enginehealth/internal/pgdb"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/recovery"
	"github.com/jmoiron/sqlx"
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

// BenchmarkRepair repairs 100k interrupted instances (unclaimed, in an
// interim state) through the master, events and fencing included, and
// compares with one bare set-based UPDATE of the same rows on the same
// database. Target (DESIGN.md): ratio-vs-bare-update ≥ 0.5.
func BenchmarkRepair(b *testing.B) {
	for _, batch := range []int{1000, recovery.DefaultBatchSize} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) { benchRepair(b, batch) })
	}
}

func benchRepair(b *testing.B, batch int) {
	const rows = 100_000
	sidecar, engine := benchDB(b, rows, "Reserving")
	wfs := loadWorkflows(b, time.Minute)
	office, _ := master(b, sidecar, wfs)
	rep := recovery.New(recovery.Config{DB: sidecar, Fence: leaderFence(sidecar), Schema: "enginehealth", Workflows: wfs,
		BatchSize: batch, Log: quiet})
	reset := func() {
		b.Helper()
		if _, err := engine.Exec(`UPDATE demo.orders SET status = 'Reserving'`); err != nil {
			b.Fatal(err)
		}
		if _, err := engine.Exec(`VACUUM ANALYZE demo.orders`); err != nil {
			b.Fatal(err)
		}
	}
	var bare, ours time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		reset()
		start := time.Now()
		if _, err := engine.Exec(`UPDATE demo.orders SET status = 'Created' WHERE status = 'Reserving'`); err != nil {
			b.Fatal(err)
		}
		bare += time.Since(start)
		reset()
		b.StartTimer()
		start = time.Now()
		res, err := rep.Recover(context.Background(), office, recovery.TriggerManual, recovery.Scope{Workflows: []string{"orders"}}, nil)
		ours += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if res.Done() != rows {
			b.Fatalf("repaired %d of %d", res.Done(), rows)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/ours.Seconds(), "rows/s")
	b.ReportMetric(float64(rows)*float64(b.N)/bare.Seconds(), "bare-rows/s")
	b.ReportMetric(bare.Seconds()/ours.Seconds(), "ratio-vs-bare-update")
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

func leaderFence(db *sqlx.DB) *leader.Fence {
	return leader.NewFence(db, "enginehealth", audit.New("enginehealth"))
}
