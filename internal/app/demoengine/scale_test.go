package demoengine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// scaleRows is the instance table of BenchmarkScale.
const scaleRows = 10_000_000

// BenchmarkScale simulates 10 and then 1,000 node records heartbeating
// (one goroutine per 32 nodes, each node every heartbeat_interval, 5 s,
// as the daemon's default; not_responding_after 15 s) beside 10M
// instance rows, and reports side by
// side: the heartbeat write load PostgreSQL takes (commits/s) and the
// heartbeats' p99 latency, the check pass time (best of 10, with the
// heartbeats running), GET /v1/nodes p99 through the API handler, and the
// slowest of the passes (every second) that mark the dead nodes (10 of
// 1,000; 1 of 10). pass-ratio =
// pass at 1,000 / pass at 10; goal ≤ 2.
func BenchmarkScale(b *testing.B) {
	sidecar, _ := benchDB(b, scaleRows, "Shipped")
	wfs := loadWorkflows(b, time.Minute)
	office, _ := master(b, sidecar, wfs)
	events := audit.New("enginehealth")
	store := testkit.Must(nodes.NewStore(nodes.StoreConfig{DB: sidecar, Schema: "enginehealth", Events: events}))
	fence := testkit.Must(leader.NewFence(leader.FenceConfig{DB: sidecar, Schema: "enginehealth", Events: events}))
	// The smallest not_responding_after the configuration allows with
	// the default heartbeat interval (3 × 5 s).
	const notRespondingAfter = 3 * nodes.DefaultHeartbeatInterval
	rep := testkit.Must(recovery.New(recovery.Config{DB: sidecar, Fence: fence, Events: events, Schema: "enginehealth", Workflows: wfs, Log: quiet}))
	checker := testkit.Must(health.NewChecker(health.CheckConfig{Fence: fence, Nodes: store, Recovery: rep, Events: events,
		Pauses:   testkit.Must(health.NewPauses(health.PausesConfig{DB: sidecar, Events: events})),
		Interval: time.Second, NotRespondingAfter: notRespondingAfter, Log: quiet}))
	handler := api.NewHandler(api.Config{Self: "master", Nodes: store, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})

	type figures struct {
		commitsPerS, beatP99, pass, nodesP99, markPass float64
		marked                                         int
	}
	run := func(n, kill int) figures {
		ctx := context.Background()
		// n records: the master's own and n-1 simulated ones (the dead
		// ones first).
		names, incs := make([]string, n), make([]string, n)
		names[n-1] = "master"
		if err := sidecar.Get(&incs[n-1], `SELECT incarnation FROM enginehealth.nodes WHERE name = 'master'`); err != nil {
			b.Fatal(err)
		}
		for i := range n - 1 {
			names[i], incs[i] = fmt.Sprintf("sim-%d-%04d", n, i), uuid.NewString()
			if _, err := store.Register(ctx, nodes.Registration{Name: names[i], Incarnation: incs[i], Hostname: names[i]}); err != nil {
				b.Fatal(err)
			}
		}
		defer sidecar.MustExec(`DELETE FROM enginehealth.nodes WHERE name LIKE 'sim-%'`)

		dead := make([]atomic.Bool, n) // nodes that stopped heartbeating
		var mu sync.Mutex
		var lat []time.Duration
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := 0; g < n; g += 32 {
			lo, hi := g, min(g+32, n)
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(nodes.DefaultHeartbeatInterval / time.Duration(hi-lo))
				defer tick.Stop()
				for i := lo; ; i = lo + (i+1-lo)%(hi-lo) {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					if dead[i].Load() {
						continue
					}
					start := time.Now()
					if _, err := store.Heartbeat(ctx, names[i], incs[i]); err != nil {
						b.Error(err)
						return
					}
					d := time.Since(start)
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
			}()
		}
		defer func() { close(stop); wg.Wait() }()

		var f figures
		// Write load over a 10 s window of steady heartbeats.
		commits := func() float64 {
			var c float64
			if err := sidecar.Get(&c, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`); err != nil {
				b.Fatal(err)
			}
			return c
		}
		// A measurement window or the master's pass cadence, not a wait
		// for a condition.
		pause := func(d time.Duration) { <-time.After(d) }
		started := time.Now()
		testkit.Eventually(b, 3*nodes.DefaultHeartbeatInterval, "every node beat once", func() (bool, error) {
			var beat int
			err := sidecar.Get(&beat, `SELECT count(*) FROM enginehealth.nodes WHERE last_active >= $1`, started)
			return beat == n, err
		})
		// The first pass of an office sweeps; measure warm ones.
		if _, err := checker.RunOnce(ctx, office, recovery.TriggerPeriodic, nil); err != nil {
			b.Fatal(err)
		}
		c0, t0 := commits(), time.Now()
		pause(10 * time.Second)
		f.commitsPerS = (commits() - c0) / time.Since(t0).Seconds()
		mu.Lock()
		f.beatP99 = p99(lat)
		mu.Unlock()

		best := time.Duration(1 << 62)
		for range 10 {
			start := time.Now()
			res, err := checker.RunOnce(ctx, office, recovery.TriggerPeriodic, nil)
			if err != nil {
				b.Fatal(err)
			}
			if len(res.NotResponding) > 0 || res.Disruption {
				b.Fatalf("%d nodes: a pass with every node heartbeating marked %v (disruption %v)", n, res.NotResponding, res.Disruption)
			}
			best = min(best, time.Since(start))
		}
		f.pass = best.Seconds() * 1000

		var api []time.Duration
		for range 50 {
			rec := httptest.NewRecorder()
			start := time.Now()
			handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/nodes", nil))
			api = append(api, time.Since(start))
			if rec.Code != http.StatusOK {
				b.Fatalf("GET /v1/nodes: %d %s", rec.Code, rec.Body)
			}
		}
		f.nodesP99 = p99(api)

		// kill nodes stop; once they are stale, one pass marks them.
		for i := range kill {
			dead[i].Store(true)
		}
		// Passes every second, as the master's schedule (a master that
		// did not pass for a while widens the threshold by its gap).
		// The dead nodes' last beats are spread over the heartbeat
		// interval: one or a few passes mark them; markPass is the
		// slowest of those.
		deadline := time.Now().Add(notRespondingAfter + 30*time.Second)
		for f.marked < kill && time.Now().Before(deadline) {
			pause(time.Second)
			start := time.Now()
			res, err := checker.RunOnce(ctx, office, recovery.TriggerPeriodic, nil)
			if err != nil {
				b.Fatal(err)
			}
			if res.Disruption {
				b.Fatalf("%d nodes, %d dead: disruption mode", n, kill)
			}
			if len(res.NotResponding) > 0 {
				f.marked += len(res.NotResponding)
				f.markPass = max(f.markPass, time.Since(start).Seconds()*1000)
			}
		}
		if f.marked != kill {
			b.Fatalf("%d nodes, %d dead: %d marked", n, kill, f.marked)
		}
		return f
	}
	for range b.N {
		small := run(10, 1)
		large := run(1000, 10)
		b.ReportMetric(small.commitsPerS, "commits-per-s-10")
		b.ReportMetric(large.commitsPerS, "commits-per-s-1000")
		b.ReportMetric(small.beatP99, "heartbeat-p99-ms-10")
		b.ReportMetric(large.beatP99, "heartbeat-p99-ms-1000")
		b.ReportMetric(small.pass, "pass-ms-10")
		b.ReportMetric(large.pass, "pass-ms-1000")
		b.ReportMetric(large.pass/small.pass, "pass-ratio")
		b.ReportMetric(small.nodesP99, "nodes-api-p99-ms-10")
		b.ReportMetric(large.nodesP99, "nodes-api-p99-ms-1000")
		b.ReportMetric(small.markPass, "mark-1-of-10-ms")
		b.ReportMetric(large.markPass, "mark-10-of-1000-ms")
	}
}

// p99 of ds, in milliseconds.
func p99(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*99/100)].Seconds() * 1000
}
