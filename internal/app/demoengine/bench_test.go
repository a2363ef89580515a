package demoengine

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
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
