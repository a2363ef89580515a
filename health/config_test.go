package health

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// offline returns the master's dependencies for a test that reads the
// configuration and never reaches the database: no connection stands
// behind their pool.
func offline() MasterConfig {
	db, events := new(sqlx.DB), audit.New("enginehealth")
	fence := testkit.Must(leader.NewFence(leader.FenceConfig{DB: db, Events: events}))
	return MasterConfig{
		Fence:    fence,
		Nodes:    testkit.Must(nodes.NewStore(nodes.StoreConfig{DB: db, Events: events})),
		Recovery: testkit.Must(recovery.New(recovery.Config{DB: db, Fence: fence, Events: events})),
		Log:      quiet,
	}
}

// TestNewRefusesBadConfig: a checker, master's duties or pause switch
// that could not work are refused at construction, saying what is wrong.
func TestNewRefusesBadConfig(t *testing.T) {
	deps := offline()
	check := func(edit func(c *CheckConfig)) CheckConfig {
		c := CheckConfig{Fence: deps.Fence, Nodes: deps.Nodes, Recovery: deps.Recovery, Events: audit.New("enginehealth"),
			Pauses: testkit.Must(NewPauses(PausesConfig{DB: new(sqlx.DB), Events: audit.New("enginehealth")}))}
		edit(&c)
		return c
	}
	for _, c := range []struct {
		name string
		cfg  CheckConfig
		want string
	}{
		{"no fence", check(func(c *CheckConfig) { c.Fence = nil }), "CheckConfig.Fence"},
		{"no event log", check(func(c *CheckConfig) { c.Events = nil }), "CheckConfig.Fence, Nodes, Recovery, Events, Pauses"},
		{"no pause switch", check(func(c *CheckConfig) { c.Pauses = nil }), "the pause switch"},
		{"negative duration", check(func(c *CheckConfig) { c.ForgetAfter = -time.Hour }), "may not be negative"},
		{"fraction above 1", check(func(c *CheckConfig) { c.MaxUnresponsiveFraction = 1.5 }), "(0, 1]"},
		{"fraction NaN", check(func(c *CheckConfig) { c.MaxUnresponsiveFraction = math.NaN() }), "(0, 1]"},
		{"negative fraction", check(func(c *CheckConfig) { c.MaxUnresponsiveFraction = -0.5 }), "(0, 1]"},
		{"grade fraction NaN", check(func(c *CheckConfig) {
			c.Grades = &nodes.GradeConfig{Window: time.Minute, QuietPeriod: time.Hour, MaxErrorFraction: math.NaN()}
		}), "max error fraction must be in [0, 1]"},
		{"grades zero", check(func(c *CheckConfig) { c.Grades = &nodes.GradeConfig{} }), "window and quiet period must be positive"},
	} {
		if ch, err := NewChecker(c.cfg); ch != nil || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("checker, %s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	ch, err := NewChecker(check(func(*CheckConfig) {}))
	if err != nil || ch.cfg.NotRespondingAfter != DefaultNotRespondingAfter || ch.cfg.MaxUnresponsiveFraction != DefaultMaxUnresponsiveFraction {
		t.Fatalf("the checker's defaults: %v", err)
	}

	for _, c := range []struct {
		name string
		edit func(c *MasterConfig)
		want string
	}{
		{"no repairer", func(c *MasterConfig) { c.Recovery = nil }, "MasterConfig.Fence, Nodes, Recovery"},
		{"negative tick", func(c *MasterConfig) { c.Tick = -time.Second }, "may not be negative"},
	} {
		cfg := offline()
		c.edit(&cfg)
		if m, err := NewMaster(cfg); m != nil || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("master, %s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	if m, err := NewMaster(offline()); err != nil || m.cfg.Tick != nodes.DefaultHeartbeatInterval {
		t.Fatalf("the master's defaults: %v", err)
	}

	db, events := new(sqlx.DB), audit.New("enginehealth")
	for name, cfg := range map[string]PausesConfig{"no pool": {Events: events}, "no event log": {DB: db}} {
		if p, err := NewPauses(cfg); p != nil || err == nil || !strings.Contains(err.Error(), "PausesConfig.DB, Events") {
			t.Errorf("pause switch, %s: %v, want an error naming PausesConfig.DB, Events", name, err)
		}
	}
	if p, err := NewPauses(PausesConfig{DB: db, Events: events}); err != nil || !strings.Contains(p.st.readPause.SQL, `"enginehealth"."pause"`) {
		t.Fatalf("the pause switch's default schema: %v", err)
	}
}
