package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/leasefile"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
)

// TestDaemonStartsAndStops: a daemon built in process (newDaemon) from a
// configuration, on the package's PostgreSQL and etcd, is started up
// when newDaemon returns (its record written, its address bound); under
// Run it becomes Ready (/readyz) and master; when its context ends it
// stops in shutdown's order: Run returns nil; the master left office
// before the record went (master_lost before node_deregistered, the
// node's last event) and the record is gone; the election holds no key
// (the lease revoked); the log ends "shutting down", then "stopped"; the
// API's address refuses connections and the pools and the etcd client
// are closed (the package's goleak check finds nothing of it left).
// While it runs, its state directory holds the lease file: the lease of
// its election key, this process by pid and start time (release-lease
// refuses it: the daemon runs); the clean stop removes it.
func TestDaemonStartsAndStops(t *testing.T) {
	cfg := daemonConfig(t, "inproc", pg.NewDatabase(t))
	cfg.Node.StateDirectory = t.TempDir()
	db, err := pgdb.Open(pgdb.Config{DSN: cfg.Database.DSN})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := testkit.Must(nodes.NewStore(nodes.StoreConfig{DB: db, Schema: cfg.Database.Schema, Events: audit.New(cfg.Database.Schema)}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log, out := jsonLog(t)
	d, err := newDaemon(ctx, cfg, log, nil)
	if err != nil {
		t.Fatalf("newDaemon: %v", err)
	}
	if n, err := store.Get(ctx, "inproc"); err != nil || n.Incarnation != d.incarnation || n.Status != nodes.StatusRecovering {
		t.Fatalf("record once built: %+v %v, want this incarnation's, Recovering", n, err)
	}
	addr := d.ln.Addr().String()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	testkit.Eventually(t, 30*time.Second, "/readyz answers 200", func() (bool, error) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, errors.New(resp.Status)
	})
	waitReadyMaster(t, cfg, done)
	checkLeaseFile(t, cfg)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop within 10s of its context's end")
	}

	if _, err := store.Get(context.Background(), "inproc"); !errors.Is(err, nodes.ErrNotFound) {
		t.Fatalf("record after a clean stop: %v, want none", err)
	}
	var kinds []audit.Kind
	if err := db.Select(&kinds, `SELECT kind FROM enginehealth.events WHERE node = 'inproc' ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	lost := slices.Index(kinds, audit.KindMasterLost)
	if lost < 0 || kinds[len(kinds)-1] != audit.KindNodeDeregistered || slices.Index(kinds, audit.KindNodeDeregistered) < lost {
		t.Fatalf("the node's events %v: want %s, then %s last", kinds, audit.KindMasterLost, audit.KindNodeDeregistered)
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(context.Background(), leader.ElectionPrefix(cfg.Etcd.Prefix), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("election keys after the stop: %v %v, want none (the lease revoked)", resp, err)
	}

	if _, err := os.Stat(leasefile.Path(cfg.Node.StateDirectory)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the lease file after a clean stop: %v, want it removed", err)
	}

	var msgs []string
	for line := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
		var rec struct{ Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		msgs = append(msgs, rec.Msg)
	}
	if i := slices.Index(msgs, "shutting down"); i < 0 || msgs[len(msgs)-1] != "stopped" {
		t.Fatalf("log %q: want shutting down, then stopped last", msgs)
	}

	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = c.Close()
		t.Fatalf("the API's address %s still takes connections after the stop", addr)
	}
	for name, ping := range map[string]func() error{"pool": d.db.Ping, "API pool": d.apiDB.Ping} {
		if err := ping(); err == nil || !strings.Contains(err.Error(), "database is closed") {
			t.Errorf("%s after the stop: %v, want closed", name, err)
		}
	}
	if d.etcd.Ctx().Err() == nil {
		t.Error("the etcd client is still open after the stop")
	}
}

// checkLeaseFile checks the lease file of cfg's daemon, running in this
// process and master: its lease holds the node's election key, it names
// this process, and release-lease refuses to release it.
func checkLeaseFile(t *testing.T, cfg *configs.Config) {
	t.Helper()
	rec, err := leasefile.Read(cfg.Node.StateDirectory)
	if err != nil {
		t.Fatalf("the lease file of a running master: %v", err)
	}
	self, err := leasefile.Self()
	if err != nil {
		t.Fatal(err)
	}
	if rec.Process != self || rec.Node != cfg.Node.Name || rec.Prefix != cfg.Etcd.Prefix || len(rec.Endpoints) == 0 {
		t.Fatalf("lease file %+v: want this process (%+v), node %s, prefix %s, endpoints", rec, self, cfg.Node.Name, cfg.Etcd.Prefix)
	}
	cli := etcdClient(t)
	resp, err := cli.Get(context.Background(), leader.ElectionPrefix(cfg.Etcd.Prefix)+rec.Lease.String())
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease != int64(rec.Lease) {
		t.Fatalf("the election key of lease %s: %v %v", rec.Lease, resp, err)
	}
	path := filepath.Join(t.TempDir(), "enginehealth.yaml")
	if err := os.WriteFile(path, []byte("node: {name: "+cfg.Node.Name+", state_dir: "+cfg.Node.StateDirectory+"}\ndatabase: {dsn_env: EH_TEST_NO_DSN}\n"+
		"etcd: {endpoints: [\""+etcd.Endpoint+"\"], prefix: "+cfg.Etcd.Prefix+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, "release-lease", "--config", path); code != exitRefused || !strings.Contains(errOut, "still running") {
		t.Fatalf("release-lease beside the running daemon: exit %d, %s; want it refused", code, errOut)
	}
	if ttl := leaseTTLOf(t, cli, rec.Lease); ttl <= 0 {
		t.Fatalf("the daemon's lease after a refused release-lease: TTL %d", ttl)
	}
}

// TestDaemonStartCutShort: a daemon told to stop while it waits for its
// database returns errStoppedEarly (runDaemon's clean exit) and leaves
// nothing open: the API's address it had bound is free again.
func TestDaemonStartCutShort(t *testing.T) {
	cfg := daemonConfig(t, "cut", "postgres://eh@"+testkit.SilentServer(t)+"/eh?sslmode=disable")
	// A port of its own, to bind again once the daemon is gone.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.API.Listen = ln.Addr().String()
	// A ping of the silent server ends at its connect timeout, not at
	// once: a short one keeps the test short.
	cfg.Database.ConnectTimeout = time.Second
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log, out := jsonLog(t)
	type result struct {
		d   *daemon
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := newDaemon(ctx, cfg, log, nil)
		done <- result{d, err}
	}()
	// Connected to etcd, it waits for PostgreSQL, which never answers.
	testkit.Eventually(t, 30*time.Second, "connected to etcd", func() (bool, error) {
		return len(out.records("connected to etcd")) > 0, nil
	})
	cancel()
	select {
	case r := <-done:
		if r.d != nil || !errors.Is(r.err, errStoppedEarly) {
			t.Fatalf("newDaemon cut short: %v, %v; want no daemon and errStoppedEarly", r.d, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("newDaemon did not return within 10s of its context's end")
	}
	again, err := net.Listen("tcp", cfg.API.Listen)
	if err != nil {
		t.Fatalf("the API's address after a start cut short: %v, want it free", err)
	}
	_ = again.Close()
}

// jsonLog returns a logger writing JSON at info into the buffer returned.
func jsonLog(t *testing.T) (*slog.Logger, *logBuffer) {
	t.Helper()
	out := new(logBuffer)
	log, _, err := newLogger("json", "info", out)
	if err != nil {
		t.Fatal(err)
	}
	return log, out
}
