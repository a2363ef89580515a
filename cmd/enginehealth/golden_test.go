package main

import (
	"encoding/json"
	"flag"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/jsonx"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

var update = flag.Bool("update", false, "rewrite the golden files of the CLI's output")

// t0 is the fixture's "now": ages and "ago" are measured from it.
var t0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time   { return t0.Add(d) }
func atp(d time.Duration) *time.Time { t := at(d); return &t }
func i64(n int64) *int64             { return &n }
func str(s string) *string           { return &s }

// fixtureDaemon answers every read route with the records of a small
// cluster in trouble: a node Not responding, one in Unexpected shutdown,
// a node in grade ERROR, a paused master, a run, holds, a timeline. The
// records are the real API types, encoded as the daemon encodes them.
func fixtureDaemon(t *testing.T) string {
	t.Helper()
	ns := []apitype.Node{
		{Name: "n1", Incarnation: "n1-7f3a", Hostname: "eng-1", Status: nodes.StatusReady, IsMaster: true, LastActive: at(-time.Second),
			ActiveSince: at(-72 * time.Hour), Version: "v1.4.0", APIAddress: "10.0.0.1:8642", FailoverGrade: nodes.GradeNormal,
			StatusChangedAt: at(-72 * time.Hour), StatusChangedBy: "n1", StatusReason: "start-up recovery done", SecondsSinceActive: 1.2},
		{Name: "n2", Incarnation: "n2-01bc", Hostname: "eng-2", Status: nodes.StatusNotResponding, LastActive: at(-62 * time.Second),
			ActiveSince: at(-48 * time.Hour), Version: "v1.4.0", APIAddress: "10.0.0.2:8642", FailoverGrade: nodes.GradeError,
			GradeChangedAt: atp(-20 * time.Minute), GradeSignature: "orders/reserve/51",
			GradeReason:     "second interruption within failover.window 1h0m0s with a different signature",
			StatusChangedAt: at(-30 * time.Second), StatusChangedBy: "n1",
			StatusReason: "no heartbeat for 62s > not_responding_after 30s, marked by n1 in term 7", SecondsSinceActive: 62.4},
		{Name: "n3", Incarnation: "n3-99d0", PreviousIncarnation: str("n3-5e21"), Hostname: "eng-3", Status: nodes.StatusUnexpectedShutdown,
			LastActive: at(-3 * time.Second), ActiveSince: at(-10 * time.Minute), Version: "v1.3.2", APIAddress: "10.0.0.3:8642",
			FailoverGrade: nodes.GradeWarning, GradeChangedAt: atp(-11 * time.Minute), GradeSignature: "orders/ship/77",
			GradeReason:     "the claim of n3 on orders/ship/77 expired and the instance was repaired",
			StatusChangedAt: at(-10 * time.Minute), StatusChangedBy: "n3",
			StatusReason: "restarted without a clean shutdown (incarnation n3-5e21 was not deregistered)", SecondsSinceActive: 3},
	}
	run := apitype.Run{ID: 42, Term: 7, Master: "n1", Kind: "check", Trigger: "schedule", Scope: "all", ClaimsExpired: 2,
		Planned: 3, Done: 3, Status: "done", StartedAt: at(-14 * time.Second), FinishedAt: atp(-14*time.Second + 38*time.Millisecond)}
	idle := apitype.Run{ID: 43, Term: 7, Master: "n1", Kind: "check", Trigger: "schedule", Scope: "all", Status: "finished",
		StartedAt: at(-2 * time.Second), FinishedAt: atp(-2*time.Second + 5*time.Millisecond)}
	failed := apitype.Run{ID: 41, Term: 7, Master: "n1", Kind: "check", Trigger: "schedule", Scope: "all", Status: "failed",
		StartedAt: at(-29 * time.Second), FinishedAt: atp(-24 * time.Second), Error: "check: statement timeout (database 10.0.0.9:5432)"}
	es := []apitype.Event{
		{ID: 1001, At: at(-30 * time.Second), Kind: audit.KindNodeStatus, Actor: "n1", Term: i64(7), Node: str("n2"),
			FromState: str(string(nodes.StatusReady)), ToState: str(string(nodes.StatusNotResponding)),
			Reason: "no heartbeat for 62s > not_responding_after 30s"},
		{ID: 1002, At: at(-14 * time.Second), Kind: audit.KindClaimExpired, Actor: "n1", Term: i64(7), RunID: i64(42), Node: str("n2"),
			Workflow: str("orders"), Instance: str("51"), Task: str("reserve"), Reason: "claim token 8c1e expired at 2026-11-24T09:59:40Z"},
		{ID: 1003, At: at(-14 * time.Second), Kind: audit.KindRetryScheduled, Actor: "n1", Term: i64(7), RunID: i64(42), Node: str("n2"),
			Workflow: str("orders"), Instance: str("51"), Task: str("reserve"), FromState: str("Reserving"), ToState: str("Reserving"),
			Attempt: new(2), Reason: "interrupted: retry 2 of 3 in 1m0s"},
		{ID: 1004, At: at(-5 * time.Second), Kind: audit.KindManualRetry, Actor: "alice (operator)", Term: i64(7), Via: str("n3"),
			Workflow: str("orders"), Instance: str("77"), Task: str("ship"), FromState: str("ShipFailed"), ToState: str("Reserved"),
			Attempt: new(1), Reason: "manual retry of task ship: customer called"},
	}
	// Paused since 09:55: no sweep is expected (next_sweep null); the
	// last one came before.
	passes := apitype.PassStats{LastSuccess: at(-14 * time.Second), LastFailure: at(-24 * time.Second), LastSweep: at(-6 * time.Minute)}
	pause := apitype.Pause{Paused: true, Since: at(-5 * time.Minute), Actor: "n1 (operator)", Reason: "engine schema migration, back at 14:00", Term: i64(7)}
	st := apitype.Status{
		Node: apitype.SelfState{Name: "n1", Ready: apitype.Ready{Ready: true, Status: string(nodes.StatusReady), Grade: nodes.GradeNormal}},
		Master: &apitype.Leader{Name: "n1", Incarnation: "n1-7f3a", APIAddress: "10.0.0.1:8642", Term: 7, Since: at(-72 * time.Hour),
			TrustedUntil: at(4 * time.Second), Passes: passes, AnsweredBy: "n1"},
		Paused: pause,
		Checks: passes,
		Nodes:  map[string]int{string(nodes.StatusReady): 1, string(nodes.StatusNotResponding): 1, string(nodes.StatusUnexpectedShutdown): 1},
		NotReady: []apitype.NodeState{
			{Name: "n2", Status: string(nodes.StatusNotResponding), Grade: nodes.GradeError, LastActive: at(-62 * time.Second), SecondsSinceActive: 62.4,
				Why: "no heartbeat for 62 s > not_responding_after 30 s, marked by n1 in term 7"},
			{Name: "n3", Status: string(nodes.StatusUnexpectedShutdown), Grade: nodes.GradeWarning, LastActive: at(-3 * time.Second), SecondsSinceActive: 3,
				Why: "restarted without a clean shutdown: enginehealth node ack n3 once looked at"},
		},
		LastRun:   &idle,
		LastActed: &run,
		Holds:     apitype.HoldsSummary{Open: 2, OldestAgeSeconds: new(5400.0)},
		Certificates: []apitype.Certificate{
			{Which: "etcd.tls.cert_file", CN: "enginehealth", NotAfter: at(3*24*time.Hour + 2*time.Hour), ExpiresInSeconds: 266400, ExpiringSoon: true},
			{Which: "etcd.tls.ca_file", CN: "etcd-ca", NotAfter: at(3 * 365 * 24 * time.Hour), ExpiresInSeconds: 3 * 365 * 86400},
		},
		Etcd: &apitype.EtcdState{Error: "etcd at https://10.0.0.7:2379: its certificate is not trusted (etcd.tls.ca_file must hold the CA that signed the members' certificates, etcd.tls.server_name a name they are for): tls: failed to verify certificate: x509: certificate signed by unknown authority (context deadline exceeded)",
			Since: at(-3 * time.Minute), CheckedAt: at(-2 * time.Second)},
		Build: &apitype.Build{Version: "v1.4.0", Commit: "0123456789abcdef0123456789abcdef01234567", CommitTime: at(-48 * time.Hour),
			BuildDate: at(-47 * time.Hour), GoVersion: "go1.26.8", Platform: "linux/amd64", SchemaVersion: 14},
	}
	holds := []apitype.Hold{
		{Workflow: "orders", Instance: "1042", Task: "ship", State: "Shipping", Cause: recovery.CauseInterrupt, Since: at(-90 * time.Minute),
			Attempts: 1, LastNode: str("n2"), Nodes: []string{"n2"}, LastError: str("carrier API: 503 Service Unavailable"),
			Reason: "interrupted: held for an operator"},
		{Workflow: "orders", Instance: "1043", Task: "ship", State: "ShipFailed", Cause: recovery.CauseFailure, Since: at(-40 * time.Minute),
			Attempts: 2, Manual: 1, Nodes: []string{}, Reason: "failed by the engine: held for an operator"},
	}
	one, two := 1, 2
	iv := apitype.InstanceView{Workflow: "orders", Instance: "51", State: str("Reserving"),
		Claim: &apitype.Claim{Node: "n2", Token: "8c1e", ClaimedAt: at(-50 * time.Second), ExpiresAt: at(-20 * time.Second), Expired: true},
		Attempts: []apitype.Attempt{{Task: "reserve", AttemptCount: 2, State: "waiting", InRetry: true, Cause: recovery.CauseInterrupt,
			LeftIn: "Reserving", Since: at(-14 * time.Second), LastAttemptTime: atp(-80 * time.Second), NextAttemptTime: atp(46 * time.Second),
			LastNode: str("n2"), Nodes: []string{"n3", "n2"}, LastReason: "interrupted: retry 2 of 3 in 1m0s"}},
		Events: []apitype.Event{
			{ID: 900, At: at(-11 * time.Minute), Kind: audit.KindRetried, Actor: "n1", Term: i64(7), Node: str("n3"), Workflow: str("orders"),
				Instance: str("51"), Task: str("reserve"), FromState: str("Reserving"), ToState: str("Created"), Attempt: &one,
				Reason: "interrupted: retry 1 of 3 at once"},
			es[2],
		},
	}
	iv.Events[1].Attempt = &two
	stats := []apitype.RetryStats{
		{Workflow: "orders", Task: "reserve", Instances: 40, Retried: 52, Scheduled: 55, Manual: 1, Waiting: 3, Succeeded: 30,
			Exhausted: 2, Failed: 1, Cancelled: 4, HoldsOpen: 0, SuccessRate: new(30.0 / 33)},
		{Workflow: "orders", Task: "ship", Instances: 2, Retried: 1, Scheduled: 1, HoldsOpen: 2},
	}
	detail := apitype.RunDetail{Run: run, Took: 38 * time.Millisecond, Counts: []apitype.EventCount{
		{Workflow: "orders", Task: "reserve", Kind: audit.KindClaimExpired, Count: 2},
		{Workflow: "orders", Task: "reserve", Kind: audit.KindRetryScheduled, To: "Reserving", Count: 2},
		{Workflow: "orders", Task: "ship", Kind: audit.KindRepair, To: "ShipFailed", Count: 1},
	}}

	mux := http.NewServeMux()
	answer := func(v any) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(v)
		}
	}
	mux.HandleFunc("GET /healthz", answer(apitype.Health{Status: "ok", Checks: map[string]string{"heartbeat": "ok", "master": "ok"}}))
	mux.HandleFunc("GET /v1/status", answer(st))
	mux.HandleFunc("GET /v1/nodes", answer(ns))
	mux.HandleFunc("GET /v1/nodes/n2", answer(ns[1]))
	mux.HandleFunc("GET /v1/leader", answer(apitype.Leader{Name: "n1", Term: 7}))
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		page := []apitype.Event{}
		for _, e := range es {
			if e.ID > after {
				page = append(page, e)
			}
		}
		answer(page)(w, r)
	})
	mux.HandleFunc("GET /v1/instances", func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query(); q.Get("workflow") != "orders" || q.Get("id") != "51" {
			http.NotFound(w, r)
			return
		}
		answer(iv)(w, r)
	})
	mux.HandleFunc("GET /v1/holds", answer(holds))
	mux.HandleFunc("GET /v1/runs", answer([]apitype.Run{run, failed}))
	mux.HandleFunc("GET /v1/runs/42", answer(detail))
	mux.HandleFunc("GET /v1/retries/stats", answer(stats))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestGoldenOutput: the table and JSON output of every listing command,
// byte for byte (go test ./cmd/enginehealth -run Golden -update rewrites
// testdata/golden after a deliberate change). The JSON files pin the
// field names scripts read.
func TestGoldenOutput(t *testing.T) {
	clock = func() time.Time { return t0 }
	t.Cleanup(func() { clock = time.Now })
	addr := fixtureDaemon(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"status", []string{"status"}, exitOK},
		{"nodes", []string{"nodes"}, exitOK},
		{"node", []string{"nodes", "n2"}, exitOK},
		{"events", []string{"events"}, exitOK},
		{"timeline", []string{"events", "--instance", "orders/51"}, exitOK},
		{"timeline", []string{"events", "--instance", "51", "--workflow", "orders"}, exitOK},
		{"holds", []string{"holds"}, exitOK},
		{"runs", []string{"runs"}, exitOK},
		{"run", []string{"runs", "42"}, exitOK},
		{"retries", []string{"retries", "stats"}, exitOK},
	} {
		for _, format := range []string{"table", "json"} {
			t.Run(tc.name+"/"+format, func(t *testing.T) {
				out, errOut, code := runCLI(t, append(tc.args, "--api", addr, "-o", format)...)
				if code != tc.code {
					t.Fatalf("exit %d, want %d: %s", code, tc.code, errOut)
				}
				ext := ".txt"
				if format == "json" {
					ext = ".json"
					if !json.Valid([]byte(out)) {
						t.Fatalf("not JSON:\n%s", out)
					}
				}
				golden(t, filepath.Join("testdata", "golden", tc.name+ext), out)
			})
		}
	}
}

// TestGoldenJSONHasEveryField: every field of the API's types is in the
// JSON of the golden files, at every depth, null when it has no value
// (the rule of jsonx): a script can tell a field that is empty from one
// this version does not have.
func TestGoldenJSONHasEveryField(t *testing.T) {
	types := map[string]reflect.Type{
		"status.json":   reflect.TypeFor[statusReport](),
		"nodes.json":    reflect.TypeFor[[]apitype.Node](),
		"node.json":     reflect.TypeFor[apitype.Node](),
		"events.json":   reflect.TypeFor[[]apitype.Event](),
		"timeline.json": reflect.TypeFor[apitype.InstanceView](),
		"holds.json":    reflect.TypeFor[[]apitype.Hold](),
		"runs.json":     reflect.TypeFor[[]apitype.Run](),
		"run.json":      reflect.TypeFor[apitype.RunDetail](),
		"retries.json":  reflect.TypeFor[[]apitype.RetryStats](),
	}
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden JSON files: %v", err)
	}
	nulls := 0
	for _, f := range files {
		typ, ok := types[filepath.Base(f)]
		if !ok {
			t.Errorf("%s: no type to check it against: add it here", f)
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		missing, err := jsonx.Missing(typ, data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(missing) > 0 {
			t.Errorf("%s leaves out %s (run with -update after fixing the type)", f, strings.Join(missing, ", "))
		}
		nulls += strings.Count(string(data), ": null")
	}
	// The fixture has fields without a value (a node never graded, a
	// ready node's reason, a run that did not fail...): they are there.
	if nulls < 10 {
		t.Errorf("%d null fields in the golden JSON: the fixture should have empty ones", nulls)
	}
}

// TestSweepSummary: the sweep line of status, as the master's stats are.
func TestSweepSummary(t *testing.T) {
	for _, c := range []struct {
		p      apitype.PassStats
		paused bool
		want   string
	}{
		{apitype.PassStats{}, false, "none yet in this office; none expected"},
		{apitype.PassStats{NextSweep: at(10 * time.Second)}, false, "none yet in this office; next about 2026-11-24T10:00:10Z (in 10s)"},
		{apitype.PassStats{LastSweep: at(-4 * time.Minute), NextSweep: at(6 * time.Minute)}, false,
			"last 2026-11-24T09:56:00Z (4m0s ago); next about 2026-11-24T10:06:00Z (in 6m0s)"},
		{apitype.PassStats{LastSweep: at(-11 * time.Minute), NextSweep: at(-time.Minute)}, false,
			"last 2026-11-24T09:49:00Z (11m0s ago); next with the next pass"},
		{apitype.PassStats{LastSweep: at(-4 * time.Minute)}, true, "last 2026-11-24T09:56:00Z (4m0s ago); none while paused"},
	} {
		if got := sweepSummary(c.p, c.paused, t0); got != c.want {
			t.Errorf("%+v: %q, want %q", c.p, got, c.want)
		}
	}
}

// TestCertificateLines: the certs lines of status: nothing without a
// watched file, one line when none expires within 7 days, else a
// warning and a line for each that does or has expired.
func TestCertificateLines(t *testing.T) {
	fine := apitype.Certificate{Which: "etcd.tls.ca_file", CN: "etcd-ca", NotAfter: at(900 * 24 * time.Hour), ExpiresInSeconds: 900 * 86400}
	soon := apitype.Certificate{Which: "etcd.tls.cert_file", CN: "sidecar", NotAfter: at(5 * time.Hour), ExpiresInSeconds: 5 * 3600, ExpiringSoon: true}
	expired := apitype.Certificate{Which: "api.tls.cert_file", NotAfter: at(-3 * 24 * time.Hour), ExpiresInSeconds: -3 * 86400, ExpiringSoon: true}
	for _, c := range []struct {
		certs []apitype.Certificate
		want  string
	}{
		{nil, ""},
		{[]apitype.Certificate{fine}, "certs    1 watched, none expiring within 7 days\n"},
		{[]apitype.Certificate{fine, soon, expired}, "certs    WARNING: 2 of 3 expiring within 7 days or expired; renew them\n" +
			"         etcd.tls.cert_file (CN \"sidecar\") expires in 5.0 hours, at 2026-11-24T15:00:00Z\n" +
			"         api.tls.cert_file EXPIRED 3.0 days ago, at 2026-11-21T10:00:00Z\n"},
	} {
		var b strings.Builder
		certificateLines(c.certs, labelled(&b))
		if b.String() != c.want {
			t.Errorf("%d certificates:\n%s\nwant\n%s", len(c.certs), b.String(), c.want)
		}
	}
}

// golden compares got with the file (or rewrites it with -update).
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update after a deliberate change):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestExitCodes: 0 ok, 1 the operation failed, 2 usage or configuration,
// 3 no daemon, 4 refused (a conflict, a mutation no master could take,
// a check the guard stopped).
func TestExitCodes(t *testing.T) {
	problem := func(code int, msg string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(apitype.ErrorBody{Error: msg, Detail: "detail", RequestID: "r9"})
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/pause", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.RefusedHeader, "no-master")
		problem(http.StatusServiceUnavailable, "not the master, and no acting master to forward to")(w, r)
	})
	mux.HandleFunc("POST /v1/holds/retry", problem(http.StatusServiceUnavailable, "internal error"))
	mux.HandleFunc("POST /v1/resume", problem(http.StatusConflict, "not paused"))
	mux.HandleFunc("POST /v1/retry", problem(http.StatusUnauthorized, "a bearer token is required"))
	mux.HandleFunc("POST /v1/nodes/{name}/ack", problem(http.StatusForbidden, "operator grafana has role read: this needs role operate"))
	mux.HandleFunc("POST /v1/holds/fail", problem(http.StatusTooManyRequests, "too many failed authentications from this address: try again in 42s"))
	mux.HandleFunc("GET /v1/nodes", problem(http.StatusServiceUnavailable, "database unavailable"))
	mux.HandleFunc("GET /v1/runs", problem(http.StatusBadRequest, "query parameter limit: want 1..10000"))
	mux.HandleFunc("POST /v1/check", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(apitype.CheckResult{RunID: 5, Disruption: true, DisruptionReason: "3 of 4 nodes look unresponsive"})
	})
	mux.HandleFunc("POST /v1/nodes/{name}/reset-grade", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(api.NodeHeader, "node-c")
		_ = json.NewEncoder(w).Encode(apitype.GradeChange{Name: r.PathValue("name"), From: nodes.GradeError, To: nodes.GradeNormal})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	// A mutation says which node did it (the master it was forwarded to).
	if out, errOut, code := runCLI(t, "node", "reset-grade", "n2", "--api", srv.URL); code != exitOK ||
		out != "node n2: failover grade ERROR -> NORMAL\ndone by node-c\n" {
		t.Errorf("reset-grade: exit %d: %q %s", code, out, errOut)
	}

	// An address nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()

	for _, tc := range []struct {
		args []string
		code int
		say  string
	}{
		{[]string{"version"}, exitOK, ""},
		{[]string{"pause", "--reason", "x"}, exitRefused, "no acting master"},
		{[]string{"resume"}, exitRefused, "not paused"},
		{[]string{"check"}, exitRefused, "disruption guard holds"},
		{[]string{"holds", "retry", "--all"}, exitFailure, "internal error"},
		{[]string{"nodes"}, exitFailure, "database unavailable"},
		{[]string{"retry", "orders", "1"}, exitFailure, "401"},
		{[]string{"retry", "orders/1"}, exitFailure, "401"}, // the same request
		{[]string{"node", "ack", "n2"}, exitFailure, "403: operator grafana has role read: this needs role operate"},
		{[]string{"holds", "fail", "--all"}, exitFailure, "429: too many failed authentications"},
		{[]string{"runs"}, exitFailure, "query parameter limit"},
		{[]string{"runs", "x"}, exitUsage, "positive integer"},
		{[]string{"nodes", "-o", "yaml"}, exitUsage, "want table or json"},
		{[]string{"nodes", "--no-such-flag"}, exitUsage, "unknown flag"},
		{[]string{"node", "bogus"}, exitUsage, `unknown command "bogus"`},
		{[]string{"config", "check", "-c", filepath.Join(t.TempDir(), "missing.yaml")}, exitUsage, "missing.yaml"},
		{[]string{"status", "--api", "not an addr"}, exitUsage, "want host:port"},
		{[]string{"wait", "ready", "-o", "json"}, exitUsage, "unknown shorthand flag"},
		{[]string{"status", "--api", "127.0.0.1:99999"}, exitUsage, "port from 1 to 65535"},
		{[]string{"status", "--api", "http://u:hunter2@127.0.0.1:1"}, exitUsage, "…@127.0.0.1:1"},
		{[]string{"events", "--limit", "0"}, exitUsage, "--limit 0: want 1 to 10000"},
		{[]string{"holds", "--limit", "10001"}, exitUsage, "--limit 10001"},
		{[]string{"events", "--run", "0"}, exitUsage, "--run 0"},
		{[]string{"events", "--instance", "orders/1", "--kind", "paused"}, exitUsage, "it takes no --kind"},
		{[]string{"events", "--kind", "bogus"}, exitUsage, `--kind "bogus" is not an event kind: one of [`},
		{[]string{"events", "--instance", "orders/1", "--workflow", "reports"}, exitUsage, "different workflows"},
		{[]string{"check", "--reason", "x"}, exitUsage, "--reason goes with --force"},
		// An empty name is not "every workflow" (a script's unset variable).
		{[]string{"holds", "fail", "--all", "--workflow", "", "--reason", "x"}, exitUsage, "--workflow: an empty value"},
		{[]string{"holds", "--workflow", " "}, exitUsage, "--workflow: an empty value"},
		{[]string{"recover", "--workflow", ""}, exitUsage, "--workflow: an empty value"},
		{[]string{"recover", "--workflow", "orders", "--workflow", ""}, exitUsage, "--workflow: an empty value"},
		{[]string{"recover", "--dry-run", "--workflow", "orders,"}, exitUsage, "an empty workflow name"},
		{[]string{"events", "--workflow", "", "--node", "n1"}, exitUsage, "--workflow: an empty value"},
		{[]string{"events", "--node", ""}, exitUsage, "--node: an empty value"},
		{[]string{"status", "--api", ""}, exitUsage, "--api: an empty value"},
		{[]string{"nodes", "a/b"}, exitUsage, `invalid node name "a/b"`},
		{[]string{"retry", "orders"}, exitUsage, `instance "orders": want WORKFLOW ID or WORKFLOW/ID`},
		// A single-valued flag given twice: which one counts is not guessed.
		{[]string{"events", "--instance", "orders/1", "--instance", "orders/2"}, exitUsage, `"--instance" flag: given more than once`},
		{[]string{"nodes", "-o", "json", "-o", "table"}, exitUsage, "given more than once"},
		{[]string{"retry", "a", "b", "c"}, exitUsage, "accepts between 1 and 2 arg(s)"},
		{[]string{"retry", "orders", ""}, exitUsage, "an empty workflow or id"},
		{[]string{"retry", "orders/5", "extra"}, exitUsage, "not both"},
		{[]string{"node", "ack", "x y", "--reason", "r"}, exitUsage, `invalid node name "x y"`},
		{[]string{"node", "reset-grade", ".n"}, exitUsage, `invalid node name ".n"`},
		{[]string{"help", "nodes"}, exitOK, ""},
		{[]string{"help", "bogus"}, exitUsage, `no help topic "bogus"`},
		{[]string{"help", "config", "bogus"}, exitUsage, `no help topic "config bogus"`},
		{[]string{"completion", "fish"}, exitOK, ""},
		{[]string{"completion", "bogus"}, exitUsage, `unknown command "bogus"`},
		{[]string{"completion", "bash", "extra"}, exitUsage, `unknown command "extra"`},
	} {
		args := tc.args
		if tc.code != exitUsage && !slices.Contains([]string{"version", "help", "completion"}, tc.args[0]) {
			args = append(args, "--api", srv.URL)
		}
		_, errOut, code := runCLI(t, args...)
		if code != tc.code || !strings.Contains(errOut, tc.say) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d saying %q", tc.args, code, errOut, tc.code, tc.say)
		}
	}
	_, errOut, code := runCLI(t, "nodes", "--api", dead)
	if code != exitUnreachable {
		t.Errorf("nodes at %s: exit %d (%s), want %d", dead, code, errOut, exitUnreachable)
	}
}

// TestEveryCommandHasAnExample: --help of every command a person runs
// shows at least one example, and says something beyond its name.
func TestEveryCommandHasAnExample(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.Runnable() || c.Name() == "help" || c.Name() == "completion" || c.Parent() != nil && c.Parent().Name() == "completion" {
			return
		}
		if c.HasSubCommands() && c.Example == "" {
			// A group (config, node, wait, retries): its help lists the
			// subcommands, each with examples.
			return
		}
		if !strings.Contains(c.Example, "enginehealth "+strings.TrimPrefix(c.CommandPath(), "enginehealth ")) {
			t.Errorf("%s: no example that runs it:\n%s", c.CommandPath(), c.Example)
		}
		if c.Short == "" {
			t.Errorf("%s: no short description", c.CommandPath())
		}
	}
	root := newRoot(&strings.Builder{}, &strings.Builder{})
	root.InitDefaultCompletionCmd()
	walk(root)
}

// TestNodesMarksTheActingMaster: MASTER marks the node that acts (GET
// /v1/leader), not the record that says who took office last; while no
// node acts that record is "(*)", with a line saying why; a daemon that
// does not say leaves the records' mark.
func TestNodesMarksTheActingMaster(t *testing.T) {
	ns := []apitype.Node{{Name: "n1", Status: nodes.StatusReady, IsMaster: true}, {Name: "n2", Status: nodes.StatusReady}}
	for _, tc := range []struct {
		name   string
		leader http.HandlerFunc
		want   []string
	}{
		{"another acts", func(w http.ResponseWriter, _ *http.Request) {
			_ = json.NewEncoder(w).Encode(apitype.Leader{Name: "n2", Term: 8})
		}, []string{"n1    Ready           0.0s", "n2    Ready   *"}},
		{"none acts", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(apitype.ErrorBody{Error: api.ErrNoActingMaster.Error(), Detail: "n1: etcd unreachable"})
		}, []string{"n1    Ready   (*)", "no node acts as master: n1: etcd unreachable; (*) took office last"}},
		{"not said", http.NotFound, []string{"n1    Ready   *"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("GET /v1/nodes", func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(ns) })
			mux.HandleFunc("GET /v1/leader", tc.leader)
			srv := httptest.NewServer(mux)
			defer srv.Close()
			out, errOut, code := runCLI(t, "nodes", "--api", srv.URL)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in:\n%s", w, out)
				}
			}
			if tc.name == "another acts" && strings.Contains(out, "n1    Ready   *") {
				t.Errorf("the record's mark shown beside the acting master:\n%s", out)
			}
			out, _, _ = runCLI(t, "nodes", "--api", srv.URL, "-o", "json")
			var got []apitype.Node
			if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 2 || !got[0].IsMaster {
				t.Errorf("-o json: the records as the API answers them: %v\n%s", err, out)
			}
		})
	}
}
