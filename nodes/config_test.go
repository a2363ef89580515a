package nodes

import (
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
)

// TestNewRefusesBadConfig: a store or a heartbeater that could not work
// is refused at construction, saying what is wrong.
func TestNewRefusesBadConfig(t *testing.T) {
	db := new(sqlx.DB) // never used: nothing here reaches the database
	events := audit.New("enginehealth")
	for _, c := range []struct {
		name string
		cfg  StoreConfig
		want string
	}{
		{"no pool", StoreConfig{Events: events}, "StoreConfig.DB"},
		{"no event log", StoreConfig{DB: db}, "StoreConfig.Events"},
	} {
		if s, err := NewStore(c.cfg); s != nil || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("store, %s: %v, want an error naming %s", c.name, err, c.want)
		}
	}
	s, err := NewStore(StoreConfig{DB: db, Events: events})
	if err != nil {
		t.Fatalf("a good store config: %v", err)
	}
	for _, c := range []struct {
		name string
		cfg  HeartbeatConfig
		want string
	}{
		{"no store", HeartbeatConfig{Name: "a", Incarnation: "1"}, "HeartbeatConfig.Store"},
		{"no incarnation", HeartbeatConfig{Store: s, Name: "a"}, "name and incarnation"},
		{"negative interval", HeartbeatConfig{Store: s, Name: "a", Incarnation: "1", Interval: -time.Second}, "may not be negative"},
	} {
		if h, err := NewHeartbeater(c.cfg); h != nil || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("heartbeater, %s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	if _, err := NewHeartbeater(HeartbeatConfig{Store: s, Name: "a", Incarnation: "1"}); err != nil {
		t.Fatalf("a good heartbeat config (the defaults): %v", err)
	}
}
