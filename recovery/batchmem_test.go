package recovery

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/leader"
)

// errExplained rolls back a transaction that explained a statement.
var errExplained = errors.New("explained")

// tempBlocks is a plan (EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)) node
// with what it wrote to temporary files.
type tempBlocks struct {
	Written float64      `json:"Temp Written Blocks"`
	Plans   []tempBlocks `json:"Plans"`
}

// total is what n and the nodes under it wrote.
func (n tempBlocks) total() float64 {
	t := n.Written
	for _, c := range n.Plans {
		t += c.total()
	}
	return t
}

// TestBatchHoldsItsRowsInMemory: a batch of 10,000 instances that a
// policy parks (its widest: each instance's decision and reason kept
// beside its row) writes nothing to temporary files under the batch's
// settings (batch_settings.sql), where PostgreSQL's default work_mem
// (4 MB) spilled its decisions to disk; the settings never lower a
// session's larger work_mem, and a batch that skips locked rows leaves
// the lock timeout alone.
func TestBatchHoldsItsRowsInMemory(t *testing.T) {
	db := pg.MigratedDB(t)
	r, o := ordersRepairer(t, db)
	const size = 10_000
	db.MustExec(`INSERT INTO app.orders (status) SELECT 'Reserving' FROM generate_series(1, $1)`, size)
	db.MustExec(`ANALYZE app.orders`)
	cfg := r.cfg
	cfg.BatchSize = size
	cfg.Workflows = []Workflow{benchOrders()}
	cfg.Workflows[0].Tasks[0].OnInterrupt = Policy{Strategy: StrategyRetry, MaxAttempts: 3,
		Backoff: Backoff{Kind: BackoffFixed, Base: time.Hour, MaxDelay: time.Hour}}
	park := testkit.Must(New(cfg))
	w := cfg.Workflows[0]
	var run int64
	if err := db.Get(&run, `INSERT INTO enginehealth.runs (term, master, kind, trigger, scope, status)
		VALUES (1, 'master', 'recovery', 'manual', '{}', 'running') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	st := testkit.Must(park.renderBatch(w, w.Tasks[0], CauseInterrupt, w.Claims, attribution{}, cursor{}, batchMode{rowless: true}, run))
	ctx := context.Background()
	// written explains the batch (rolled back) with the batch's
	// settings or without, and returns the blocks it wrote to
	// temporary files.
	written := func(settings bool) float64 {
		t.Helper()
		var blocks float64
		err := cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
			if settings {
				if _, err := park.st.batchSettings.Exec(ctx, tx, sqltext.Args{"ms": "1", "kb": batchWorkMem(size)}); err != nil {
					return err
				}
			}
			var out []byte
			if err := tx.GetContext(ctx, &out, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+st.SQL, st.Args...); err != nil {
				return err
			}
			var plans []struct {
				Plan tempBlocks `json:"Plan"`
			}
			if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
				t.Fatalf("EXPLAIN output: %v", err)
			}
			blocks = plans[0].Plan.total()
			return errExplained
		})
		if !errors.Is(err, errExplained) {
			t.Fatal(err)
		}
		return blocks
	}
	if n := written(false); n == 0 {
		t.Fatalf("without the batch's settings, the batch of %d wrote nothing to temporary files: this test shows nothing", size)
	}
	if n := written(true); n != 0 {
		t.Fatalf("the batch of %d wrote %v blocks to temporary files under its settings (work_mem %d kB)", size, n, batchWorkMem(size))
	}
	// The settings themselves, in a transaction of a session with a
	// larger work_mem and a lock timeout of its own.
	err := cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
		if _, err := tx.ExecContext(ctx, `SET LOCAL work_mem = '1GB'; SET LOCAL lock_timeout = '7s'`); err != nil {
			return err
		}
		if _, err := park.st.batchSettings.Exec(ctx, tx, sqltext.Args{"ms": "", "kb": batchWorkMem(size)}); err != nil {
			return err
		}
		var mem, lock string
		if err := tx.QueryRowContext(ctx, `SELECT current_setting('work_mem'), current_setting('lock_timeout')`).Scan(&mem, &lock); err != nil {
			return err
		}
		if mem != "1GB" || lock != "7s" {
			t.Errorf("after the settings of a batch that skips locked rows: work_mem %s (want the session's 1GB), lock_timeout %s (want 7s)", mem, lock)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
