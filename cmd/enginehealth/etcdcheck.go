package main

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
)

// etcdCheck reads etcd from the running daemon every lease TTL and keeps
// what it found, diagnosed as at start-up (explainEtcd: TLS refused
// either way, authentication, permissions, unreachable): the status says
// it, /metrics exports it (enginehealth_etcd_reachable), and the log says
// each change once. The elector's own requests cannot: the client says
// only "context deadline exceeded" when no connection can be made, e.g.
// once etcd refuses a certificate a reload put in place.
type etcdCheck struct {
	cli *clientv3.Client
	cfg *configs.Config
	log *slog.Logger

	soon chan struct{} // a check asked for now (CheckSoon)

	mu    sync.Mutex
	state apitype.EtcdState
}

// newEtcdCheck starts reachable: connectEtcd just read etcd.
func newEtcdCheck(cli *clientv3.Client, cfg *configs.Config, log *slog.Logger) *etcdCheck {
	now := time.Now()
	return &etcdCheck{cli: cli, cfg: cfg, log: log, soon: make(chan struct{}, 1), state: apitype.EtcdState{Reachable: true, Since: now, CheckedAt: now}}
}

// State returns what the last check found.
func (c *etcdCheck) State() apitype.EtcdState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// CheckSoon has Run check now, not at the next period (after a reload
// of the etcd TLS material).
func (c *etcdCheck) CheckSoon() {
	select {
	case c.soon <- struct{}{}:
	default:
	}
}

// Run checks every lease TTL, and when asked (CheckSoon), until ctx ends.
func (c *etcdCheck) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.Etcd.LeaseTTL)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-c.soon:
		}
		c.check(ctx)
	}
}

// TryMaterial connects to every member with the etcd TLS material held
// now, at the TCP and TLS level (probeEtcd), and logs a warning naming the
// member and why when it fails: reloaded files that the members will
// refuse, or that do not verify them, are said at once.
func (c *etcdCheck) TryMaterial(ctx context.Context) {
	// The endpoints the client uses now: the configured ones may be
	// members since replaced (etcdSync).
	if err := probeEtcd(c.cfg.Etcd, endpointsNow(c.cli, c.cfg.Etcd)); err != nil && ctx.Err() == nil {
		c.log.WarnContext(ctx, "the reloaded etcd TLS files do not work with a member: the open connections go on, the next connection to it will fail", slog.Any("err", err))
		return
	}
	c.log.InfoContext(ctx, "the reloaded etcd TLS files work with every member")
}

// endpointsNow returns the endpoints the client uses now (the configured
// ones, or the members' since etcdSync followed them), written as the
// configured ones are: https://host:port with etcd.tls, not as
// dialledByUs gives them to the client.
func endpointsNow(cli *clientv3.Client, e configs.Etcd) []string {
	eps := cli.Endpoints()
	if e.TLS == nil {
		return eps
	}
	for i, ep := range eps {
		switch {
		case strings.HasPrefix(ep, "unix://"):
			eps[i] = "unixs://" + strings.TrimPrefix(ep, "unix://")
		case !strings.Contains(ep, "://"):
			eps[i] = "https://" + ep
		}
	}
	return eps
}

// check reads the prefix (linearizable, count only), bounded by the dial
// timeout, and records the outcome.
func (c *etcdCheck) check(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Etcd.DialTimeout)
	_, err := c.cli.Get(rctx, c.cfg.Etcd.Prefix, clientv3.WithCountOnly())
	cancel()
	if ctx.Err() != nil {
		return // stopping: not etcd's fault
	}
	if err != nil {
		_, user, _ := c.cfg.Etcd.ClientEndpoints()
		err = explainEtcd(ctx, c.cfg, endpointsNow(c.cli, c.cfg.Etcd), user, err)
	}
	c.record(ctx, err, time.Now())
}

// record keeps the outcome of a check and logs a change: reachable again,
// or not reachable (again with another cause).
func (c *etcdCheck) record(ctx context.Context, err error, now time.Time) {
	c.mu.Lock()
	prev := c.state
	next := apitype.EtcdState{Reachable: err == nil, Since: prev.Since, CheckedAt: now}
	if err != nil {
		next.Error = err.Error()
	}
	if next.Reachable != prev.Reachable {
		next.Since = now
	}
	c.state = next
	c.mu.Unlock()
	switch {
	case err == nil && !prev.Reachable:
		c.log.InfoContext(ctx, "this node uses etcd again", "after", now.Sub(prev.Since).Round(time.Millisecond))
	case err != nil && (prev.Reachable || next.Error != prev.Error):
		c.log.ErrorContext(ctx, "this node cannot use etcd: it cannot become or stay master until it can",
			"since", next.Since.Format(time.RFC3339), slog.Any("err", err))
	}
}
