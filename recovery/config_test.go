package recovery

import (
	"cmp"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

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
		{"negative batch", Config{DB: db, Fence: fence, Events: events, BatchSize: -1}, "may not be negative"},
	} {
		if r, err := New(c.cfg); r != nil || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	r, err := New(Config{DB: db, Fence: fence, Events: events})
	if err != nil || r.cfg.BatchSize != DefaultBatchSize || r.cfg.Schema != "enginehealth" {
		t.Fatalf("the defaults: %+v %v", r, err)
	}
}
