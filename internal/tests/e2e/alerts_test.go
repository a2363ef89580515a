package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/enginehealth/enginehealth/internal/app/demoengine"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/nodes"
)

// The shipped monitoring files, relative to this package.
const (
	alertsFile    = "../../../deploy/prometheus/alerts.yml"
	dashboardFile = "../../../deploy/grafana/enginehealth.json"
)

// certMetric is exported only by a node with certificate files (TLS):
// TestCertificateAlertRules evaluates its rules on series, and
// TestEtcdTLSAndAuth scrapes it from a daemon.
const certMetric = "enginehealth_certificate_expiry_seconds"

type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	Annotations map[string]string `yaml:"annotations"`
}

// runbooksFile is the page every rule's runbook_url points into.
const runbooksFile = "../../../docs/runbooks.md"

func loadRules(t *testing.T) map[string]string {
	t.Helper()
	rules := map[string]string{}
	for _, r := range loadRuleList(t) {
		rules[r.Alert] = r.Expr
	}
	return rules
}

func loadRuleList(t *testing.T) []alertRule {
	t.Helper()
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	var rules []alertRule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// TestEveryAlertHasARunbook: every rule's runbook_url points at a section
// of docs/runbooks.md named after the alert (the anchor GitHub makes of
// its heading), and every section there is an alert's.
func TestEveryAlertHasARunbook(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(runbooksFile)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, l := range strings.Split(string(data), "\n") {
		if h, ok := strings.CutPrefix(l, "## "); ok {
			sections[strings.ToLower(strings.TrimSpace(h))] = true
		}
	}
	const base = "https://github.com/enginehealth/enginehealth/blob/main/docs/runbooks.md#"
	for _, r := range loadRuleList(t) {
		url := r.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(url, base)
		switch {
		case !ok:
			t.Errorf("%s: runbook_url %q, want %s<section>", r.Alert, url, base)
		case anchor != strings.ToLower(r.Alert) || !sections[anchor]:
			t.Errorf("%s: runbook_url points at #%s, and docs/runbooks.md has no section ## %s", r.Alert, anchor, r.Alert)
		}
		delete(sections, anchor)
	}
	for s := range sections {
		t.Errorf("docs/runbooks.md has a section %q for no alert", s)
	}
}

// prometheus is a real Prometheus server scraping the given targets every
// second.
type prometheus struct {
	addr string
}

func startPrometheus(t *testing.T, targets []string) prometheus {
	t.Helper()
	path, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("the prometheus server is needed (Debian package prometheus; .ci/run installs it)")
	}
	dir := t.TempDir()
	rules, err := filepath.Abs(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [%q]\nscrape_configs:\n  - job_name: enginehealth\n    static_configs:\n      - targets: [\"%s\"]\n",
		rules, strings.Join(targets, `", "`))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(path, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	out := &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out.String())
		}
	})
	p := prometheus{addr: addr}
	eventually(t, 30*time.Second, "prometheus ready", func() (bool, error) {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == 200, nil
	})
	return p
}

// firing reports whether expr returns any sample now.
func (p prometheus) firing(expr string) (bool, error) {
	resp, err := http.Get("http://" + p.addr + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return false, err
	}
	if r.Status != "success" {
		return false, fmt.Errorf("query %q: %s", expr, r.Error)
	}
	return len(r.Data.Result) > 0, nil
}

// TestAlertRulesAreValid: promtool accepts the rules, and every metric the
// rules and the dashboard name is one the daemon exports (checked against
// the names in the metrics package's help, which the scrape test pins).
func TestAlertRulesAreValid(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("promtool", "check", "rules", alertsFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules (Debian package prometheus; .ci/run installs it): %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS: 11 rules found") {
		t.Fatalf("promtool: %s", out)
	}
	dash, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &d); err != nil || len(d.Panels) == 0 {
		t.Fatalf("dashboard: %v", err)
	}
}

// TestCertificateAlertRules: promtool evaluates the certificate alerts
// on series of nodes whose certificates expire in a year, in 7 days and
// 2 minutes (the warning once under 7 days), in 5 hours and 10 minutes
// ago (the warning and the critical alert), with their annotations
// (testdata/certificate_alerts.yml); every rule on the certificate
// metric is tested there.
func TestCertificateAlertRules(t *testing.T) {
	t.Parallel()
	const tests = "testdata/certificate_alerts.yml"
	out, err := exec.Command("promtool", "test", "rules", tests).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules %s: %v\n%s", tests, err, out)
	}
	data, err := os.ReadFile(tests)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for alert, expr := range loadRules(t) {
		if strings.Contains(expr, certMetric) {
			n++
			if !strings.Contains(string(data), "alertname: "+alert+"\n") {
				t.Errorf("%s is not tested in %s", alert, tests)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d rules on %s, want 2", n, certMetric)
	}
}

// TestEtcdAlertRule: promtool evaluates EnginehealthEtcdUnreachable on
// a node that reaches etcd throughout and one that stops reaching it
// twice (testdata/etcd_alerts.yml): it fires a minute after a node's
// reads fail, for that node only, and ends when they succeed again.
// TestEtcdCAReload brings the condition about on a real daemon.
func TestEtcdAlertRule(t *testing.T) {
	t.Parallel()
	const tests = "testdata/etcd_alerts.yml"
	out, err := exec.Command("promtool", "test", "rules", tests).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules %s: %v\n%s", tests, err, out)
	}
	if expr := loadRules(t)["EnginehealthEtcdUnreachable"]; !strings.Contains(expr, "enginehealth_etcd_reachable") {
		t.Fatalf("EnginehealthEtcdUnreachable: %q", expr)
	}
}

// TestAlertRules: a real Prometheus scrapes real daemons; each alert's
// expression is false on a healthy cluster and true once its condition
// is brought about (the rules' `for` is Prometheus' business, not tested
// here).
func TestAlertRules(t *testing.T) {
	t.Parallel()
	rules := loadRules(t)
	if len(rules) != 11 {
		t.Fatalf("rules %v", rules)
	}
	c := newCluster(t)
	cfg := func(name string) string {
		return c.configWith(name, cfgOpts{Schedule: "@every 1s", Extra: demoengine.WorkflowsYAML(time.Minute)})
	}
	c.seed(cfg("seed"), 10)
	a := c.start("node-a", cfg("node-a"))
	na := c.waitRegistered(a, 30*time.Second)
	waitNodeStatus(t, c, "node-a", nodes.StatusReady)
	b := c.start("node-b", cfg("node-b"))
	nb := c.waitRegistered(b, 30*time.Second)
	waitNodeStatus(t, c, "node-b", nodes.StatusReady)
	p := startPrometheus(t, []string{na.APIAddress, nb.APIAddress})

	// Every metric the rules and the dashboard name is scraped (but the
	// certificates': these daemons have none).
	names := regexp.MustCompile(`enginehealth_[a-z_]+`)
	dash, _ := os.ReadFile(dashboardFile)
	var all []string
	for _, e := range rules {
		all = append(all, names.FindAllString(e, -1)...)
	}
	all = append(all, names.FindAllString(string(dash), -1)...)
	eventually(t, 30*time.Second, "every metric of the rules and the dashboard scraped", func() (bool, error) {
		for _, n := range all {
			if n == certMetric {
				continue
			}
			n = strings.TrimSuffix(n, "_bucket")
			if ok, err := p.firing(fmt.Sprintf(`count({__name__=~"%s(_bucket|_count)?"})`, n)); !ok {
				return false, fmt.Errorf("%s not scraped (%v)", n, err)
			}
		}
		return true, nil
	})
	expect := func(alert string, want bool) {
		t.Helper()
		eventually(t, 60*time.Second, fmt.Sprintf("%s firing=%v", alert, want), func() (bool, error) {
			ok, err := p.firing(rules[alert])
			return ok == want && err == nil, err
		})
	}
	for a := range rules {
		expect(a, false)
	}

	// A held instance waiting for 2 hours (its hold moved back in time),
	// where its hold left it (else the check closes the hold).
	var was string
	if err := c.db.Get(&was, `SELECT status FROM demo.orders WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	c.db.MustExec(`UPDATE demo.orders SET status = 'Shipping' WHERE id = 1;
		INSERT INTO enginehealth.attempts (workflow, instance, task, state, cause, left_in, since)
		VALUES ('orders', '1', 'ship', 'held', 'interrupt', 'Shipping', now() - interval '2 hours')`) // one transaction
	expect("EnginehealthHoldsWaiting", true)
	c.db.MustExec(`DELETE FROM enginehealth.attempts`)
	c.db.MustExec(`UPDATE demo.orders SET status = $1 WHERE id = 1`, was)
	expect("EnginehealthHoldsWaiting", false)

	// Paused for two hours.
	c.db.MustExec(`UPDATE enginehealth.pause SET paused = true, actor = 'ops', reason = 'migration', changed_at = now() - interval '2 hours'`)
	expect("EnginehealthPausedTooLong", true)
	c.db.MustExec(`UPDATE enginehealth.pause SET paused = false, changed_at = now()`)
	expect("EnginehealthPausedTooLong", false)

	// A node in ERROR grade.
	c.db.MustExec(`INSERT INTO enginehealth.node_grades (node, grade) VALUES ('node-b', 'ERROR')`)
	expect("EnginehealthNodeErrorGrade", true)
	c.db.MustExec(`DELETE FROM enginehealth.node_grades`)

	// Check passes that fail: the workflow's table is gone.
	c.db.MustExec(`ALTER TABLE demo.orders_claim RENAME TO orders_claim_gone`)
	expect("EnginehealthCheckNotSucceeding", true)
	c.db.MustExec(`ALTER TABLE demo.orders_claim_gone RENAME TO orders_claim`)
	expect("EnginehealthCheckNotSucceeding", false)

	// Most nodes look dead at once: three stale records of four.
	for _, n := range []string{"x", "y", "z"} {
		c.db.MustExec(`INSERT INTO enginehealth.nodes (name, incarnation, hostname, status, status_changed_by, last_active)
			VALUES ($1, gen_random_uuid(), $1, 'Ready', 'test', now() - interval '1 hour')`, n)
	}
	expect("EnginehealthDisruptionMode", true)
	c.db.MustExec(`DELETE FROM enginehealth.nodes WHERE name IN ('x', 'y', 'z')`)
	expect("EnginehealthDisruptionMode", false)

	// An engine claims an instance under a node name no sidecar has:
	// the master's protocol doctor finds it.
	c.db.MustExec(`UPDATE demo.orders SET status = 'Reserving' WHERE id = 2;
		INSERT INTO demo.orders_claim VALUES (2, 'ghost', 'tok-ghost', now(), now() + interval '1 hour')`)
	expect("EnginehealthProtocolViolations", true)
	c.db.MustExec(`DELETE FROM demo.orders_claim WHERE instance_id = 2`)

	// node-b dies: it is marked Not responding.
	b.signal(t, syscall.SIGKILL)
	b.wait(t, 10*time.Second)
	expect("EnginehealthNodeDown", true)

	// The master stops: no node acts.
	a.signal(t, syscall.SIGTERM)
	a.wait(t, 10*time.Second)
	expect("EnginehealthNoActingMaster", true)
}
