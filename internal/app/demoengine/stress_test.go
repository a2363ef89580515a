package demoengine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/etcdtest"
	"github.com/enginehealth/enginehealth/internal/testkit/leadertest"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

var (
	pg   *pgtest.Server
	etcd *etcdtest.Etcd
)

func TestMain(m *testing.M) {
	testkit.Main(m, func(m *testing.M) int { return leadertest.Main(m, &pg, &etcd) })
}

var quiet = leadertest.Quiet

// tracking records every status change of demo.orders with whether the
// sidecar made it and whether a live claim existed at that moment (read
// with a fresh snapshot inside the writing transaction).
const tracking = `
CREATE TABLE demo.transitions (
    seq         bigserial PRIMARY KEY,
    instance    bigint NOT NULL,
    from_status text NOT NULL,
    to_status   text NOT NULL,
    by_sidecar  boolean NOT NULL,
    claim_live  boolean NOT NULL
);
CREATE FUNCTION demo.track() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status IS DISTINCT FROM NEW.status THEN
        INSERT INTO demo.transitions (instance, from_status, to_status, by_sidecar, claim_live)
        VALUES (NEW.id, OLD.status, NEW.status,
                current_setting('application_name') LIKE 'enginehealth%',
                EXISTS (SELECT 1 FROM demo.orders_claim c WHERE c.instance_id = NEW.id AND c.expires_at > now()));
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER track AFTER UPDATE ON demo.orders FOR EACH ROW EXECUTE FUNCTION demo.track();
`

func loadWorkflows(t testing.TB, claimTimeout time.Duration) []recovery.Workflow {
	t.Helper()
	y := "database: {dsn_env: X}\netcd:\n  endpoints: [\"127.0.0.1:1\"]\n" + WorkflowsYAML(time.Second)
	cfg, err := configs.Parse([]byte(y), "demo.yaml", func(k string) (string, bool) { return "postgres://x@y/z", k == "X" })
	if err != nil {
		t.Fatal(err)
	}
	// Shorter than a configuration allows: the stress wants many expiries.
	wfs := cfg.RecoveryWorkflows()
	for i := range wfs {
		for j := range wfs[i].Tasks {
			wfs[i].Tasks[j].Timeout = claimTimeout
		}
	}
	return wfs
}

// master elects a master for the test and returns its office and checker.
func master(t testing.TB, db *sqlx.DB, wfs []recovery.Workflow) (*leader.Office, *health.Checker) {
	t.Helper()
	o := leadertest.Office(t, db, etcd.Endpoint, "enginehealth", "master")
	fence := testkit.Must(leader.NewFence(leader.FenceConfig{DB: db, Schema: "enginehealth", Events: audit.New("enginehealth")}))
	rep := testkit.Must(recovery.New(recovery.Config{DB: db, Fence: fence, Events: audit.New("enginehealth"), Schema: "enginehealth", Workflows: wfs, BatchSize: 50, Log: quiet}))
	chk := testkit.Must(health.NewChecker(health.CheckConfig{Fence: fence, Nodes: testkit.Must(nodes.NewStore(nodes.StoreConfig{DB: db, Schema: "enginehealth", Events: audit.New("enginehealth")})), Recovery: rep, Events: audit.New("enginehealth"),
		Pauses:   testkit.Must(health.NewPauses(health.PausesConfig{DB: db, Events: audit.New("enginehealth")})),
		Interval: time.Second, NotRespondingAfter: time.Hour, Log: quiet}))
	return o, chk
}

// zombie is a late Finish by a worker that was "killed" mid-task.
type zombie struct {
	token string
	err   error
}

// TestRaceStress runs workers claiming, renewing and finishing thousands of
// instances while the master checks every few milliseconds with short
// claim timeouts, and workers die mid-task (some coming back late as
// zombies). Then it checks the invariants over the whole history.
func TestRaceStress(t *testing.T) {
	duration := 30 * time.Second
	if v := os.Getenv("EH_STRESS_SECONDS"); v != "" {
		s, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("EH_STRESS_SECONDS: %v", err)
		}
		duration = time.Duration(s) * time.Second
	}
	const (
		instances    = 3000
		workers      = 8
		claimTimeout = 300 * time.Millisecond
	)
	dsn := pg.NewDatabase(t)
	sidecar, err := pgdb.Open(pgdb.Config{DSN: dsn, ApplicationName: "enginehealth/master", MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer sidecar.Close()
	if _, err := pgdb.Migrate(context.Background(), sidecar, "enginehealth"); err != nil {
		t.Fatal(err)
	}
	engine, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	engine.SetMaxOpenConns(3 * workers)
	ctx := context.Background()
	if err := Seed(ctx, engine, instances); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Exec(tracking); err != nil {
		t.Fatal(err)
	}
	wfs := loadWorkflows(t, claimTimeout)
	// reserve (atomic) keeps its default policy, retry at once up to 10
	// times; ship is retried twice after a short delay.
	const shipRetries = 2
	wfs[0].Tasks[1].OnInterrupt = recovery.Policy{Strategy: recovery.StrategyRetry, MaxAttempts: shipRetries,
		Backoff: recovery.Backoff{Kind: recovery.BackoffFixed, Base: 30 * time.Millisecond, MaxDelay: time.Second, Jitter: 0.2}}
	orders := wfs[0]
	office, checker := master(t, sidecar, wfs)

	// The master checks every few milliseconds.
	stopMaster := make(chan struct{})
	masterDone := make(chan error, 1)
	passes := 0
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopMaster:
				masterDone <- nil
				return
			case <-tick.C:
			}
			if _, err := checker.RunOnce(ctx, office, recovery.TriggerPeriodic, nil); err != nil {
				masterDone <- err
				return
			}
			passes++
		}
	}()

	var (
		mu      sync.Mutex
		zombies []zombie
		zwg     sync.WaitGroup
		wwg     sync.WaitGroup
		all     []*Worker
		died    int
	)
	wctx, stopWorkers := context.WithCancel(ctx)
	start := func(i int) *Worker {
		w, err := New(Config{DB: engine, Node: fmt.Sprintf("engine-%d", i), Table: *orders.Claims, Tasks: orders.ClaimTasks(),
			TaskDuration: time.Duration(10+rand.IntN(4)*150) * time.Millisecond, FailureRate: 0.1, Idle: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		all = append(all, w)
		mu.Unlock()
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			err := w.Run(wctx, func(c claims.Claim) {
				// Half of the dead come back late and try to finish.
				if rand.IntN(2) == 0 {
					return
				}
				zwg.Add(1)
				go func() {
					defer zwg.Done()
					<-time.After(claimTimeout + time.Duration(rand.IntN(200))*time.Millisecond) // a paused process
					err := w.Table().Finish(ctx, engine, c, c.Task.Ends[0])
					mu.Lock()
					zombies = append(zombies, zombie{token: c.Token, err: err})
					mu.Unlock()
				}()
			})
			if err != nil && !errors.Is(err, ErrDied) {
				t.Errorf("worker: %v", err)
			}
		}()
		return w
	}
	live := make([]*Worker, workers)
	for i := range workers {
		live[i] = start(i)
	}
	next := workers
	deadline := time.After(duration)
loop:
	for {
		select {
		case <-deadline:
			break loop
		case <-time.After(time.Duration(100+rand.IntN(300)) * time.Millisecond):
			i := rand.IntN(workers)
			live[i].Die() // killed mid-task: its claim is left behind
			died++
			live[i] = start(next)
			next++
		}
	}
	stopWorkers()
	wwg.Wait()
	zwg.Wait()
	close(stopMaster)
	if err := <-masterDone; err != nil {
		t.Fatalf("master pass: %v", err)
	}

	// Final pass once every abandoned claim has expired.
	waitUntil(t, engine, `SELECT NOT EXISTS (SELECT 1 FROM demo.orders_claim WHERE expires_at >= now())`)
	final, err := checker.RunOnce(ctx, office, recovery.TriggerManual, nil)
	if err != nil {
		t.Fatal(err)
	}
	// And passes until no retry waits.
	testkit.Eventually(t, 30*time.Second, "every scheduled retry run", func() (bool, error) {
		if _, err := checker.RunOnce(ctx, office, recovery.TriggerManual, nil); err != nil {
			return false, err
		}
		var waiting bool
		err = engine.QueryRow(`SELECT EXISTS (SELECT 1 FROM enginehealth.attempts WHERE state = 'waiting')`).Scan(&waiting)
		return !waiting, err
	})

	var stats struct{ claimed, finished, failed, lost, abandoned int64 }
	for _, w := range all {
		stats.claimed += w.Stats.Claimed.Load()
		stats.finished += w.Stats.Finished.Load()
		stats.failed += w.Stats.Failed.Load()
		stats.lost += w.Stats.Lost.Load()
		stats.abandoned += w.Stats.Abandoned.Load()
	}
	count := func(q string, args ...any) int64 {
		t.Helper()
		var n int64
		if err := engine.QueryRow(q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	// The sidecar moves instances by repairs and by due retries.
	repairs := count(`SELECT count(*) FROM enginehealth.events WHERE kind IN ($1, $2)`, audit.KindRepair, audit.KindRetried)
	scheduled := count(`SELECT count(*) FROM enginehealth.events WHERE kind = $1`, audit.KindRetryScheduled)
	expired := count(`SELECT count(*) FROM enginehealth.events WHERE kind = $1`, audit.KindClaimExpired)
	t.Logf("%s: %d passes, %d workers died; claimed %d, finished %d, failed %d, lost %d, abandoned %d; %d claims expired, %d repairs and retries, %d retries scheduled; %d zombie finishes; final pass expired %d, repaired %d",
		duration, passes, died, stats.claimed, stats.finished, stats.failed, stats.lost, stats.abandoned, expired, repairs, scheduled, len(zombies),
		final.Recovery.ClaimsExpired, final.Recovery.Done())

	// The run exercised every path.
	if stats.finished == 0 || repairs == 0 || expired == 0 || died == 0 || len(zombies) == 0 || scheduled == 0 {
		t.Fatalf("the run did not exercise the protocol: finished %d, repairs %d, expired %d, died %d, zombies %d, retries scheduled %d",
			stats.finished, repairs, expired, died, len(zombies), scheduled)
	}

	// 1. No instance under a live claim was repaired.
	if n := count(`SELECT count(*) FROM demo.transitions WHERE by_sidecar AND claim_live`); n != 0 {
		t.Errorf("%d repairs of instances under a live claim", n)
	}

	// 2. No engine write overwrote a repair: every engine move out of an
	// interim state follows the engine's own claim of that instance.
	if n := count(`SELECT count(*) FROM (
			SELECT by_sidecar, from_status,
			       lag(by_sidecar) OVER w AS prev_sidecar, lag(to_status) OVER w AS prev_to
			FROM demo.transitions WINDOW w AS (PARTITION BY instance ORDER BY seq)
		) x WHERE NOT by_sidecar AND from_status IN ('Reserving', 'Shipping')
		  AND (prev_sidecar IS DISTINCT FROM false OR prev_to IS DISTINCT FROM from_status)`); n != 0 {
		t.Errorf("%d engine writes out of an interim state not preceded by the engine's claim", n)
	}
	// A zombie that finished did so before its claim expired: its token
	// is in no claim_expired event.
	for _, z := range zombies {
		if z.err != nil {
			if !errors.Is(z.err, claims.ErrClaimLost) {
				t.Errorf("zombie finish failed oddly: %v", z.err)
			}
			continue
		}
		if n := count(`SELECT count(*) FROM enginehealth.events WHERE kind = $1 AND reason LIKE '%' || $2 || '%'`, audit.KindClaimExpired, z.token); n != 0 {
			t.Errorf("a late engine Finish succeeded after its claim %s expired", z.token)
		}
	}

	// 3. Every state change by the sidecar has exactly one event.
	if n := count(`SELECT count(*) FROM demo.transitions WHERE by_sidecar`); n != repairs {
		t.Errorf("%d sidecar state changes but %d repair events", n, repairs)
	}
	if n := count(`SELECT count(*) FROM (
			SELECT instance::text AS instance, from_status, to_status, count(*) AS n FROM demo.transitions WHERE by_sidecar GROUP BY 1, 2, 3
		) tr FULL JOIN (
			SELECT instance, from_state, to_state, count(*) AS n FROM enginehealth.events
			WHERE kind IN ($1, $2) AND to_state IS NOT NULL GROUP BY 1, 2, 3
		) ev ON ev.instance = tr.instance AND ev.from_state = tr.from_status AND ev.to_state = tr.to_status
		WHERE tr.n IS DISTINCT FROM ev.n`, audit.KindRepair, audit.KindRetried); n != 0 {
		t.Errorf("%d (instance, from, to) groups where sidecar changes and repair events differ", n)
	}

	// 5. Retry policies: no attempt count exceeds max_attempts, and the
	// retries of each instance and task (its moves back to begin) are
	// numbered 1, 2, … up to its attempts row's count (or, retried at
	// once without a row, its last retry's), none twice, none skipped.
	if n := count(`SELECT count(*) FROM (SELECT task, attempt FROM enginehealth.attempts
			UNION ALL SELECT task, attempt FROM enginehealth.events WHERE kind = 'instance_repaired' AND attempt IS NOT NULL) a
		WHERE (task = 'ship' AND attempt > $1) OR (task = 'reserve' AND attempt > $2)`,
		shipRetries, recovery.DefaultAtomicMaxAttempts); n != 0 {
		t.Errorf("%d attempts rows or retries beyond max_attempts", n)
	}
	if n := count(`SELECT count(*) FROM enginehealth.attempts a FULL JOIN (
			SELECT instance, task, count(*) AS n, count(DISTINCT attempt) AS distinct_n, max(attempt) AS top
			FROM enginehealth.events e JOIN (VALUES ('reserve', 'Created'), ('ship', 'Reserved')) AS b(task, begin) USING (task)
			WHERE e.workflow = 'orders' AND ((e.kind = $1 AND e.to_state = b.begin) OR e.kind = $2)
			GROUP BY 1, 2
		) r USING (instance, task)
		WHERE coalesce(a.attempt, r.top) IS DISTINCT FROM coalesce(r.n, 0) AND NOT (a.attempt IS NULL AND r.n IS NULL)
		   OR r.n <> r.distinct_n OR r.n <> r.top`, audit.KindRepair, audit.KindRetried); n != 0 {
		t.Errorf("%d instances whose retries are not numbered 1..attempt exactly once", n)
	}
	retried := count(`SELECT count(*) FROM enginehealth.events WHERE kind = $1`, audit.KindRetried)
	if retried == 0 {
		t.Errorf("no due retry was run")
	}

	// 4. Nothing is left interim and unclaimed after the final pass.
	if n := count(`SELECT count(*) FROM demo.orders o WHERE status IN ('Reserving', 'Shipping')
		AND NOT EXISTS (SELECT 1 FROM demo.orders_claim c WHERE c.instance_id = o.id)`); n != 0 {
		t.Errorf("%d instances left interim and unclaimed after the final pass", n)
	}
	if n := count(`SELECT count(*) FROM demo.orders WHERE status IN ('Reserving', 'Shipping')`); n != 0 {
		t.Errorf("%d instances still interim with every worker stopped", n)
	}
}

// waitUntil polls an SQL condition until it is true (30s at most).
func waitUntil(t *testing.T, db *sql.DB, cond string) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, cond, func() (bool, error) {
		var ok bool
		err := db.QueryRow(cond).Scan(&ok)
		return ok, err
	})
}
