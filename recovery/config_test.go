package recovery

import (
	"cmp"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/leader"
)

// offline returns a repairer of cfg for a test that renders statements or
// reads the configuration and never reaches the database: no connection
// stands behind its pool and its fence.
func offline(cfg Config) *Repairer {
	db := new(sqlx.DB)
	cfg.DB = db
	cfg.Events = cmp.Or(cfg.Events, audit.New("enginehealth"))
	cfg.Fence = testkit.Must(leader.NewFence(leader.FenceConfig{DB: db, Events: cfg.Events}))
	return testkit.Must(New(cfg))
}

// TestNewRefusesBadConfig: a repairer that could not work is refused at
// construction, saying what is wrong.
func TestNewRefusesBadConfig(t *testing.T) {
	db, events := new(sqlx.DB), audit.New("enginehealth")
	fence := testkit.Must(leader.NewFence(leader.FenceConfig{DB: db, Events: events}))
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no pool", Config{Fence: fence, Events: events}, "Config.DB"},
		{"no fence", Config{DB: db, Events: events}, "Config.Fence"},
		{"no event log", Config{DB: db, Fence: fence}, "Config.Events"},
		{"a nil pool in the interface", Config{DB: (*sqlx.DB)(nil), Fence: fence, Events: events}, "Config.DB"},
		{"negative batch", Config{DB: db, Fence: fence, Events: events, BatchSize: -1}, "may not be negative"},
		{"negative settle batch", Config{DB: db, Fence: fence, Events: events, SettleBatchSize: -1}, "may not be negative"},
		{"misspelt strategy", Config{DB: db, Fence: fence, Events: events, Workflows: withPolicy(Policy{Strategy: "retyr"})},
			`workflow orders, task ship: on_interrupt strategy "retyr" is not one of`},
		{"misspelt backoff", Config{DB: db, Fence: fence, Events: events, Workflows: withPolicy(Policy{Strategy: StrategyRetry, Backoff: Backoff{Kind: "expnential"}})},
			`on_interrupt backoff kind "expnential" is not one of`},
	} {
		if r, err := New(c.cfg); r != nil || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	r, err := New(Config{DB: db, Fence: fence, Events: events})
	if err != nil || r.cfg.BatchSize != DefaultBatchSize || r.cfg.SettleBatchSize != DefaultBatchSize || r.cfg.Schema != "enginehealth" {
		t.Fatalf("the defaults: %+v %v", r, err)
	}
	// The settle step's batches follow BatchSize, but not below
	// MinSettleBatchSize: a small BatchSize keeps the engine's rows
	// locked briefly, and the settle step locks none of them.
	for _, c := range []struct{ batch, settle, want int }{{1, 0, MinSettleBatchSize}, {5000, 0, 5000}, {1, 3, 3}} {
		r, err := New(Config{DB: db, Fence: fence, Events: events, BatchSize: c.batch, SettleBatchSize: c.settle})
		if err != nil || r.cfg.SettleBatchSize != c.want {
			t.Errorf("batch %d, settle batch %d: settle batch %d (%v), want %d", c.batch, c.settle, r.cfg.SettleBatchSize, err, c.want)
		}
	}
}

// withPolicy returns one workflow whose one task's on_interrupt is p.
func withPolicy(p Policy) []Workflow {
	return []Workflow{{Name: "orders", Table: "orders", IDColumn: "id", StatusColumn: "status",
		Tasks: []Task{{Task: claims.Task{Name: "ship", Begin: "ready", Interim: "shipping", Ends: []string{"shipped"}, Failed: "failed"}, OnInterrupt: p}}}}
}
