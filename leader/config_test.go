package leader

import (
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
)

// TestNewRefusesBadConfig: an elector or a fence that could not work is
// refused at construction, whoever builds it, saying what is wrong.
func TestNewRefusesBadConfig(t *testing.T) {
	cli := newClient(t)
	ok := Config{Client: cli, TTL: MinLeaseTTL, TrustMargin: time.Second, Candidate: Candidate{Name: "a", Incarnation: "1"}}
	if _, err := New(ok); err != nil {
		t.Fatalf("a good config: %v", err)
	}
	if _, err := New(Config{Client: cli, Candidate: ok.Candidate}); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"no client", func(c *Config) { c.Client = nil }, "etcd client"},
		{"no candidate", func(c *Config) { c.Candidate = Candidate{Name: "a"} }, "name and incarnation"},
		{"TTL below the minimum", func(c *Config) { c.TTL = 2 * time.Second }, "below the minimum 3s"},
		{"TTL not whole seconds", func(c *Config) { c.TTL = 3500 * time.Millisecond }, "whole seconds"},
		{"negative margin", func(c *Config) { c.TrustMargin = -time.Second }, "may not be negative"},
		{"window too short", func(c *Config) { c.TrustMargin = 2 * time.Second }, "no longer than TTL/3"},
		{"prefix without slashes", func(c *Config) { c.Prefix = "no-slash" }, "must start and end with '/'"},
		{"prefix without its last slash", func(c *Config) { c.Prefix = "/a" }, "must start and end with '/'"},
	} {
		cfg := ok
		c.edit(&cfg)
		if e, err := New(cfg); e != nil || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}

	db := new(sqlx.DB) // never used: the fence refuses before
	for _, c := range []struct {
		name string
		cfg  FenceConfig
		want string
	}{
		{"no pool", FenceConfig{Events: audit.New("enginehealth")}, "FenceConfig.DB"},
		{"no event log", FenceConfig{DB: db}, "FenceConfig.Events"},
	} {
		if f, err := NewFence(c.cfg); f != nil || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("fence, %s: %v, want an error naming %s", c.name, err, c.want)
		}
	}
}
