package main

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/enginehealth/enginehealth/internal/infra/leasefile"
)

// releaseConfig writes a configuration for release-lease on the tests'
// etcd (or endpoint), its state directory stateDir ("" for none), and
// returns its path. Its database secret is an environment variable no
// one sets: release-lease needs only etcd's.
func releaseConfig(t *testing.T, endpoint, stateDir string) string {
	t.Helper()
	node := "node:\n  name: node-a\n"
	if stateDir != "" {
		node += "  state_dir: " + stateDir + "\n"
	}
	path := filepath.Join(t.TempDir(), "enginehealth.yaml")
	if err := os.WriteFile(path, []byte(node+`database:
  dsn_env: EH_TEST_RELEASE_NO_SUCH_DSN
etcd:
  endpoints: ["`+endpoint+`"]
  prefix: /`+strings.ReplaceAll(t.Name(), "/", "-")+`/
  lease_ttl: 3s
log:
  format: json
  level: info
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// noStateDirectory clears $STATE_DIRECTORY for the test (a test run under
// systemd would have it).
func noStateDirectory(t *testing.T) {
	t.Helper()
	t.Setenv("STATE_DIRECTORY", "")
	if err := os.Unsetenv("STATE_DIRECTORY"); err != nil { // t.Setenv restores it
		t.Fatal(err)
	}
}

func etcdClient(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// leaseTTL returns the lease's remaining TTL in seconds (-1: gone).
func leaseTTLOf(t *testing.T, cli *clientv3.Client, id leasefile.LeaseID) int64 {
	t.Helper()
	resp, err := cli.TimeToLive(context.Background(), clientv3.LeaseID(id))
	if err != nil {
		t.Fatal(err)
	}
	return resp.TTL
}

// TestReleaseLease: release-lease on a real etcd, as systemd runs it
// (ExecStopPost=) and as a person might by hand.
//
//   - no state directory: it says there is nothing to release, exit 0;
//     no state file: it does nothing and says nothing, exit 0;
//   - a lease recorded by a process still running (this test's own, by
//     pid and start time): refused, exit 4, saying why; the lease and the
//     file are left as they were;
//   - the same pid with another start time (a later process given the
//     recorder's pid, as after a crash and a restart): the recorder is
//     gone, the lease is revoked (its key with it), the file removed,
//     one line logged;
//   - the same file again (a lease gone already, a file left by an
//     earlier run): exit 0, nothing logged at info, the file removed;
//   - a corrupt file: exit 1 naming the file and why, the file kept;
//   - etcd unreachable: exit 1 within the timeout (and a little), saying
//     that the lease expires after its TTL; the file kept;
//   - --timeout 0: a usage error.
func TestReleaseLease(t *testing.T) {
	noStateDirectory(t)
	out, errOut, code := runCLI(t, "release-lease", "--config", releaseConfig(t, etcd.Endpoint, ""))
	if code != 0 || !strings.Contains(out, "nothing to release: no state directory") || errOut != "" {
		t.Fatalf("no state directory: exit %d, %q %q", code, out, errOut)
	}
	dir := t.TempDir()
	cfg := releaseConfig(t, etcd.Endpoint, dir)
	if out, errOut, code := runCLI(t, "release-lease", "--config", cfg); code != 0 || out != "" || errOut != "" {
		t.Fatalf("no state file: exit %d, %q %q; want 0 and silence", code, out, errOut)
	}

	cli := etcdClient(t)
	ctx := context.Background()
	grant, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	key := "/" + t.Name() + "/leader/" + leasefile.LeaseID(grant.ID).String()
	if _, err := cli.Put(ctx, key, `{"name":"node-a","incarnation":"inc-1","trust_window_ms":2000}`, clientv3.WithLease(grant.ID)); err != nil {
		t.Fatal(err)
	}
	self, err := leasefile.Self()
	if err != nil {
		t.Fatal(err)
	}
	rec := leasefile.Record{Lease: leasefile.LeaseID(grant.ID), Prefix: "/" + t.Name() + "/", Endpoints: []string{etcd.Endpoint},
		Node: "node-a", Incarnation: "inc-1", Process: self, WrittenAt: time.Now()}
	if err := leasefile.Write(dir, rec); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = runCLI(t, "release-lease", "--config", cfg)
	if code != exitRefused || !strings.Contains(errOut, "still running") || !strings.Contains(errOut, rec.Lease.String()) {
		t.Fatalf("the recorder alive: exit %d, %q; want 4, saying it still runs", code, errOut)
	}
	if ttl := leaseTTLOf(t, cli, rec.Lease); ttl <= 0 {
		t.Fatalf("the lease after a refusal: TTL %d, want it alive", ttl)
	}
	if _, err := leasefile.Read(dir); err != nil {
		t.Fatalf("the state file after a refusal: %v", err)
	}

	rec.Process.StartTime++ // this pid, another process: the recorder is gone

	// What a file says is not believed: a record of another node, of
	// another incarnation than the lease's election key names, or a lease
	// holding keys outside the cluster's prefix (another's lease) is
	// refused, the lease left alive.
	other, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/otherapp/lock", "x", clientv3.WithLease(other.ID)); err != nil {
		t.Fatal(err)
	}
	for name, forged := range map[string]leasefile.Record{
		"another node's file":       {Lease: rec.Lease, Prefix: rec.Prefix, Node: "node-b", Incarnation: "inc-1", Process: rec.Process, WrittenAt: rec.WrittenAt},
		"another prefix":            {Lease: rec.Lease, Prefix: "/victim/", Node: "node-a", Incarnation: "inc-1", Process: rec.Process, WrittenAt: rec.WrittenAt},
		"another incarnation's key": {Lease: rec.Lease, Prefix: rec.Prefix, Node: "node-a", Incarnation: "inc-0", Process: rec.Process, WrittenAt: rec.WrittenAt},
		"another application's key": {Lease: leasefile.LeaseID(other.ID), Prefix: rec.Prefix, Node: "node-a", Incarnation: "inc-1", Process: rec.Process, WrittenAt: rec.WrittenAt},
	} {
		if err := leasefile.Write(dir, forged); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := runCLI(t, "release-lease", "--config", cfg)
		if code != exitRefused || leaseTTLOf(t, cli, rec.Lease) <= 0 || leaseTTLOf(t, cli, leasefile.LeaseID(other.ID)) <= 0 {
			t.Fatalf("%s: exit %d, %q; want 4 and the leases alive", name, code, errOut)
		}
	}
	if err := leasefile.Write(dir, rec); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runCLI(t, "release-lease", "--config", cfg)
	if code != 0 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, `"msg":"released the etcd lease of a daemon whose process is gone`) ||
		!strings.Contains(errOut, `"lease":"`+rec.Lease.String()+`"`) {
		t.Fatalf("the recorder gone: exit %d, %q %q; want 0 and one line saying the lease was released", code, out, errOut)
	}
	if ttl := leaseTTLOf(t, cli, rec.Lease); ttl != -1 {
		t.Fatalf("the lease after release-lease: TTL %d, want it gone", ttl)
	}
	if resp, err := cli.Get(ctx, key); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the election key after release-lease: %v %v, want it gone with the lease", resp, err)
	}
	if _, err := os.Stat(leasefile.Path(dir)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the state file after release-lease: %v, want it removed", err)
	}
	if out, errOut, code := runCLI(t, "release-lease", "--config", cfg); code != 0 || out != "" || errOut != "" {
		t.Fatalf("run again: exit %d, %q %q; want 0 and silence", code, out, errOut)
	}

	// A file an earlier run left, its lease gone long ago.
	if err := leasefile.Write(dir, rec); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runCLI(t, "release-lease", "--config", cfg); code != 0 || out != "" || errOut != "" {
		t.Fatalf("a lease gone already: exit %d, %q %q; want 0 and silence", code, out, errOut)
	}
	if _, err := os.Stat(leasefile.Path(dir)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the state file of a lease gone already: %v, want it removed", err)
	}

	if err := os.WriteFile(leasefile.Path(dir), []byte(`{"version":1,"lease":`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = runCLI(t, "release-lease", "--config", cfg)
	if code != exitFailure || !strings.Contains(errOut, "state file "+leasefile.Path(dir)) || !strings.Contains(errOut, "not a lease record") {
		t.Fatalf("a corrupt state file: exit %d, %q; want 1 naming the file", code, errOut)
	}
	if _, err := os.Stat(leasefile.Path(dir)); err != nil {
		t.Fatalf("a corrupt state file was not kept: %v", err)
	}

	// etcd unreachable: a port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	grant, err = cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	rec.Lease, rec.Endpoints = leasefile.LeaseID(grant.ID), []string{closed}
	if err := leasefile.Write(dir, rec); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, errOut, code = runCLI(t, "release-lease", "--config", releaseConfig(t, closed, dir), "--timeout", "1s")
	if took := time.Since(start); code != exitFailure || !strings.Contains(errOut, "expires after its TTL") || took > 3*time.Second {
		t.Fatalf("etcd unreachable: exit %d after %s, %q; want 1 within the timeout, saying the lease expires", code, took, errOut)
	}
	if _, err := leasefile.Read(dir); err != nil {
		t.Fatalf("the state file after a failed release: %v, want it kept", err)
	}
	if ttl := leaseTTLOf(t, cli, rec.Lease); ttl <= 0 {
		t.Fatalf("the lease after a failed release: TTL %d", ttl)
	}

	if _, errOut, code := runCLI(t, "release-lease", "--config", cfg, "--timeout", "0s"); code != exitUsage || !strings.Contains(errOut, "--timeout") {
		t.Fatalf("--timeout 0: exit %d, %q; want 2", code, errOut)
	}
}

// TestReleaseLeaseWithoutCredentials: systemd gives ExecStopPost= no
// credentials: an etcd password named credential:NAME cannot be read
// there, and release-lease says why (exit 2) when a lease file is left,
// and nothing when none is; the DSN as a credential does not matter to it.
func TestReleaseLeaseWithoutCredentials(t *testing.T) {
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	if err := os.Unsetenv("CREDENTIALS_DIRECTORY"); err != nil { // t.Setenv restores it
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(t.TempDir(), "enginehealth.yaml")
	write := func(etcdLines string) {
		t.Helper()
		if err := os.WriteFile(path, []byte("node: {state_dir: "+dir+"}\ndatabase: {dsn_file: \"credential:dsn\"}\netcd:\n  endpoints: [\""+etcd.Endpoint+"\"]\n"+etcdLines), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("  username: sidecar\n  password_file: \"credential:etcd-password\"\n")
	// Nothing to release (a clean stop removed the file): silent.
	if out, errOut, code := runCLI(t, "release-lease", "--config", path); code != exitOK || out != "" || errOut != "" {
		t.Fatalf("an etcd password as a credential, no state file: exit %d, %q %q; want 0 and silence", code, out, errOut)
	}
	if err := leasefile.Write(dir, leasefile.Record{Lease: 1, Node: "n", Prefix: "/p/", Incarnation: "i"}); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, "release-lease", "--config", path)
	if code != exitUsage || !strings.Contains(errOut, "etcd.password_file") || !strings.Contains(errOut, "systemd gives ExecStopPost= no credentials") {
		t.Fatalf("an etcd password as a credential: exit %d, %q; want 2 saying why", code, errOut)
	}
	if err := leasefile.Remove(dir); err != nil {
		t.Fatal(err)
	}
	write("")
	if out, errOut, code := runCLI(t, "release-lease", "--config", path); code != exitOK || out != "" || errOut != "" {
		t.Fatalf("the DSN as a credential, no state file: exit %d, %q %q; want 0 and silence", code, out, errOut)
	}
}

// TestConfigCheckStateDirectory: config check says where the lease file
// is kept: node.state_dir, else $STATE_DIRECTORY, else none.
func TestConfigCheckStateDirectory(t *testing.T) {
	noStateDirectory(t)
	t.Setenv("EH_TEST_STATE_DSN", "postgres://eh@db.example/eh")
	path := filepath.Join(t.TempDir(), "enginehealth.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body+"database: {dsn_env: EH_TEST_STATE_DSN}\netcd: {endpoints: [\"127.0.0.1:1\", \"127.0.0.2:1\"]}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, body, env, want string
	}{
		{"neither", "", "", "state      none here"},
		{"systemd", "", "/var/lib/enginehealth", "state      /var/lib/enginehealth (the etcd lease"},
		{"the key", "node: {state_dir: /srv/eh}\n", "/var/lib/enginehealth", "state      /srv/eh (the etcd lease"},
	} {
		if c.env != "" {
			t.Setenv("STATE_DIRECTORY", c.env)
		}
		write(c.body)
		if out, errOut, code := runCLI(t, "config", "check", "--config", path); code != exitOK || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d, want %q in:\n%s%s", c.name, code, c.want, out, errOut)
		}
	}
}
