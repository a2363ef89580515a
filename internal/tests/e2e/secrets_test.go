package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/enginehealth/enginehealth/internal/app/demoengine"
	"github.com/enginehealth/enginehealth/internal/infra/leasefile"
	"github.com/enginehealth/enginehealth/internal/testkit/etcdtest"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
	"github.com/enginehealth/enginehealth/nodes"
)

// The secrets of TestSecretsNeverShow: each distinctive enough that any
// copy, whole or cut, is found.
const (
	dbSecret    = "dbpw-Q7x2Kd9LmV"
	etcdSecret  = "etcdpw-Zr4Nq8TsWb"
	tokenSecret = "apitoken-Hc6Yp3Jv0Ue5Rk1Xa"
)

// TestSecretsNeverShow runs two daemons with a database password in the
// DSN, an etcd user and password in the endpoints (etcd with auth on) and
// an API token, and a third that cannot reach either (its retries log the
// errors), then uses everything that prints: mutations with the token
// (one forwarded to the master), a wrong token, a check pass, config
// check, the CLI's listings, every read route, the status page and
// /metrics. No secret, nor any 6 characters of one, appears in the
// daemons' logs, their lease files (the state directory), the events,
// runs and node records, the API's answers, the page, the metrics or the
// CLI's output.
func TestSecretsNeverShow(t *testing.T) {
	t.Parallel()
	e := etcdtest.New(t)
	ec, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, step := range []func() error{
		func() error { _, err := ec.RoleAdd(ctx, "root"); return err },
		func() error { _, err := ec.UserAdd(ctx, "root", etcdSecret); return err },
		func() error { _, err := ec.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := ec.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("enable etcd auth: %v", err)
		}
	}
	ec.Close()

	base := pg.NewDatabase(t)
	c := newClusterOn(t, base)
	c.db.MustExec(`CREATE ROLE ehsecret LOGIN SUPERUSER PASSWORD '` + dbSecret + `'`)
	t.Cleanup(func() { _, _ = c.db.Exec(`DROP ROLE IF EXISTS ehsecret`) })
	u, _ := url.Parse(base)
	u.User = url.UserPassword("ehsecret", dbSecret)
	dsn := u.String()
	etcdURL := "http://root:" + etcdSecret + "@" + e.Endpoint

	cfg := func(name string, eps []string) string {
		return c.configWith(name, cfgOpts{Endpoints: eps, Schedule: "@every 1s", TokenEnv: "EH_TOKEN", Extra: demoengine.WorkflowsYAML(time.Minute)})
	}
	env := []string{"EH_TOKEN=" + tokenSecret, "ENGINEHEALTH_DSN=" + dsn}
	c.seed(cfg("seed", []string{etcdURL}), 10, env...)
	a := c.startEnv("node-a", cfg("node-a", []string{etcdURL}), env...)
	waitNodeStatus(t, c, "node-a", nodes.StatusReady)
	b := c.startEnv("node-b", cfg("node-b", []string{etcdURL}), env...)
	waitNodeStatus(t, c, "node-b", nodes.StatusReady)
	master := c.waitTerm(t, 0, 30*time.Second).Node

	// A daemon that reaches neither: its connection errors are logged.
	dead := freeAddr(t)
	deadDSN := strings.Replace(dsn, u.Host, dead, 1)
	lost := c.startEnv("node-lost", cfg("node-lost", []string{"http://root:" + etcdSecret + "@" + dead}),
		"EH_TOKEN="+tokenSecret, "ENGINEHEALTH_DSN="+deadDSN)

	var seen []string // every text that was printed or answered
	other := map[string]string{"node-a": "node-b", "node-b": "node-a"}[master]
	addr := apiOf(t, c, other)
	tok := []string{"ENGINEHEALTH_TOKEN=" + tokenSecret}
	for _, args := range [][]string{
		{"pause", "--reason", "secret test"}, // forwarded to the master
		{"resume", "--reason", "secret test"},
		{"check"},
		{"recover", "--dry-run"},
		{"status"}, {"nodes"}, {"events", "--limit", "500"}, {"runs"}, {"holds"}, {"retries", "stats"},
		{"status", "-o", "json"}, {"events", "-o", "json", "--limit", "500"},
	} {
		out, errOut, _ := cli(t, tok, append(args, "--api", addr)...)
		seen = append(seen, out, errOut)
	}
	out, errOut, _ := cli(t, []string{"ENGINEHEALTH_TOKEN=wrong-token"}, "pause", "--reason", "x", "--api", addr)
	seen = append(seen, out, errOut)
	for _, extra := range [][]string{nil, {"--database"}} {
		path := c.dir + "/check.yaml"
		if err := os.WriteFile(path, []byte(cfg("node-a", []string{etcdURL})), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, _ := cli(t, env, append([]string{"config", "check", "-c", path}, extra...)...)
		seen = append(seen, out, errOut)
	}
	for _, route := range []string{"/", "/metrics", "/healthz", "/readyz", "/v1/status", "/v1/nodes", "/v1/leader",
		"/v1/events?limit=1000", "/v1/runs", "/v1/holds", "/v1/retries/stats", "/v1/nodes/node-a"} {
		for _, at := range []string{addr, apiOf(t, c, master)} {
			resp, err := http.Get("http://" + at + route)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			seen = append(seen, fmt.Sprint(resp.Header), string(body))
		}
	}
	// Let the lost daemon log a few retries, then stop everyone.
	eventually(t, 30*time.Second, "node-lost logged its connection errors", func() (bool, error) {
		return strings.Count(lost.stderr.String(), "\n") >= 3, nil
	})
	// The lease files the two candidates keep in their state directories
	// (for release-lease): their endpoints without the credentials.
	for _, d := range []*daemon{a, b} {
		var data []byte
		eventually(t, 30*time.Second, d.name+"'s lease file", func() (bool, error) {
			var err error
			data, err = os.ReadFile(leasefile.Path(c.stateDir(d.name)))
			return err == nil, err
		})
		seen = append(seen, string(data))
	}
	for _, d := range []*daemon{a, b, lost} {
		d.signal(t, syscall.SIGTERM)
		d.wait(t, 30*time.Second)
		seen = append(seen, d.stderr.String())
	}
	for _, q := range []string{`SELECT e::text FROM enginehealth.events e`, `SELECT r::text FROM enginehealth.runs r`,
		`SELECT n::text FROM enginehealth.nodes n`, `SELECT p::text FROM enginehealth.pause p`} {
		var rows []string
		if err := c.db.Select(&rows, q); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, rows...)
	}

	all := strings.Join(seen, "\n")
	if !strings.Contains(all, "xxxxx") {
		t.Error("no redacted secret was printed at all: the test did not reach the places that print them")
	}
	for _, secret := range []string{dbSecret, etcdSecret, tokenSecret} {
		for i := 0; i+6 <= len(secret); i++ {
			if part := secret[i : i+6]; strings.Contains(all, part) {
				at := strings.Index(all, part)
				t.Fatalf("secret %q shows (%q at …%s…)", secret[:4]+"…", part, all[max(0, at-80):min(len(all), at+80)])
			}
		}
	}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}
