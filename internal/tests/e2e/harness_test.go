// Package e2e runs the real enginehealth binary as separate processes
// against an ephemeral PostgreSQL server and an in-process etcd.
package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/etcdtest"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
	"github.com/enginehealth/enginehealth/nodes"
)

var (
	pg        *pgtest.Server
	etcd      *etcdtest.Etcd
	bin       string // the enginehealth binary under test
	engineBin string // the demo engine
	memberBin string // etcdtest's etcdmember, for multi-process etcd clusters
)

func TestMain(m *testing.M) {
	testkit.Main(m, testMain)
}

// e2eBinaries are the programs the tests run.
var e2eBinaries = []string{"github.com/enginehealth/enginehealth/cmd/enginehealth",
	"github.com/enginehealth/enginehealth/cmd/demo-engine", "github.com/enginehealth/enginehealth/internal/testkit/etcdtest/etcdmember"}

func testMain(m *testing.M) int {
	// EH_E2E_BIN: a directory where the caller built e2eBinaries (make
	// test builds them once, before its parts, for its three runs of
	// this package: go build finds nothing to compile, but links again,
	// 14 CPU-s a run). Unset: they are built into a temporary directory.
	dir := os.Getenv("EH_E2E_BIN")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "ehbin-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		build := exec.Command("go", append([]string{"build", "-o", dir}, e2eBinaries...)...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: build:", err)
			return 1
		}
	}
	bin = filepath.Join(dir, "enginehealth")
	engineBin = filepath.Join(dir, "demo-engine")
	memberBin = filepath.Join(dir, "etcdmember")
	for _, p := range []string{bin, engineBin, memberBin} {
		if _, err := os.Stat(p); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: EH_E2E_BIN=%s: %v\n", dir, err)
			return 1
		}
	}
	var err error
	if etcd, err = etcdtest.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer etcd.Close()
	return pgtest.Main(m, &pg)
}

// cluster is one test's database and the settings its daemons share.
type cluster struct {
	t   testing.TB
	dsn string
	db  *sqlx.DB
	dir string
	// logDir, when set, keeps every process's log: appended to
	// logDir/NAME.log when the test ends (all incarnations of a node).
	logDir string
	// tls, when set, is a TLS-everywhere cluster's (newTLSCluster): its
	// etcd, PostgreSQL and certificates; nil: plain, on the package's etcd.
	tls *tlsSetup
}

func newCluster(t testing.TB) *cluster {
	return newClusterOn(t, pg.NewDatabase(t))
}

// harnessConnectTimeout bounds the test's own connections (its reads of
// the cluster's tables, its migrations): pgdb's default, not the daemons'
// 1 s. A backend forked on a starved host took longer than 1 s to answer,
// and a test failed reading its own database ("begin: read tcp: i/o
// timeout") with nothing wrong in what it tests.
const harnessConnectTimeout = pgdb.DefaultConnectTimeout

func newClusterOn(t testing.TB, dsn string) *cluster {
	t.Helper()
	db, err := pgdb.Open(pgdb.Config{DSN: dsn, ConnectTimeout: harnessConnectTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &cluster{t: t, dsn: dsn, db: db, dir: t.TempDir()}
}

// useDSN makes the cluster use dsn (the same database through another
// address) from now on.
func (c *cluster) useDSN(t testing.TB, dsn string) {
	t.Helper()
	db, err := pgdb.Open(pgdb.Config{DSN: dsn, ConnectTimeout: harnessConnectTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c.db.Close()
	c.dsn, c.db = dsn, db
}

// config returns a daemon configuration for node name; extra YAML is
// appended.
func (c *cluster) config(name, extra string) string {
	return c.configWith(name, cfgOpts{Extra: extra})
}

// cfgOpts varies the harness configuration.
type cfgOpts struct {
	// Endpoints of etcd; default the package's single member.
	Endpoints []string
	// LeaseTTL; default leaseTTL.
	LeaseTTL time.Duration
	// Schedule of the check; default the daemon's.
	Schedule string
	// SweepInterval of the check (how often a pass looks for every
	// interrupted instance, not only those whose claims it expired);
	// default the daemon's.
	SweepInterval time.Duration
	// Heartbeat interval; default 200ms (not_responding_after: 5 × it,
	// at least 1s).
	Heartbeat time.Duration
	// TokenEnv names the variable holding the API token; in a TLS
	// cluster, the tokens file's operators take its place (operatorEnv).
	TokenEnv string
	// Extra YAML appended (top-level keys not set above).
	Extra string
	// Etcd: YAML lines appended under etcd: (keys not set above: tls,
	// username…), each indented by two spaces.
	Etcd string
	// Listen address of the API; default 127.0.0.1:0.
	Listen string
	// PlainAPI: in a TLS cluster, this node serves its API without TLS
	// (to compare with one that does).
	PlainAPI bool
}

func (c *cluster) configWith(name string, o cfgOpts) string {
	eps := o.Endpoints
	if len(eps) == 0 {
		eps = []string{etcd.Endpoint}
		if c.tls != nil {
			eps = c.tls.etcd.Endpoints()
		}
	}
	ttl := cmp.Or(o.LeaseTTL, leaseTTL)
	hb := cmp.Or(o.Heartbeat, 200*time.Millisecond)
	health := fmt.Sprintf("  not_responding_after: %s\n", max(5*hb, time.Second))
	if o.Schedule != "" {
		health += fmt.Sprintf("  schedule: %q\n", o.Schedule)
	}
	if o.SweepInterval > 0 {
		health += fmt.Sprintf("  sweep_interval: %s\n", o.SweepInterval)
	}
	api := "  listen: " + cmp.Or(o.Listen, "127.0.0.1:0") + "\n"
	etcdLines := o.Etcd
	switch {
	case c.tls != nil:
		etcdLines += c.tls.etcdLines()
		api += c.tls.apiLines(c.t, name, o.PlainAPI)
	case o.TokenEnv != "":
		api += "  token_env: " + o.TokenEnv + "\n"
	}
	return fmt.Sprintf(`node:
  name: %s
  heartbeat_interval: %s
  shutdown_timeout: 5s
database:
  dsn_env: ENGINEHEALTH_DSN
  connect_timeout: 1s
etcd:
  endpoints: ["%s"]
  prefix: %s
  lease_ttl: %s
%shealth:
%sapi:
%slog:
  format: json
  level: debug
%s`, name, hb, strings.Join(eps, `", "`), etcdPrefix(c.t), ttl, etcdLines, health, api, o.Extra)
}

// etcdPrefix is etcd.prefix of the harness's daemons in test t.
func etcdPrefix(t testing.TB) string {
	return "/" + strings.ReplaceAll(t.Name(), "/", "_") + "/"
}

// daemon is one enginehealth process.
type daemon struct {
	name   string
	cmd    *exec.Cmd
	stderr *testkit.Buffer
	done   chan struct{}
	err    error
	// config is its configuration file's path.
	config string
}

// start runs `enginehealth run` with the given configuration.
func (c *cluster) start(name, cfg string) *daemon {
	c.t.Helper()
	return c.startEnv(name, cfg)
}

// startEnv is start with extra environment variables.
func (c *cluster) startEnv(name, cfg string, env ...string) *daemon {
	c.t.Helper()
	return c.startProcess(name, cfg, env, bin, "run")
}

// seed fills the demo workflow tables of cfg with n instances
// (`demo-engine seed`), env added to the process's environment.
func (c *cluster) seed(cfg string, n int, env ...string) {
	c.t.Helper()
	path := filepath.Join(c.dir, "seed.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		c.t.Fatal(err)
	}
	seed := exec.Command(engineBin, "seed", "--config", path, "--instances", strconv.Itoa(n))
	seed.Env = append(append(os.Environ(), "ENGINEHEALTH_DSN="+c.dsn), env...)
	if out, err := seed.CombinedOutput(); err != nil {
		c.t.Fatalf("seed: %v\n%s", err, out)
	}
}

// startEngine runs `demo-engine run` with the given configuration.
func (c *cluster) startEngine(name, cfg string, args ...string) *daemon {
	c.t.Helper()
	return c.startProcess(name, cfg, nil, engineBin, append([]string{"run", "--node", name}, args...)...)
}

func (c *cluster) startProcess(name, cfg string, env []string, program string, args ...string) *daemon {
	c.t.Helper()
	path := filepath.Join(c.dir, name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		c.t.Fatal(err)
	}
	d := &daemon{name: name, stderr: &testkit.Buffer{}, done: make(chan struct{}), config: path}
	d.cmd = exec.Command(program, append(args, "--config", path)...)
	// A state directory of its own, as systemd's StateDirectory= gives
	// the unit: the daemon keeps its lease file there (releaseLease).
	d.cmd.Env = append(append(os.Environ(), "ENGINEHEALTH_DSN="+c.dsn, "STATE_DIRECTORY="+c.stateDir(name)), env...)
	d.cmd.Stdout, d.cmd.Stderr = d.stderr, d.stderr
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { d.err = d.cmd.Wait(); close(d.done) }()
	c.t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		<-d.done
		if c.logDir != "" {
			if f, err := os.OpenFile(filepath.Join(c.logDir, d.name+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
				_, _ = f.WriteString(d.stderr.String())
				_ = f.Close()
			}
		} else if c.t.Failed() {
			c.t.Logf("log of %s:\n%s", d.name, d.stderr.String())
		}
	})
	return d
}

// stateDir is the state directory ($STATE_DIRECTORY) of the processes
// named name.
func (c *cluster) stateDir(name string) string { return filepath.Join(c.dir, "state", name) }

// releaseLease runs `enginehealth release-lease` for d as systemd runs
// the unit's ExecStopPost=: with d's configuration and environment
// (STATE_DIRECTORY included), once d's process is gone (it waits for
// that first, up to 30 s). It returns the command's output and exit code.
func releaseLease(t testing.TB, d *daemon) (stdout, stderr string, code int) {
	t.Helper()
	d.wait(t, 30*time.Second)
	return runReleaseLease(t, d)
}

// runReleaseLease runs release-lease for d at once, whether d's process
// runs or not (a person at the host).
func runReleaseLease(t testing.TB, d *daemon) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "release-lease", "--config", d.config)
	cmd.Env = d.cmd.Env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("release-lease for %s: %v", d.name, err)
		}
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// warnings returns the daemon's log lines at WARN and above.
func (d *daemon) warnings() string {
	var b strings.Builder
	for _, line := range strings.Split(d.stderr.String(), "\n") {
		if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) ||
			strings.Contains(line, "elected master") || strings.Contains(line, "took office") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// wait returns the exit code, failing the test after timeout.
// logged reports whether the daemon logged an info line msg whose event
// (the group "event") has every field given (its log is JSON).
func (d *daemon) logged(msg string, fields map[string]any) bool {
	for _, line := range strings.Split(d.stderr.String(), "\n") {
		var l struct {
			Level, Msg string
			Event      map[string]any
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Msg != msg || l.Level != "INFO" {
			continue
		}
		ok := true
		for k, v := range fields {
			ok = ok && l.Event[k] == v
		}
		if ok {
			return true
		}
	}
	return false
}

func (d *daemon) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-d.done:
		return d.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("%s still running after %s", d.name, timeout)
		return -1
	}
}

func (d *daemon) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s to %s: %v", sig, d.name, err)
	}
}

func (d *daemon) running() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// eventually polls cond until it returns true, failing after timeout.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	testkit.Eventually(t, timeout, what, cond)
}

// never fails if cond becomes true within d.
func never(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.Never(t, d, what, cond)
}

// isCode reports whether err is the daemon's answer with status code.
func isCode(err error, code int) bool {
	var se *api.StatusError
	return errors.As(err, &se) && se.Code == code
}

// node reads a node record straight from the database.
func (c *cluster) node(name string) (nodes.Node, error) {
	return testkit.Must(nodes.NewStore(nodes.StoreConfig{DB: c.db, Schema: "enginehealth", Events: audit.New("enginehealth")})).Get(context.Background(), name)
}

// waitRegistered waits until the daemon's record exists and returns it.
func (c *cluster) waitRegistered(d *daemon, timeout time.Duration) nodes.Node {
	c.t.Helper()
	var n nodes.Node
	eventually(c.t, timeout, d.name+" registered", func() (bool, error) {
		if !d.running() {
			c.t.Fatalf("%s exited: %v\n%s", d.name, d.err, d.stderr.String())
		}
		var err error
		n, err = c.node(d.name)
		return err == nil && n.Incarnation != "", err
	})
	return n
}

// cli runs the enginehealth CLI and returns stdout, stderr and exit code.
func cli(t testing.TB, env []string, args ...string) (string, string, int) {
	t.Helper()
	return cliOf(t, bin, env, args...)
}

// cliOf runs the CLI of the enginehealth binary program (another
// release's: the rolling-upgrade test).
func cliOf(t testing.TB, program string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("run %v: %v", args, err)
		}
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// notifySocket is a fake systemd notify socket.
type notifySocket struct {
	path string
	msgs chan string
}

func newNotifySocket(t testing.TB) *notifySocket {
	t.Helper()
	dir, err := os.MkdirTemp("", "ehsd-") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	n := &notifySocket{path: filepath.Join(dir, "notify"), msgs: make(chan string, 1000)}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				close(n.msgs)
				return
			}
			n.msgs <- string(buf[:k])
		}
	}()
	return n
}

// expect waits for message want, skipping others.
func (n *notifySocket) expect(t testing.TB, want string) {
	t.Helper()
	n.await(t, fmt.Sprintf("%q", want), func(m string) bool { return m == want }, "")
}

// expectBefore waits for a message containing want, failing if forbidden
// arrives first.
func (n *notifySocket) expectBefore(t testing.TB, want, forbidden string) {
	t.Helper()
	n.await(t, fmt.Sprintf("a message with %q", want), func(m string) bool { return strings.Contains(m, want) }, forbidden)
}

// await waits for a message that match accepts (what describes it),
// failing if forbidden (when not "") arrives first.
func (n *notifySocket) await(t testing.TB, what string, match func(string) bool, forbidden string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-n.msgs:
			if !ok {
				t.Fatalf("notify socket closed before %s", what)
			}
			if forbidden != "" && m == forbidden {
				t.Fatalf("%q on the notify socket before %s", forbidden, what)
			}
			if match(m) {
				return
			}
		case <-timeout:
			t.Fatalf("no %s on the notify socket", what)
		}
	}
}

// seen reports whether want arrived so far, consuming what is queued.
func (n *notifySocket) seen(want string) bool {
	for {
		select {
		case m, ok := <-n.msgs:
			if !ok {
				return false
			}
			if m == want {
				return true
			}
		default:
			return false
		}
	}
}
