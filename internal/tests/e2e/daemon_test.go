package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/testkit/faultproxy"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
	"github.com/enginehealth/enginehealth/nodes"
)

func TestDaemonServesRegistryAndStopsCleanly(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	d := c.start("node-a", c.config("node-a", ""))
	n := c.waitRegistered(d, 30*time.Second)
	if (n.Status != nodes.StatusRecovering && n.Status != nodes.StatusReady) || n.APIAddress == "" || strings.HasSuffix(n.APIAddress, ":0") {
		t.Fatalf("record: %+v", n)
	}

	// The API shows the registry.
	cl := api.NewClient(n.APIAddress, "")
	ctx := context.Background()
	ns, err := cl.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 1 || ns[0].Name != "node-a" || ns[0].Incarnation != n.Incarnation {
		t.Fatalf("GET /v1/nodes: %+v", ns)
	}
	if _, err := cl.Node(ctx, "nope"); err == nil {
		t.Fatal("GET /v1/nodes/nope succeeded")
	} else if se := (*api.StatusError)(nil); !errors.As(err, &se) || se.Code != 404 {
		t.Fatalf("GET /v1/nodes/nope: %v, want 404", err)
	}
	eventually(t, 10*time.Second, "healthz 200", func() (bool, error) {
		h, err := cl.Health(ctx)
		return err == nil && h.Status == "ok", err
	})

	// The heartbeat moves last_active on.
	eventually(t, 10*time.Second, "last_active advances", func() (bool, error) {
		m, err := c.node("node-a")
		return err == nil && m.LastActive.After(n.LastActive), err
	})

	// The CLI reads the same, as JSON and as a table.
	out, errOut, code := cli(t, nil, "nodes", "-o", "json", "--api", n.APIAddress)
	if code != 0 {
		t.Fatalf("nodes -o json: exit %d: %s", code, errOut)
	}
	var got []apitype.Node
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 || got[0].Name != "node-a" {
		t.Fatalf("nodes -o json: %v\n%s", err, out)
	}
	out, _, code = cli(t, []string{"ENGINEHEALTH_API=" + n.APIAddress}, "nodes")
	if code != 0 || !strings.Contains(out, "node-a") || !strings.Contains(out, "STATUS") {
		t.Fatalf("nodes table (exit %d):\n%s", code, out)
	}

	// SIGTERM: exit 0, record gone, event written.
	d.signal(t, syscall.SIGTERM)
	if code := d.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM:\n%s", code, d.stderr.String())
	}
	if _, err := c.node("node-a"); !errors.Is(err, nodes.ErrNotFound) {
		t.Fatalf("record still there after clean shutdown: %v", err)
	}
	es, err := audit.New("enginehealth").List(ctx, c.db, audit.ListParams{Node: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	if last := es[len(es)-1]; last.Kind != audit.KindNodeDeregistered {
		t.Fatalf("last event %+v, want %s", last, audit.KindNodeDeregistered)
	}
	if strings.Contains(d.stderr.String(), "postgres://postgres@") && strings.Contains(c.dsn, "password") {
		t.Fatal("the DSN was logged")
	}

	// With no daemon, the CLI says so and exits 3.
	_, errOut, code = cli(t, nil, "nodes", "--api", n.APIAddress)
	if code != 3 || !strings.Contains(errOut, "no enginehealth daemon answered") {
		t.Fatalf("nodes without a daemon: exit %d: %s", code, errOut)
	}
}

func TestDaemonRestartAfterCrashIsUnexpectedShutdown(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	cfg := c.config("node-a", "")
	d := c.start("node-a", cfg)
	first := c.waitRegistered(d, 30*time.Second)
	d.signal(t, syscall.SIGKILL)
	d.wait(t, 10*time.Second)

	d2 := c.start("node-a", cfg)
	var n nodes.Node
	eventually(t, 30*time.Second, "re-registered", func() (bool, error) {
		var err error
		n, err = c.node("node-a")
		return err == nil && n.Incarnation != first.Incarnation, err
	})
	if n.Status != nodes.StatusUnexpectedShutdown || n.PreviousIncarnation == nil || *n.PreviousIncarnation != first.Incarnation {
		t.Fatalf("after a crash: %+v", n)
	}
	eventually(t, 10*time.Second, "warning logged", func() (bool, error) {
		return strings.Contains(d2.stderr.String(), "did not shut down cleanly"), nil
	})
	d2.signal(t, syscall.SIGTERM)
	if code := d2.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestDaemonWaitsForPostgres(t *testing.T) {
	t.Parallel()
	srv := pgtest.New(t)
	dsn := srv.NewDatabase(t)
	srv.Stop()

	c := &cluster{t: t, dsn: dsn, dir: t.TempDir()}
	d := c.start("node-a", c.config("node-a", ""))
	// It retries, logging each failure, and does not exit.
	eventually(t, 30*time.Second, "two failed connection attempts logged", func() (bool, error) {
		if !d.running() {
			t.Fatalf("daemon exited while PostgreSQL was down: %v\n%s", d.err, d.stderr.String())
		}
		return strings.Count(d.stderr.String(), "connect to PostgreSQL failed, retrying") >= 2, nil
	})
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	c2 := newClusterOn(t, dsn)
	c2.waitRegistered(d, 60*time.Second)
	d.signal(t, syscall.SIGTERM)
	if code := d.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, d.stderr.String())
	}
}

func TestDaemonStopsWhileWaitingForPostgres(t *testing.T) {
	t.Parallel()
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, dsn: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/none?sslmode=disable", port), dir: t.TempDir()}
	d := c.start("node-a", c.config("node-a", ""))
	eventually(t, 30*time.Second, "a failed connection attempt logged", func() (bool, error) {
		return strings.Contains(d.stderr.String(), "connect to PostgreSQL failed"), nil
	})
	d.signal(t, syscall.SIGTERM)
	if code := d.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, d.stderr.String())
	}
}

func TestBadConfigExitsBeforeTouchingTheDatabase(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	d := c.start("node-a", c.config("node-a", "bogus_key: 1\n"))
	if code := d.wait(t, 30*time.Second); code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, d.stderr.String())
	}
	if !strings.Contains(d.stderr.String(), "bogus_key") {
		t.Fatalf("error does not name the key:\n%s", d.stderr.String())
	}
	var schemas int
	if err := c.db.Get(&schemas, `SELECT count(*) FROM pg_namespace WHERE nspname = 'enginehealth'`); err != nil {
		t.Fatal(err)
	}
	if schemas != 0 {
		t.Fatal("a rejected configuration still created the schema")
	}
}

func TestConfigCheckExitCodes(t *testing.T) {
	t.Parallel()
	env := []string{"ENGINEHEALTH_DSN=postgres://u:hunter2@db.example:5432/eh"}
	example, err := filepath.Abs("../../../configs/enginehealth.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cli(t, env, "config", "check", "--config", example)
	if code != 0 || !strings.Contains(out, "valid") || !strings.Contains(out, "workflow   invoice") {
		t.Fatalf("example: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, "hunter2") {
		t.Fatal("config check printed the password")
	}

	broken := filepath.Join(t.TempDir(), "broken.yaml")
	yaml := "database: {dsn_env: ENGINEHEALTH_DSN}\netcd:\n  endpoints: []\nnode: {heartbeat_interval: -1s}\nlog: {level: loud}\n"
	if err := os.WriteFile(broken, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = cli(t, env, "config", "check", "--config", broken)
	if code != 2 {
		t.Fatalf("broken: exit %d, want 2: %s", code, errOut)
	}
	for _, key := range []string{"etcd.endpoints", "node.heartbeat_interval", "log.level"} {
		if !strings.Contains(errOut, key) {
			t.Errorf("broken: %q not listed in:\n%s", key, errOut)
		}
	}
	_, errOut, code = cli(t, env, "config", "check", "--config", "/nonexistent/enginehealth.yaml")
	if code != 2 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("missing file: exit %d: %s", code, errOut)
	}
}

func TestDaemonNotifiesSystemd(t *testing.T) {
	t.Parallel()
	n := newNotifySocket(t)
	c := newCluster(t)
	d := c.startEnv("node-a", c.config("node-a", ""), "NOTIFY_SOCKET="+n.path, "WATCHDOG_USEC=400000")
	n.expect(t, "READY=1")
	n.expect(t, "WATCHDOG=1")
	n.expect(t, "WATCHDOG=1")
	d.signal(t, syscall.SIGTERM)
	n.expect(t, "STOPPING=1")
	if code := d.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestDaemonWaitsForEtcd(t *testing.T) {
	t.Parallel()
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t)
	cfg := strings.Replace(c.config("node-a", ""), etcd.Endpoint, fmt.Sprintf("127.0.0.1:%d", port), 1)
	d := c.start("node-a", cfg)
	eventually(t, 60*time.Second, "two failed etcd attempts logged", func() (bool, error) {
		if !d.running() {
			t.Fatalf("daemon exited while etcd was down: %v\n%s", d.err, d.stderr.String())
		}
		return strings.Count(d.stderr.String(), "connect to etcd failed, retrying") >= 2, nil
	})
	d.signal(t, syscall.SIGTERM)
	if code := d.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, d.stderr.String())
	}
}

func TestWorkflowTablesCheckedAtStartup(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.db.MustExec(`CREATE TABLE public.inst (id bigint PRIMARY KEY, state text)`)
	wf := `workflows:
  - name: wf
    table: public.inst
    id_column: id
    status_column: status
    claimable: false
    tasks:
      - {name: t, begin: A, interim: B, end: C, failed: F}
  - name: other
    table: nowhere.inst
    id_column: id
    status_column: state
    claimable: false
    tasks:
      - {name: t, begin: A, interim: B, end: C, failed: F}
`
	d := c.start("node-a", c.config("node-a", wf))
	if code := d.wait(t, 30*time.Second); code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, d.stderr.String())
	}
	for _, want := range []string{`workflows[0].status_column: table public.inst has no column "status"`, "workflows[1].table: table nowhere.inst does not exist"} {
		if !strings.Contains(d.stderr.String(), want) {
			t.Errorf("error does not say %q:\n%s", want, d.stderr.String())
		}
	}
	if _, err := c.node("node-a"); err == nil {
		t.Fatal("the node registered despite the mismatch")
	}
}

// TestHostileConfigFiles: the binary refuses a FIFO or a device as its
// configuration or secret at once (exit 2, no hang), never prints an etcd
// password, and warns about a trust window shorter than an etcd election.
func TestHostileConfigFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(name, yaml string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := []string{"ENGINEHEALTH_DSN=postgres://u@db.example:5432/eh"}
	for _, c := range []struct {
		name, config, want string
	}{
		{"FIFO config", fifo, "not a regular file (a FIFO)"},
		{"device config", "/dev/zero", "not a regular file (a character device)"},
		{"FIFO dsn_file", write("fifo-dsn.yaml", "database: {dsn_file: "+fifo+"}\netcd: {endpoints: [\"127.0.0.1:2379\"]}\n"), "database.dsn_file"},
		{"device token_file", write("zero-token.yaml", "database: {dsn_env: ENGINEHEALTH_DSN}\netcd: {endpoints: [\"127.0.0.1:2379\"]}\napi: {token_file: /dev/zero}\n"), "api.token_file"},
	} {
		for _, cmd := range [][]string{{"config", "check"}, {"run"}} {
			start := time.Now()
			_, errOut, code := cli(t, env, append(cmd, "--config", c.config)...)
			if code != 2 || !strings.Contains(errOut, c.want) || time.Since(start) > 10*time.Second {
				t.Errorf("%s, %v: exit %d after %s: %s", c.name, cmd, code, time.Since(start).Round(time.Millisecond), errOut)
			}
		}
	}
	cfg := write("secret-etcd.yaml", "database: {dsn_env: ENGINEHEALTH_DSN}\netcd: {endpoints: [\"http://root:s3cr3t@127.0.0.1:2379\"], lease_ttl: 3s}\n")
	out, errOut, code := cli(t, env, "config", "check", "--config", cfg)
	if code != 0 || strings.Contains(out+errOut, "s3cr3t") || !strings.Contains(out, "root:xxxxx@127.0.0.1:2379") {
		t.Fatalf("config check with an etcd password: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "warning    etcd.trust_margin") || !strings.Contains(out, "warning    etcd.endpoints") {
		t.Fatalf("config check does not warn about the trust window or the single endpoint:\n%s", out)
	}
}

// TestReadyzFollowsTheHeartbeat: a Ready node whose heartbeats fail (its
// path to PostgreSQL cut, the connections left hanging) answers /readyz
// 503 saying why, while /healthz says unhealthy; once a beat succeeds
// again it is ready again.
func TestReadyzFollowsTheHeartbeat(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	u, err := url.Parse(c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := faultproxy.New(t, u.Host)
	u.Host = p.Addr
	// A pass every second: passes run against the cut database too
	// (TestDisruptedAnswersDuringAPass pins the lock they used to share
	// with the scrape).
	d := c.startEnv("node-a", c.configWith("node-a", cfgOpts{Schedule: "@every 1s"}), "ENGINEHEALTH_DSN="+u.String())
	n := c.waitRegistered(d, 30*time.Second)
	cl := api.NewClient(n.APIAddress, "")
	ctx := context.Background()
	ready := func(want bool) func() (bool, error) {
		return func() (bool, error) {
			r, err := cl.Ready(ctx)
			if err != nil && !isCode(err, http.StatusServiceUnavailable) {
				return false, err
			}
			return r.Ready == want && (want || strings.Contains(r.Reason, "heartbeat failing")) && r.Status == string(nodes.StatusReady), nil
		}
	}
	eventually(t, 30*time.Second, "ready", ready(true))
	hc := &http.Client{Timeout: 15 * time.Second}
	if resp, err := hc.Get("http://" + n.APIAddress + "/metrics"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close() // a scrape that read the registry
	}
	if err := p.Blackhole(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "not ready: heartbeat failing", ready(false))
	if h, err := cl.Health(ctx); err == nil || h.Status == "ok" {
		t.Fatalf("/healthz with the heartbeat failing: %+v %v", h, err)
	}
	// Reads that need the database answer while it does not, well before
	// the connections' read deadline (35 s) that lib/pq waits for: the
	// metrics with the last values read, status and the master lookup
	// with an error (outside review: they hung 35 s, and status said no
	// daemon answered).
	for _, path := range []string{"/metrics", "/v1/leader", "/v1/nodes", "/v1/status"} {
		resp, err := hc.Get("http://" + n.APIAddress + path)
		if err != nil {
			t.Fatalf("GET %s with the database cut: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if path == "/metrics" && (resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "enginehealth_database_up 0") ||
			!strings.Contains(string(body), `enginehealth_nodes{status="Ready"} 1`)) {
			t.Fatalf("/metrics with the database cut: %d, want 200, database_up 0 and the last registry read:\n%s", resp.StatusCode, body)
		}
		if (path == "/v1/nodes" || path == "/v1/status") && resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("GET %s with the database cut: %d, want 503: %s", path, resp.StatusCode, body)
		}
	}
	out, errOut, code := cli(t, nil, "status", "-o", "json", "--api", n.APIAddress)
	if code != 1 || !strings.Contains(out, `"status_error"`) || !strings.Contains(out, "503") {
		t.Fatalf("status with the database cut: exit %d, want 1 with status_error:\n%s%s", code, out, errOut)
	}
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "ready again", ready(true))
}
