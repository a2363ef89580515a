package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/infra/certexpiry"
	"github.com/enginehealth/enginehealth/internal/infra/tlsfiles"
	"github.com/enginehealth/enginehealth/internal/testkit/testca"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// source is a daemon's state as the scrape sees it: two nodes, this one
// the master and WARNING, one hold.
func source(dbErr error) Source {
	return sourceWith(func() error { return dbErr })
}

// sourceWith is source with the database's answer decided at each read.
func sourceWith(db func() error) Source {
	pausedAt := time.Now().Add(-45 * time.Minute)
	return Source{
		Nodes: func(context.Context) ([]nodes.Node, error) {
			return []nodes.Node{
				{Name: "n1", Status: nodes.StatusReady, FailoverGrade: nodes.GradeWarning, SecondsSinceActive: 0.5},
				{Name: "n2", Status: nodes.StatusNotResponding, FailoverGrade: nodes.GradeError, SecondsSinceActive: 62},
			}, db()
		},
		HoldsOpen:     func(context.Context) (int64, time.Duration, error) { return 1, 90 * time.Minute, db() },
		Period:        15 * time.Second,
		Status:        func() nodes.Status { return nodes.StatusReady },
		Grade:         func() string { return nodes.GradeWarning },
		Master:        func() (bool, int64) { return true, 7 },
		Passes:        func() health.PassStats { return health.PassStats{LastSuccess: time.Now(), ConsecutiveFailures: 0} },
		Disrupted:     func() bool { return false },
		Paused:        func(context.Context) (bool, time.Time, error) { return true, pausedAt, db() },
		EventsWritten: func(context.Context) (int64, error) { return 1234, db() },
		Tasks:         []Task{{"orders", "reserve"}, {"orders", "ship"}},
		Certificates: func() []certexpiry.Expiry {
			return []certexpiry.Expiry{{Which: "etcd.tls.cert_file", Left: 3 * 24 * time.Hour}}
		},
		EtcdReachable: func() bool { return false },
		Build:         &BuildLabels{Version: "v1.4.0", Commit: "0123abc", BuildDate: "2026-11-26T00:00:00Z", GoVersion: "go1.26.8", Platform: "linux/amd64", SchemaVersion: 14},
	}
}

// TestMetricsLint: every metric follows Prometheus' naming and help
// conventions (client_golang's linter).
func TestMetricsLint(t *testing.T) {
	m := New(source(nil))
	m.ObservePass(health.CheckResult{Took: time.Millisecond}, nil)
	m.ObserveRequest("GET /v1/nodes", 200)
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// TestMetricsScrape: what a scrape answers, from the sources and the
// observed passes and requests; no instance ids in labels.
func TestMetricsScrape(t *testing.T) {
	m := New(source(nil))
	m.ObservePass(health.CheckResult{Took: 20 * time.Millisecond,
		Recovery: recovery.Result{ClaimsExpired: 3, Tasks: []recovery.TaskResult{{Workflow: "orders", Task: "reserve", Retried: 2, Scheduled: 3, Held: 1, Failed: 2, Exhausted: 2}}},
		Retries:  recovery.DueResult{Retried: 4, Cancelled: 1},
		Settled:  []recovery.SettleCounts{{Workflow: "orders", Task: "reserve", Succeeded: 5, Failed: 1, Cancelled: 7}},
		Grades:   []nodes.GradeChange{{Name: "n2", From: nodes.GradeWarning, To: nodes.GradeError}}}, nil)
	m.ObservePass(health.CheckResult{Disruption: true}, nil)
	m.ObservePass(health.CheckResult{}, errors.New("database down"))
	m.ObserveRequest("GET /v1/nodes", 200)
	m.ObserveRequest("", 400)
	m.ObserveRequest("/", 404)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`enginehealth_nodes{status="Ready"} 1`,
		`enginehealth_nodes{status="Not responding"} 1`,
		`enginehealth_nodes{status="Unexpected shutdown"} 0`,
		`enginehealth_node_heartbeat_age_seconds{node="n2"} 62`,
		`enginehealth_node_failover_grade{grade="ERROR",node="n2"} 1`,
		`enginehealth_node_failover_grade{grade="NORMAL",node="n2"} 0`,
		`enginehealth_self_status{status="Ready"} 1`,
		`enginehealth_self_failover_grade{grade="WARNING"} 1`,
		`enginehealth_is_master 1`,
		`enginehealth_paused 1`,
		`enginehealth_paused_seconds 2700`,
		`enginehealth_events_written_total 1234`,
		`enginehealth_master_term 7`,
		`enginehealth_disruption_mode 0`,
		`enginehealth_holds_open 1`,
		`enginehealth_holds_oldest_age_seconds 5400`,
		`enginehealth_check_period_seconds 15`,
		`enginehealth_database_up 1`,
		`enginehealth_check_consecutive_failures 0`,
		`enginehealth_check_passes_total{result="ok"} 1`,
		`enginehealth_check_passes_total{result="disruption"} 1`,
		`enginehealth_check_passes_total{result="failed"} 1`,
		`enginehealth_check_pass_duration_seconds_count 3`,
		`enginehealth_claims_expired_total 3`,
		`enginehealth_instances_repaired_total{action="retried",task="reserve",workflow="orders"} 2`,
		`enginehealth_instances_repaired_total{action="held",task="reserve",workflow="orders"} 1`,
		`enginehealth_instances_repaired_total{action="failed",task="ship",workflow="orders"} 0`,
		`enginehealth_due_retries_total{outcome="retried"} 4`,
		`enginehealth_retries_total{outcome="scheduled",task="reserve",workflow="orders"} 5`,
		`enginehealth_retries_total{outcome="exhausted",task="reserve",workflow="orders"} 2`,
		`enginehealth_retries_total{outcome="succeeded",task="reserve",workflow="orders"} 5`,
		`enginehealth_retries_total{outcome="failed",task="reserve",workflow="orders"} 1`,
		`enginehealth_retries_total{outcome="succeeded",task="ship",workflow="orders"} 0`,
		`enginehealth_grade_changes_total{grade="ERROR"} 1`,
		`enginehealth_api_requests_total{code="200",route="GET /v1/nodes"} 1`,
		`enginehealth_api_requests_total{code="400",route="refused"} 1`,
		`enginehealth_api_requests_total{code="404",route="unknown"} 1`,
		`enginehealth_check_last_success_age_seconds`,
		`enginehealth_certificate_expiry_seconds{which="etcd.tls.cert_file"} 259200`,
		`enginehealth_etcd_reachable 0`,
		`enginehealth_build_info{build_date="2026-11-26T00:00:00Z",commit="0123abc",goversion="go1.26.8",platform="linux/amd64",schema_version="14",version="v1.4.0"} 1`,
		`process_resident_memory_bytes`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want+"\n") && !strings.Contains(string(body), want+" ") {
			t.Errorf("scrape lacks %q", want)
		}
	}

	// The database unreachable from the start: the scrape still answers,
	// and says so.
	m = New(source(errors.New("no database")))
	rec = httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ = io.ReadAll(rec.Body)
	if rec.Code != 200 || !strings.Contains(string(body), "enginehealth_database_up 0\n") || strings.Contains(string(body), "enginehealth_nodes{") {
		t.Fatalf("scrape without a database: %d\n%s", rec.Code, body)
	}
}

// TestMetricsSurviveDatabaseBlip: once read, the registry, holds and
// pause values are exported through an outage (database_up 0, with how
// old they are), so that alerts' "for" clocks do not restart.
func TestMetricsSurviveDatabaseBlip(t *testing.T) {
	var down atomic.Bool
	m := New(sourceWith(func() error {
		if down.Load() {
			return errors.New("no database")
		}
		return nil
	}))
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	if body := scrape(); !strings.Contains(body, "enginehealth_database_up 1\n") || !strings.Contains(body, "enginehealth_database_read_age_seconds 0") {
		t.Fatalf("first scrape:\n%s", body)
	}
	down.Store(true)
	body := scrape()
	for _, want := range []string{
		"enginehealth_database_up 0\n",
		`enginehealth_nodes{status="Not responding"} 1`,
		`enginehealth_node_failover_grade{grade="ERROR",node="n2"} 1`,
		"enginehealth_holds_open 1\n",
		"enginehealth_paused 1\n",
		"enginehealth_paused_seconds 2700",
		"enginehealth_database_read_age_seconds ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape during the outage lacks %q:\n%s", want, body)
		}
	}
}

// TestCertificateExpiry: the gauge of a watched certificate is its time
// left at each scrape: about 3 days for one that expires in 3 days, a
// year once the holder is swapped for a fresh one, negative once expired.
func TestCertificateExpiry(t *testing.T) {
	ca, err := testca.New(t.TempDir(), "metrics-ca")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second) // as NotAfter is
	var h tlsfiles.Cert
	hold := func(notAfter time.Time) {
		is, err := ca.Issue("sidecar", testca.Options{Client: true, NotAfter: notAfter})
		if err != nil {
			t.Fatal(err)
		}
		h.Store(&is.TLS)
	}
	hold(now.Add(3 * 24 * time.Hour))
	w := certexpiry.New(certexpiry.Options{Now: func() time.Time { return now }})
	w.Add("etcd.tls.cert_file", certexpiry.Chain, h.Chain)
	m := New(Source{Certificates: w.Expiries})
	value := func() string {
		t.Helper()
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		const name = `enginehealth_certificate_expiry_seconds{which="etcd.tls.cert_file"} `
		for _, l := range strings.Split(rec.Body.String(), "\n") {
			if v, ok := strings.CutPrefix(l, name); ok {
				return v
			}
		}
		t.Fatalf("no %s in the scrape:\n%s", name, rec.Body.String())
		return ""
	}
	if v := value(); v != "259200" {
		t.Fatalf("3 days left: %s", v)
	}
	hold(now.Add(365 * 24 * time.Hour))
	if v := value(); v != "3.1536e+07" {
		t.Fatalf("a year left after the swap: %s", v)
	}
	now = now.Add(366 * 24 * time.Hour)
	if v := value(); v != "-86400" {
		t.Fatalf("expired a day ago: %s", v)
	}
}

// TestViolationNodesBounded: the node label of the protocol violations
// counter is the node an engine's claim names, at most a hundred
// distinct valid names; past them "(other)", and a name that is no valid
// node name "(invalid)".
func TestViolationNodesBounded(t *testing.T) {
	m := New(source(nil))
	var vs []recovery.ViolationCount
	for i := range 150 {
		vs = append(vs, recovery.ViolationCount{Kind: recovery.ViolationClaimWithoutNode, Workflow: "orders", Node: fmt.Sprintf("ghost-%d", i), Count: 1})
	}
	vs = append(vs, recovery.ViolationCount{Kind: recovery.ViolationClaimWithoutNode, Workflow: "orders", Node: "<img src=x>", Count: 2},
		recovery.ViolationCount{Kind: recovery.ViolationLateWrite, Workflow: "orders", Count: 3})
	m.ObservePass(health.CheckResult{Violations: vs}, nil)
	m.ObservePass(health.CheckResult{Violations: vs[:1]}, nil)
	c := m.violations
	// 100 nodes, "(other)", "(invalid)", and each kind's "" of orders
	// (exported from the start).
	if n := testutil.CollectAndCount(c); n != 100+2+len(recovery.ViolationKinds) {
		t.Errorf("%d series", n)
	}
	for labels, want := range map[[3]string]float64{
		{recovery.ViolationClaimWithoutNode, "orders", "ghost-0"}:   2,
		{recovery.ViolationClaimWithoutNode, "orders", "ghost-99"}:  1,
		{recovery.ViolationClaimWithoutNode, "orders", "(other)"}:   50,
		{recovery.ViolationClaimWithoutNode, "orders", "(invalid)"}: 2,
		{recovery.ViolationLateWrite, "orders", ""}:                 3,
		{recovery.ViolationInterimWithoutClaim, "orders", ""}:       0,
	} {
		if got := testutil.ToFloat64(c.WithLabelValues(labels[0], labels[1], labels[2])); got != want {
			t.Errorf("%v: %v, want %v", labels, got, want)
		}
	}
}
