package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/testca"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
)

// TestRunDaemon: the daemon's wiring, in process, from a configuration
// file: it registers, takes office alone, becomes Ready and answers its
// API, to the operators of its tokens file (reads behind tokens); an
// operator's pause is recorded under their name; cancelling its context
// stops it cleanly (nil error, record gone).
func TestRunDaemon(t *testing.T) {
	dir := t.TempDir()
	hash := func(token string) string {
		sum := sha256.Sum256([]byte(token))
		return hex.EncodeToString(sum[:])
	}
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("- {name: alice, sha256: "+hash("alice-token")+", role: operate}\n"+
		"- {name: reader, sha256: "+hash("reader-token")+", role: read}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "alice.token")
	if err := os.WriteFile(tokenFile, []byte("alice-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := daemonConfig(t, "wired", pg.NewDatabase(t), "tokens_file: "+tokens, "auth_reads: true")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var out logBuffer
	log, level, err := newLogger("json", "info", &out)
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- runDaemon(ctx, cfg, log, level) }()

	node, store := waitReadyMaster(t, cfg, done)
	// systemctl reload: a SIGHUP to the process is a reload, not its end.
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the daemon reloads on SIGHUP", func() (bool, error) {
		return len(out.records("configuration reloaded")) == 1, nil
	})
	var se *api.StatusError
	if _, err := api.NewClient(node.APIAddress, "").Leader(ctx); !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
		t.Fatalf("/v1/leader without a token, reads behind tokens: %v, want 401", err)
	}
	cl := api.NewClient(node.APIAddress, "reader-token")
	if l, err := cl.Leader(ctx); err != nil || l.Name != "wired" {
		t.Fatalf("/v1/leader: %+v %v", l, err)
	}
	testkit.Eventually(t, 10*time.Second, "a periodic check pass", func() (bool, error) {
		l, err := cl.Leader(ctx)
		return err == nil && !l.Passes.LastSuccess.IsZero(), err
	})

	t.Setenv("ENGINEHEALTH_TOKEN", "no-such-token")
	if _, errOut, code := runCLI(t, "pause", "--reason", "x", "--api", node.APIAddress); code != exitFailure || !strings.Contains(errOut, "401") {
		t.Fatalf("pause with a token no operator has: exit %d: %s", code, errOut)
	}
	t.Setenv("ENGINEHEALTH_TOKEN", "reader-token")
	if _, errOut, code := runCLI(t, "pause", "--reason", "x", "--api", node.APIAddress); code != exitFailure || !strings.Contains(errOut, "needs role operate") {
		t.Fatalf("pause with a read token: exit %d: %s", code, errOut)
	}
	if out, errOut, code := runCLI(t, "pause", "--reason", "disk swap", "--api", node.APIAddress, "--token-file", tokenFile); code != exitOK {
		t.Fatalf("pause: exit %d: %s%s", code, out, errOut)
	}
	es, err := cl.Events(ctx, audit.ListParams{Kind: audit.KindPaused})
	if err != nil || len(es) != 1 || es[0].Actor != "alice (operator)" || es[0].Via == nil || *es[0].Via != "wired" {
		t.Fatalf("pause events %+v %v, want one by alice (operator) via wired", es, err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("runDaemon after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("runDaemon did not stop within 10s of its context's end")
	}
	if _, err := store.Get(context.Background(), "wired"); !errors.Is(err, nodes.ErrNotFound) {
		t.Fatalf("record after a clean stop: %v", err)
	}
}

// daemonConfig loads a configuration for a one-node daemon named name on
// dsn and the package's etcd, under a prefix of the test's own, with
// short periods.
func daemonConfig(t *testing.T, name, dsn string, apiKeys ...string) *configs.Config {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dsn"), []byte(dsn), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "enginehealth.yaml")
	if err := os.WriteFile(path, []byte(`node:
  name: `+name+`
  heartbeat_interval: 200ms
  shutdown_timeout: 5s
database:
  dsn_file: dsn
etcd:
  endpoints: ["`+etcd.Endpoint+`"]
  prefix: /`+strings.ReplaceAll(t.Name(), "/", "-")+`/
  lease_ttl: 3s
health:
  schedule: "@every 1s"
  not_responding_after: 1s
api:
  listen: 127.0.0.1:0
`+indent(apiKeys)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := configs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func indent(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

// waitReadyMaster waits until the daemon of cfg, running until it sends
// on done, is Ready and master, and returns its record and a store of the
// database it uses.
// startDaemon runs cfg's daemon in-process until ctx ends, its log as
// JSON in out; done receives what runDaemon returned.
func startDaemon(ctx context.Context, t *testing.T, cfg *configs.Config) (out *logBuffer, done <-chan error) {
	t.Helper()
	out = new(logBuffer)
	log, level, err := newLogger("json", "info", out)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan error, 1)
	go func() { ch <- runDaemon(ctx, cfg, log, level) }()
	return out, ch
}

func waitReadyMaster(t *testing.T, cfg *configs.Config, done <-chan error) (nodes.Node, *nodes.Store) {
	t.Helper()
	db, err := pgdb.Open(pgdb.Config{DSN: cfg.Database.DSN})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store := testkit.Must(nodes.NewStore(nodes.StoreConfig{DB: db, Schema: cfg.Database.Schema, Events: audit.New(cfg.Database.Schema)}))
	var node nodes.Node
	testkit.Eventually(t, 30*time.Second, "the node Ready and master", func() (bool, error) {
		select {
		case err := <-done:
			t.Fatalf("runDaemon returned: %v", err)
		default:
		}
		node, err = store.Get(context.Background(), cfg.Node.Name)
		return err == nil && node.Status == nodes.StatusReady && node.IsMaster, err
	})
	return node, store
}

// TestRunRefusesBadConfig: a configuration error stops run (and config
// check) with exit 2, naming the key, its line and what is wrong, before
// it connects to anything: the database and etcd addresses it was given
// see no connection. Cases: a health.sweep_interval shorter than the
// schedule's period; an etcd CA file that is missing; an etcd client
// certificate given without its key.
func TestRunRefusesBadConfig(t *testing.T) {
	var mu sync.Mutex
	dialled := 0
	listen := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				dialled++
				mu.Unlock()
				c.Close()
			}
		}()
		return l.Addr().String()
	}
	db, etcdAddr := listen(), listen()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dsn"), []byte("postgres://eh@"+db+"/eh?sslmode=disable"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "client.pem"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	head := "database:\n  dsn_file: dsn\netcd:\n  endpoints: [\"" + etcdAddr + "\"]\n"
	for _, c := range []struct {
		name, yaml string
		want       []string
	}{
		{"sweep interval", head + "health:\n  schedule: \"@every 1m\"\n  sweep_interval: 30s\n",
			[]string{"health.sweep_interval", "line 7", "shorter than one period of health.schedule (1m0s)"}},
		{"etcd CA file missing", head + "  tls:\n    ca_file: nope/ca.pem\n",
			[]string{"etcd.tls.ca_file: cannot read " + filepath.Join(dir, "nope/ca.pem") + ": no such file or directory (line 6)"}},
		{"etcd certificate without key", head + "  tls:\n    cert_file: client.pem\n",
			[]string{"etcd.tls.key_file: required with etcd.tls.cert_file: the key of " + filepath.Join(dir, "client.pem")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "enginehealth.yaml")
			if err := os.WriteFile(path, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range [][]string{{"run"}, {"config", "check"}} {
				out, errOut, code := runCLI(t, append(cmd, "--config", path)...)
				if code != exitUsage || !containsAll(errOut, c.want) {
					t.Fatalf("%s: exit %d, want %d naming %q:\n%s%s", cmd[0], code, exitUsage, c.want, out, errOut)
				}
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if dialled > 0 {
		t.Fatalf("%d connections to the database or etcd before the configuration was refused", dialled)
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// TestConfigCheckSaysEtcdAccess: config check prints how the daemon will
// reach etcd: TLS, what verifies the members, the client certificate
// and its expiry, the user; never the password.
func TestConfigCheckSaysEtcdAccess(t *testing.T) {
	dir := t.TempDir()
	ca, err := testca.New(dir, "etcd-ca")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue("sidecar", testca.Options{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"dsn": "postgres://eh@127.0.0.1:1/eh", "etcd-password": "pw-Zq81xv"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "enginehealth.yaml")
	if err := os.WriteFile(path, []byte(`database: {dsn_file: dsn}
etcd:
  endpoints: ["a:2379", "b:2379", "c:2379"]
  tls: {ca_file: `+ca.CertFile+`, cert_file: `+cert.CertFile+`, key_file: `+cert.KeyFile+`, server_name: etcd.internal}
  username: enginehealth
  password_file: etcd-password
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "config", "check", "--config", path)
	want := fmt.Sprintf(`etcd auth  TLS, members verified by %s as etcd.internal, client certificate %s (CN "sidecar", valid until %s); user "enginehealth"`,
		ca.CertFile, cert.CertFile, cert.Cert.NotAfter.UTC().Format(time.RFC3339))
	if code != exitOK || !strings.Contains(out, want) || strings.Contains(out+errOut, "Zq81") || strings.Contains(out, "warning") {
		t.Fatalf("exit %d, want the line %q, no warning:\n%s%s", code, want, out, errOut)
	}
}

// TestUnackedAgainLeavesTheElection: a running master whose record goes
// back to Unexpected shutdown (its operator's ack lost with the database
// in an asynchronous failover) leaves the office and the election, and
// is a candidate again once acknowledged (outside review F2).
func TestUnackedAgainLeavesTheElection(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := daemonConfig(t, "unacked", pg.NewDatabase(t))
	out, done := startDaemon(ctx, t, cfg)
	_, store := waitReadyMaster(t, cfg, done)
	db := sqlx.MustOpen("postgres", cfg.Database.DSN)
	defer db.Close()
	db.MustExec(`UPDATE enginehealth.nodes SET status = $1 WHERE name = 'unacked'`, nodes.StatusUnexpectedShutdown)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	testkit.Eventually(t, 20*time.Second, "out of the election", func() (bool, error) {
		resp, err := cli.Get(ctx, leader.ElectionPrefix(cfg.Etcd.Prefix), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return false, err
		}
		n, err := store.Get(ctx, "unacked")
		return resp.Count == 0 && err == nil && !n.IsMaster, fmt.Errorf("%d election keys, node %+v (%v)", resp.Count, n, err)
	})
	if len(out.records("leaving the election until an operator acknowledges it")) != 1 {
		t.Fatalf("no warning that the node leaves the election:\n%s", out.String())
	}
	if _, err := store.Ack(ctx, "unacked", audit.By{Actor: "op"}, "checked"); err != nil {
		t.Fatal(err)
	}
	waitReadyMaster(t, cfg, done)
}
