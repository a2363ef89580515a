package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/certexpiry"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// specPath is the OpenAPI description of the API (docs/openapi.yaml).
const specPath = "../../../docs/openapi.yaml"

// loadSpec loads and validates docs/openapi.yaml.
func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(specPath)
	if err != nil {
		t.Fatalf("load %s: %v", specPath, err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("%s: openapi %s, want 3.1", specPath, doc.OpenAPI)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("%s does not validate: %v", specPath, err)
	}
	return doc
}

// serverRoutes lists the routes NewHandler registers, as "METHOD /path"
// with OpenAPI's path syntax, read from the route table in server.go:
// every mux.HandleFunc whose pattern names a method ("GET /{$}" is "GET
// /", "{id...}" is "{id}"). Patterns without a method are the catch-alls
// that answer 404 and 405.
func serverRoutes(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "server.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "HandleFunc" {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "mux" {
			return true
		}
		lit, ok := call.Args[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			t.Errorf("mux.HandleFunc with a pattern that is not a literal: this test cannot read it")
			return true
		}
		pattern, _ := strconv.Unquote(lit.Value)
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			return true // a catch-all
		}
		path = strings.ReplaceAll(path, "{$}", "")
		path = strings.ReplaceAll(path, "...}", "}")
		routes = append(routes, method+" "+path)
		return true
	})
	slices.Sort(routes)
	return routes
}

// specRoutes lists the operations of doc as "METHOD /path".
func specRoutes(doc *openapi3.T) []string {
	var routes []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			routes = append(routes, method+" "+path)
		}
	}
	slices.Sort(routes)
	return routes
}

// TestOpenAPIRoutes: docs/openapi.yaml describes exactly the routes the
// server registers: a new route without a description fails here.
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadSpec(t)
	code, spec := serverRoutes(t), specRoutes(doc)
	if len(code) < 20 {
		t.Fatalf("only %d routes read from server.go: %v", len(code), code)
	}
	for _, r := range code {
		if !slices.Contains(spec, r) {
			t.Errorf("route %s is served but not in %s", r, specPath)
		}
	}
	for _, r := range spec {
		if !slices.Contains(code, r) {
			t.Errorf("%s describes %s, which the server does not serve", specPath, r)
		}
	}
}

// specOps is the API's seams (node reader and acker, master operations)
// with answers whose every field has a value, or is null where the
// answer allows it: what the document must describe. Names pick
// failures: node "missing" is unknown, "normal" has grade NORMAL already,
// "up" is not in Unexpected shutdown, "db-down" fails as the database
// would; workflow "unknown" is not configured, instance "missing" has no
// row, "claimed" is refused; a pause or resume reason "again" finds the
// switch so already.
type specOps struct {
	// notMaster: the master operations fail with health.ErrNotMaster.
	notMaster bool
}

// downOps is specOps with the database down: every call fails.
type downOps struct{ specOps }

func (downOps) List(context.Context) ([]nodes.Node, error)           { return nil, errDown }
func (downOps) Get(context.Context, string) (nodes.Node, error)      { return nodes.Node{}, errDown }
func (downOps) PauseState(context.Context) (health.Pause, error)     { return health.Pause{}, errDown }
func (downOps) Runs(context.Context, int) ([]recovery.RunRow, error) { return nil, errDown }
func (downOps) Run(context.Context, int64) (recovery.RunDetail, error) {
	return recovery.RunDetail{}, errDown
}
func (downOps) Ack(context.Context, string, audit.By, string) (nodes.Node, error) {
	return nodes.Node{}, errDown
}
func (downOps) ResetGrade(context.Context, string, audit.By, string) (nodes.GradeChange, error) {
	return nodes.GradeChange{}, errDown
}
func (downOps) Check(context.Context, health.CheckRequest) (health.CheckResult, error) {
	return health.CheckResult{}, errDown
}
func (downOps) Pause(context.Context, audit.By, string) (health.Pause, error) {
	return health.Pause{}, errDown
}
func (downOps) Resume(context.Context, audit.By, string) (health.Pause, error) {
	return health.Pause{}, errDown
}
func (downOps) Recover(context.Context, recovery.Scope) (recovery.Result, error) {
	return recovery.Result{}, errDown
}
func (downOps) Holds(context.Context, string, int) ([]recovery.Hold, error) { return nil, errDown }
func (downOps) DecideHolds(context.Context, recovery.HoldDecision) (recovery.HoldResult, error) {
	return recovery.HoldResult{}, errDown
}
func (downOps) Retry(context.Context, recovery.ManualRetry) (recovery.RetryResult, error) {
	return recovery.RetryResult{}, errDown
}
func (downOps) Workflows() []string { return nil }
func (downOps) Violations(context.Context, time.Time, int) ([]recovery.ViolationCount, []recovery.Violation, error) {
	return nil, nil, errDown
}
func (downOps) Parked(context.Context, recovery.ParkedFilter) ([]recovery.WaitingRetry, int64, error) {
	return nil, 0, errDown
}
func (downOps) Instance(context.Context, recovery.Ref, recovery.InstanceParams) (recovery.InstanceView, error) {
	return recovery.InstanceView{}, errDown
}
func (downOps) RetryStats(context.Context) ([]recovery.RetryStats, error) { return nil, errDown }

var (
	t0      = time.Date(2026, 11, 23, 14, 0, 0, 0, time.UTC)
	t1      = t0.Add(90 * time.Second)
	term7   = int64(7)
	nodeB   = "node-b"
	errDown = errors.New("pq: the database system is shutting down")
)

func specNode(name string) nodes.Node {
	prev := "inc-0"
	return nodes.Node{Name: name, Incarnation: "inc-1", PreviousIncarnation: &prev, Hostname: "host-" + name, Status: nodes.StatusReady,
		LastActive: t1, ActiveSince: t0, Version: "1.4.0", APIAddress: "10.0.0.1:8642", FailoverGrade: nodes.GradeError,
		GradeChangedAt: &t1, GradeSignature: "orders/charge/1042", GradeReason: "3 failures", StatusChangedAt: t0,
		StatusChangedBy: "node-a", StatusReason: "heartbeat", SecondsSinceActive: 1.5}
}

func (o *specOps) List(context.Context) ([]nodes.Node, error) {
	// One node with every nullable field null, one with none null.
	return []nodes.Node{specNode("node-a"), {Name: "node-c", Status: "Not responding", FailoverGrade: nodes.GradeNormal}}, nil
}

func (o *specOps) Get(_ context.Context, name string) (nodes.Node, error) {
	switch name {
	case "missing":
		return nodes.Node{}, nodes.ErrNotFound
	case "db-down":
		return nodes.Node{}, errDown
	}
	return specNode(name), nil
}

func (o *specOps) Ack(_ context.Context, name string, _ audit.By, reason string) (nodes.Node, error) {
	switch name {
	case "missing":
		return nodes.Node{}, nodes.ErrNotFound
	case "up":
		return nodes.Node{}, fmt.Errorf("node up is Ready: %w", nodes.ErrNotAcknowledgeable)
	}
	n := specNode(name)
	n.Status, n.StatusReason = "Recovering", reason
	return n, nil
}

func (o *specOps) ResetGrade(_ context.Context, name string, _ audit.By, reason string) (nodes.GradeChange, error) {
	switch name {
	case "missing":
		return nodes.GradeChange{}, nodes.ErrNotFound
	case "normal":
		return nodes.GradeChange{}, nodes.ErrGradeNormal
	}
	return nodes.GradeChange{Name: name, From: nodes.GradeError, To: nodes.GradeNormal,
		Signature: &nodes.Signature{Workflow: "orders", Task: "charge", Instance: "1042"}, Reason: reason}, nil
}

func specTasks() []recovery.TaskResult {
	return []recovery.TaskResult{
		{Workflow: "orders", Task: "charge", From: "CHARGING", To: "CHARGE_FAILED", Effect: "fail", Planned: 2,
			Plan: []recovery.PlannedEffect{{Instances: 2, To: "CHARGE_FAILED", Effect: "fail"}}, Done: 2, Failed: 2},
		{Workflow: "orders", Task: "ship", From: "SHIPPING", Effect: "hold", Planned: 1,
			Plan: []recovery.PlannedEffect{{Instances: 1, Effect: "hold"}}, Done: 1, Held: 1},
	}
}

func (o *specOps) Check(_ context.Context, req health.CheckRequest) (health.CheckResult, error) {
	if o.notMaster {
		return health.CheckResult{}, health.ErrNotMaster
	}
	return health.CheckResult{RunID: 12, Disruption: false, Forced: req.Force, Paused: nil, Threshold: 30 * time.Second,
		NotResponding: []nodes.Change{{Name: "node-c", From: "Ready", To: "Not responding"}}, Revived: []nodes.Change{}, Forgotten: nil,
		Recovery: recovery.Result{RunID: 12, ClaimsExpired: 3, Sweep: true, Tasks: specTasks()},
		Failures: []recovery.TaskResult{}, Retries: recovery.DueResult{Retried: 1},
		Settled: []recovery.SettleCounts{{Workflow: "orders", Task: "charge", Succeeded: 1}},
		Grades:  []nodes.GradeChange{{Name: "node-c", From: nodes.GradeNormal, To: nodes.GradeError, Reason: "3 failures"}},
		Stale:   []string{"node-d"}, Took: 42 * time.Millisecond}, nil
}

func (o *specOps) Pause(_ context.Context, by audit.By, reason string) (health.Pause, error) {
	if o.notMaster {
		return health.Pause{}, health.ErrNotMaster
	}
	p := health.Pause{Paused: true, Since: t0, Actor: by.Actor, Reason: reason, Term: &term7}
	if reason == "again" {
		return p, health.ErrPaused
	}
	return p, nil
}

func (o *specOps) Resume(_ context.Context, by audit.By, reason string) (health.Pause, error) {
	if o.notMaster {
		return health.Pause{}, health.ErrNotMaster
	}
	if reason == "again" {
		return health.Pause{}, health.ErrNotPaused
	}
	return health.Pause{Since: t1, Actor: by.Actor, Reason: reason, Term: &term7}, nil
}

func (o *specOps) PauseState(context.Context) (health.Pause, error) {
	return health.Pause{Since: t0}, nil // never paused: actor, reason and term null
}

func scopeErr(wfs []string) error {
	if slices.Contains(wfs, "unknown") {
		return fmt.Errorf("%w: no workflow named unknown", recovery.ErrScope)
	}
	return nil
}

func (o *specOps) Recover(_ context.Context, sc recovery.Scope) (recovery.Result, error) {
	if err := scopeErr(sc.Workflows); err != nil {
		return recovery.Result{}, err
	}
	if o.notMaster {
		return recovery.Result{}, health.ErrNotMaster
	}
	return recovery.Result{RunID: 13, ClaimsExpired: 1, Tasks: specTasks(), SkippedLocked: true}, nil
}

func (o *specOps) Plan(_ context.Context, sc recovery.Scope) ([]recovery.WorkflowPlan, error) {
	if err := scopeErr(sc.Workflows); err != nil {
		return nil, err
	}
	return []recovery.WorkflowPlan{{Workflow: "orders", ClaimsToExpire: 1, Tasks: specTasks()}}, nil
}

func specRuns() []recovery.RunRow {
	resumed := int64(9)
	return []recovery.RunRow{
		{ID: 11, Term: 7, Master: "node-a", Kind: "check", Trigger: "schedule", Scope: `{"workflows":[]}`, ClaimsExpired: 1,
			Planned: 3, Done: 2, Status: "failed", StartedAt: t0, FinishedAt: &t1, Error: "database unavailable", ResumedFrom: &resumed},
		{ID: 10, Term: 7, Master: "node-a", Kind: "check", Trigger: "schedule", Scope: `{}`, Status: "running", StartedAt: t0},
	}
}

func (o *specOps) Runs(context.Context, int) ([]recovery.RunRow, error) { return specRuns(), nil }
func (o *specOps) ActedRuns(context.Context, int) ([]recovery.RunRow, error) {
	return specRuns()[:1], nil
}

func (o *specOps) Holds(_ context.Context, wf string, _ int) ([]recovery.Hold, error) {
	if wf == "unknown" {
		return nil, fmt.Errorf("%w: no workflow named unknown", recovery.ErrScope)
	}
	return []recovery.Hold{
		{Workflow: "orders", Instance: "1042", Task: "ship", State: "SHIPPING", Cause: "engine_fault", Since: t0, Attempts: 3, Manual: 1,
			LastNode: &nodeB, Nodes: []string{"node-b", "node-c"}, LastError: new("timeout"), Reason: "max attempts"},
		{Workflow: "orders", Instance: "1043", Task: "ship", State: "SHIPPING", Cause: "node_lost", Since: t0},
	}, nil
}

func (o *specOps) Waiting(context.Context, string, int) ([]recovery.WaitingRetry, error) {
	return []recovery.WaitingRetry{{Hold: recovery.Hold{Workflow: "orders", Instance: "1044", Task: "charge", Since: t0},
		Due: t1, DueInSeconds: 30, MaxAttempts: 5}}, nil
}

func (o *specOps) DecideHolds(_ context.Context, d recovery.HoldDecision) (recovery.HoldResult, error) {
	if d.Workflow == "unknown" {
		return recovery.HoldResult{}, fmt.Errorf("%w: no workflow named unknown", recovery.ErrScope)
	}
	if o.notMaster {
		return recovery.HoldResult{}, health.ErrNotMaster
	}
	if d.Reason == "race" {
		return recovery.HoldResult{}, recovery.ErrConflict
	}
	return recovery.HoldResult{Action: d.Action, Decided: 1,
		Cancelled: []recovery.HoldOutcome{{Ref: recovery.Ref{Workflow: "orders", Instance: "1043"}, Task: "ship", Reason: "instance completed"}},
		NotHeld:   []recovery.Ref{{Workflow: "orders", Instance: "9"}}}, nil
}

func (o *specOps) Retry(_ context.Context, m recovery.ManualRetry) (recovery.RetryResult, error) {
	switch {
	case m.Workflow == "unknown":
		return recovery.RetryResult{}, fmt.Errorf("%w: no workflow named unknown", recovery.ErrScope)
	case o.notMaster:
		return recovery.RetryResult{}, health.ErrNotMaster
	case m.Instance == "missing":
		return recovery.RetryResult{}, fmt.Errorf("%w: orders/missing", recovery.ErrNoInstance)
	case m.Instance == "claimed":
		return recovery.RetryResult{}, fmt.Errorf("%w: the instance is claimed by node-b", recovery.ErrRefused)
	case m.Instance == "db-down":
		return recovery.RetryResult{}, errDown
	}
	return recovery.RetryResult{Ref: m.Ref, Task: "charge", From: "CHARGE_FAILED", To: "CHARGING",
		Manual: 1, Attempts: 3, Replaced: "scheduled retry"}, nil
}

func (o *specOps) Workflows() []string { return []string{"orders"} }
func (o *specOps) Violations(context.Context, time.Time, int) ([]recovery.ViolationCount, []recovery.Violation, error) {
	return nil, nil, nil
}
func (o *specOps) Parked(context.Context, recovery.ParkedFilter) ([]recovery.WaitingRetry, int64, error) {
	return nil, 0, nil
}

func (o *specOps) Instance(_ context.Context, ref recovery.Ref, _ recovery.InstanceParams) (recovery.InstanceView, error) {
	switch {
	case ref.Workflow == "unknown":
		return recovery.InstanceView{}, fmt.Errorf("%w: no workflow named unknown", recovery.ErrScope)
	case ref.Instance == "missing":
		return recovery.InstanceView{}, fmt.Errorf("%w: orders/missing", recovery.ErrNoInstance)
	case ref.Instance == "gone":
		// The row is gone: no state, no claim; attempts and events left.
		return recovery.InstanceView{Workflow: ref.Workflow, Instance: ref.Instance, Attempts: []recovery.AttemptView{},
			Events: specEvents()[1:]}, nil
	}
	state := "CHARGING"
	return recovery.InstanceView{Workflow: ref.Workflow, Instance: ref.Instance, State: &state,
		Claim: &claims.ClaimRow{Node: "node-b", Token: "tok-1", ClaimedAt: t0, ExpiresAt: t1, Expired: true},
		Attempts: []recovery.AttemptView{
			{Task: "charge", AttemptCount: 2, Manual: 1, State: "waiting", InRetry: true, Cause: "engine_fault", LeftIn: "CHARGING",
				Since: t0, LastAttemptTime: &t0, NextAttemptTime: &t1, LastNode: &nodeB, Nodes: []string{"node-b"},
				LastReason: "retry", LastError: new("timeout")},
			{Task: "ship", State: "done", Since: t0},
		},
		Events: specEvents(), Truncated: true}, nil
}

func (o *specOps) RetryStats(context.Context) ([]recovery.RetryStats, error) {
	rate := 0.5
	return []recovery.RetryStats{
		{Workflow: "orders", Task: "charge", Instances: 4, Retried: 2, Succeeded: 1, Failed: 1, SuccessRate: &rate},
		{Workflow: "orders", Task: "ship", Instances: 1},
	}, nil
}

func (o *specOps) HoldsOpen(context.Context) (int64, time.Duration, error) { return 2, time.Hour, nil }

func (o *specOps) Run(_ context.Context, id int64) (recovery.RunDetail, error) {
	if id == 404 {
		return recovery.RunDetail{}, recovery.ErrNoRun
	}
	return recovery.RunDetail{RunRow: specRuns()[0], Took: 90 * time.Second, Counts: []audit.Count{
		{Workflow: "orders", Task: "charge", Kind: "instance_failed", To: "CHARGE_FAILED", Count: 2},
		{Workflow: "orders", Kind: "claim_expired", Count: 1},
	}}, nil
}

func specEvents() []audit.Event {
	wf, inst, task, from, to, n := "orders", "1042", "charge", "CHARGING", "CHARGE_FAILED", 2
	run := int64(11)
	return []audit.Event{
		{ID: 1, At: t0, Kind: "node_ack", Actor: "alice (operator)", Reason: "checked", Node: &nodeB},
		{ID: 2, At: t1, Kind: "instance_failed", Actor: "master node-a", Term: &term7, RunID: &run, Workflow: &wf, Instance: &inst,
			Task: &task, FromState: &from, ToState: &to, Attempt: &n, Reason: "max attempts", Via: &nodeB},
	}
}

func specEventsFor(_ context.Context, p audit.ListParams) ([]audit.Event, error) {
	if p.Node == "db-down" {
		return nil, errDown
	}
	if p.AfterID >= 2 {
		return []audit.Event{}, nil
	}
	return specEvents(), nil
}

// specServer serves NewHandler with cfg on a real listener, through
// NewServer and NewListener, as the daemon does; it returns its address.
func specServer(t *testing.T, cfg Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Log = log
	srv := NewServer(NewHandler(cfg), log, ServerOptions{})
	go func() { _ = srv.Serve(NewListener(ln, log, ServerOptions{})) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// specCase is one request and the status it must be answered.
type specCase struct {
	name   string
	server string // which server: a, b, e, off, lock
	method string
	target string
	token  string // "" none; else sent as a bearer token
	ctype  string // Content-Type; application/json when a body is given
	body   string
	code   int
	// offSpec: the request is outside the document on purpose (a
	// missing token, a bad parameter or body): its validation must fail,
	// and its answer is validated all the same. noRoute: no operation of
	// the document takes it (404, 405); its body is validated against
	// the ErrorBody schema.
	offSpec, noRoute bool
	// want: in the body, when set.
	want string
	// setup runs before the request; its result after.
	setup func() func()
}

// TestOpenAPI drives the real handler, on a real server, with a request
// for each answer docs/openapi.yaml documents (success and error), and
// validates each request and answer against it: a field added, renamed
// or sent null where the document does not say so fails here.
func TestOpenAPI(t *testing.T) {
	doc := loadSpec(t)
	// The status page's HTML, as text (openapi3filter decodes JSON and
	// plain text only).
	openapi3filter.RegisterBodyDecoder("text/html", func(r io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(r)
		return string(b), err
	})
	defer openapi3filter.UnregisterBodyDecoder("text/html")
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	tokens := mustTokens(
		Operator{Name: "alice", SHA256: sha256.Sum256([]byte("tok")), Role: RoleOperate},
		Operator{Name: "rita", SHA256: sha256.Sum256([]byte("rtok")), Role: RoleRead})
	var sick atomic.Bool
	var leaderAddr atomic.Value
	ready := func() apitype.Ready {
		if sick.Load() {
			return apitype.Ready{Status: "Unexpected shutdown", Grade: nodes.GradeNormal, Reason: "heartbeat failing: last successful heartbeat 1.6s ago"}
		}
		return apitype.Ready{Ready: true, Status: string(nodes.StatusReady), Grade: nodes.GradeNormal}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "enginehealth_is_master", Help: "1 while this node acts as master."}))
	base := func(self string, ops *specOps) Config {
		return Config{Self: self, Nodes: ops, Acker: ops, Ops: ops, Auth: tokens, Ready: ready,
			Events: specEventsFor, LastEventID: func(context.Context) (int64, error) { return 2, nil },
			Live: []Check{{Name: "heartbeat", Check: func() error {
				if sick.Load() {
					return errors.New("no successful heartbeat for 3 intervals")
				}
				return nil
			}}},
			Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
			Timeout: 200 * time.Millisecond,
		}
	}
	notActing := func() (apitype.Leader, error) { return apitype.Leader{}, errors.New("not in office") }

	// a: the acting master; reads need a token (api.auth_reads), with
	// certificates, etcd and build known.
	cfgA := base("node-a", &specOps{})
	cfgA.AuthReads = true
	cfgA.Local = func() (apitype.Leader, error) {
		return apitype.Leader{Name: "node-a", Incarnation: "inc-1", APIAddress: leaderAddr.Load().(string), Term: 7, Since: t0, TrustedUntil: t1,
			Passes: apitype.PassStats{LastSuccess: t1, LastFailure: t0, ConsecutiveFailures: 0, LastError: "timed out",
				LastSweep: t0, NextSweep: t1}}, nil
	}
	cfgA.Certificates = func() []certexpiry.Expiry {
		return []certexpiry.Expiry{{Which: "etcd.tls.cert_file", CN: "node-a", NotAfter: t1, Left: 3 * 24 * time.Hour},
			{Which: "etcd.tls.ca_file", NotAfter: t0, Left: -time.Hour}}
	}
	cfgA.Etcd = func() apitype.EtcdState {
		return apitype.EtcdState{Reachable: false, Error: "etcd unreachable", Since: t0, CheckedAt: t1}
	}
	cfgA.Build = &apitype.Build{Version: "1.4.0", Commit: "abc123-dirty", CommitTime: t0, BuildDate: t1, GoVersion: "go1.26.0",
		Platform: "linux/amd64", SchemaVersion: 12}
	addrA := specServer(t, cfgA)
	leaderAddr.Store(addrA)

	// b: not the master; it finds a and forwards mutations to it. Reads
	// are open.
	cfgB := base("node-b", &specOps{notMaster: true})
	cfgB.Local = notActing
	cfgB.Candidates = func(context.Context) ([]leader.Candidate, error) {
		return []leader.Candidate{{Name: "node-a", Incarnation: "inc-1", APIAddress: addrA}}, nil
	}
	// e: not the master, and no node acts (and no etcd, build or
	// certificate said).
	cfgE := base("node-e", &specOps{notMaster: true})
	cfgE.Local = notActing
	cfgE.Metrics = nil
	// off: no operator configured; lock: locks addresses out.
	cfgOff := base("node-f", &specOps{})
	cfgOff.Auth, cfgOff.Local = nil, notActing
	cfgLock := base("node-g", &specOps{})
	cfgLock.Local, cfgLock.AuthReads = notActing, true
	// down: the database does not answer (every call fails); one
	// database slot, which a scrape holds while block is open.
	down := &downOps{}
	cfgDown := base("node-h", &down.specOps)
	cfgDown.Nodes, cfgDown.Acker, cfgDown.Ops = down, down, down
	cfgDown.Local = notActing
	cfgDown.Candidates = func(context.Context) ([]leader.Candidate, error) { return nil, errDown }
	cfgDown.Events = func(context.Context, audit.ListParams) ([]audit.Event, error) { return nil, errDown }
	cfgDown.MaxDBRequests = 1
	// gate: a scrape says it holds the slot (entered), then waits for
	// release.
	type gate struct{ entered, release chan struct{} }
	var block atomic.Pointer[gate]
	cfgDown.Metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g := block.Load(); g != nil {
			close(g.entered)
			<-g.release
		}
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	})
	addrs := map[string]string{"a": addrA, "b": specServer(t, cfgB), "e": specServer(t, cfgE),
		"off": specServer(t, cfgOff), "lock": specServer(t, cfgLock), "down": specServer(t, cfgDown)}

	// A dead address: the master a names when a forward must fail.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()

	unwell := func() func() { sick.Store(true); return func() { sick.Store(false) } }
	deadMaster := func() func() { leaderAddr.Store(deadAddr); return func() { leaderAddr.Store(addrA) } }
	lockOut := func() func() {
		for range 10 {
			req, _ := http.NewRequest("POST", "http://"+addrs["lock"]+"/v1/pause", strings.NewReader(`{"reason":"x"}`))
			req.Header.Set("Authorization", "Bearer wrong")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		return func() {}
	}
	// busy: a scrape holds the down node's only database slot.
	busy := func() func() {
		g := &gate{entered: make(chan struct{}), release: make(chan struct{})}
		block.Store(g)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := http.Get("http://" + addrs["down"] + "/metrics"); err == nil {
				resp.Body.Close()
			}
		}()
		<-g.entered // the slot is held
		return func() { block.Store(nil); close(g.release); <-done }
	}
	big := `{"reason":"` + strings.Repeat("x", 70<<10) + `"}`

	cases := []specCase{
		// Probes.
		{name: "healthz", server: "a", method: "GET", target: "/healthz", code: 200},
		{name: "healthz unhealthy", server: "a", method: "GET", target: "/healthz", code: 503, setup: unwell},
		{name: "healthz bad path", server: "a", method: "GET", target: "/healthz?a=1&a=2", code: 400},
		{name: "readyz", server: "a", method: "GET", target: "/readyz", code: 200},
		{name: "readyz not ready", server: "a", method: "GET", target: "/readyz", code: 503, setup: unwell},
		{name: "readyz query twice", server: "a", method: "GET", target: "/readyz?x=1&x=2", code: 400},
		{name: "metrics", server: "a", method: "GET", target: "/metrics", code: 200, want: "enginehealth_is_master"},
		{name: "metrics query twice", server: "a", method: "GET", target: "/metrics?x=1&x=2", code: 400},
		// The page.
		{name: "page", server: "a", method: "GET", target: "/", token: "rtok", code: 200, want: "<html"},
		{name: "page without a token", server: "a", method: "GET", target: "/", code: 401},
		{name: "page of a node without a master", server: "e", method: "GET", target: "/", code: 200},
		{name: "page unknown parameter", server: "b", method: "GET", target: "/?x=1", code: 400, offSpec: true},
		// The leader.
		{name: "leader", server: "a", method: "GET", target: "/v1/leader", token: "rtok", code: 200},
		{name: "leader local", server: "a", method: "GET", target: "/v1/leader?local=true", code: 200},
		{name: "leader asked of another node", server: "b", method: "GET", target: "/v1/leader", code: 200},
		{name: "leader local not the master", server: "b", method: "GET", target: "/v1/leader?local=true", code: 503},
		{name: "leader none acts", server: "e", method: "GET", target: "/v1/leader", code: 503},
		{name: "leader local=yes", server: "a", method: "GET", target: "/v1/leader?local=yes", token: "rtok", code: 400, offSpec: true},
		{name: "leader without a token", server: "a", method: "GET", target: "/v1/leader", code: 401},
		{name: "leader wrong token", server: "a", method: "GET", target: "/v1/leader", token: "nope", code: 401},
		// Status.
		{name: "status", server: "a", method: "GET", target: "/v1/status", token: "rtok", code: 200},
		{name: "status through another node", server: "b", method: "GET", target: "/v1/status", code: 200},
		{name: "status without a master", server: "e", method: "GET", target: "/v1/status", code: 200},
		{name: "status unknown parameter", server: "b", method: "GET", target: "/v1/status?verbose=1", code: 400, offSpec: true},
		{name: "status without a token", server: "a", method: "GET", target: "/v1/status", code: 401},
		// Nodes.
		{name: "nodes", server: "a", method: "GET", target: "/v1/nodes", token: "tok", code: 200},
		{name: "nodes without a token", server: "a", method: "GET", target: "/v1/nodes", code: 401},
		{name: "node", server: "b", method: "GET", target: "/v1/nodes/node-a", code: 200},
		{name: "node unknown", server: "b", method: "GET", target: "/v1/nodes/missing", code: 404},
		{name: "node invalid name", server: "b", method: "GET", target: "/v1/nodes/-x", code: 400, offSpec: true},
		{name: "node database down", server: "b", method: "GET", target: "/v1/nodes/db-down", code: 503},
		{name: "node without a token", server: "a", method: "GET", target: "/v1/nodes/node-a", code: 401},
		{name: "ack", server: "a", method: "POST", target: "/v1/nodes/node-c/ack", token: "tok", body: `{"reason":"rebooted"}`, code: 200},
		{name: "ack without a body", server: "a", method: "POST", target: "/v1/nodes/node-c/ack", token: "tok", code: 200},
		{name: "ack without a token", server: "a", method: "POST", target: "/v1/nodes/node-c/ack", code: 401, offSpec: true},
		{name: "ack with a read token", server: "a", method: "POST", target: "/v1/nodes/node-c/ack", token: "rtok", code: 403},
		{name: "ack mutations off", server: "off", method: "POST", target: "/v1/nodes/node-c/ack", token: "tok", code: 403},
		{name: "ack unknown node", server: "a", method: "POST", target: "/v1/nodes/missing/ack", token: "tok", code: 404},
		{name: "ack not acknowledgeable", server: "a", method: "POST", target: "/v1/nodes/up/ack", token: "tok", code: 409},
		{name: "ack bad body", server: "a", method: "POST", target: "/v1/nodes/node-c/ack", token: "tok", body: `{"reason":1}`, code: 400, offSpec: true},
		{name: "ack unknown field", server: "a", method: "POST", target: "/v1/nodes/node-c/ack", token: "tok", body: `{"why":"x"}`, code: 400, offSpec: true},
		{name: "ack too large", server: "a", method: "POST", target: "/v1/nodes/node-c/ack", token: "tok", body: big, code: 413, offSpec: true},
		{name: "ack not JSON", server: "a", method: "POST", target: "/v1/nodes/node-c/ack", token: "tok", ctype: "text/plain", body: `reason`, code: 415, offSpec: true},
		{name: "ack locked out", server: "lock", method: "POST", target: "/v1/nodes/node-c/ack", token: "tok", code: 429, setup: lockOut},
		{name: "reset-grade", server: "a", method: "POST", target: "/v1/nodes/node-c/reset-grade", token: "tok", body: `{"reason":"disk replaced"}`, code: 200},
		{name: "reset-grade NORMAL already", server: "a", method: "POST", target: "/v1/nodes/normal/reset-grade", token: "tok", code: 409},
		{name: "reset-grade unknown node", server: "a", method: "POST", target: "/v1/nodes/missing/reset-grade", token: "tok", code: 404},
		{name: "reset-grade reason with a newline", server: "a", method: "POST", target: "/v1/nodes/node-c/reset-grade", token: "tok", body: `{"reason":"a\nb"}`, code: 400},
		{name: "reset-grade with a read token", server: "a", method: "POST", target: "/v1/nodes/node-c/reset-grade", token: "rtok", code: 403},
		{name: "reset-grade without a token", server: "a", method: "POST", target: "/v1/nodes/node-c/reset-grade", code: 401, offSpec: true},
		// Check, pause, resume, recovery: on the master, or forwarded.
		{name: "check", server: "a", method: "POST", target: "/v1/check", token: "tok", code: 200},
		{name: "check forced", server: "a", method: "POST", target: "/v1/check", token: "tok", body: `{"force":true,"reason":"dc2 is gone"}`, code: 200},
		{name: "check forwarded", server: "b", method: "POST", target: "/v1/check", token: "tok", code: 200},
		{name: "check forced without a reason", server: "a", method: "POST", target: "/v1/check", token: "tok", body: `{"force":true}`, code: 400},
		{name: "check no master", server: "e", method: "POST", target: "/v1/check", token: "tok", code: 503},
		{name: "check master unreachable", server: "b", method: "POST", target: "/v1/check", token: "tok", code: 502, setup: deadMaster},
		{name: "check with a read token", server: "a", method: "POST", target: "/v1/check", token: "rtok", code: 403},
		{name: "check without a token", server: "a", method: "POST", target: "/v1/check", code: 401, offSpec: true},
		{name: "pause", server: "a", method: "POST", target: "/v1/pause", token: "tok", body: `{"reason":"maintenance"}`, code: 200},
		{name: "pause forwarded", server: "b", method: "POST", target: "/v1/pause", token: "tok", body: `{"reason":"maintenance"}`, code: 200},
		{name: "pause paused already", server: "a", method: "POST", target: "/v1/pause", token: "tok", body: `{"reason":"again"}`, code: 409},
		{name: "pause without a reason", server: "a", method: "POST", target: "/v1/pause", token: "tok", body: `{}`, code: 400},
		{name: "pause no master", server: "e", method: "POST", target: "/v1/pause", token: "tok", body: `{"reason":"x"}`, code: 503},
		{name: "pause unknown parameter", server: "a", method: "POST", target: "/v1/pause?force=1", token: "tok", body: `{"reason":"x"}`, code: 400, offSpec: true},
		{name: "resume", server: "a", method: "POST", target: "/v1/resume", token: "tok", code: 200},
		{name: "resume not paused", server: "a", method: "POST", target: "/v1/resume", token: "tok", body: `{"reason":"again"}`, code: 409},
		{name: "resume mutations off", server: "off", method: "POST", target: "/v1/resume", token: "tok", code: 403},
		{name: "recovery", server: "a", method: "POST", target: "/v1/recovery", token: "tok", body: `{"workflows":["orders"]}`, code: 200},
		{name: "recovery dry run", server: "a", method: "POST", target: "/v1/recovery", token: "tok", body: `{"dry_run":true}`, code: 200},
		{name: "recovery forwarded", server: "b", method: "POST", target: "/v1/recovery", token: "tok", code: 200},
		{name: "recovery unknown workflow", server: "a", method: "POST", target: "/v1/recovery", token: "tok", body: `{"workflows":["unknown"]}`, code: 400},
		{name: "recovery trailing data", server: "a", method: "POST", target: "/v1/recovery", token: "tok", body: `null`, code: 400, offSpec: true},
		// Runs and events.
		{name: "runs", server: "b", method: "GET", target: "/v1/runs?limit=5", code: 200},
		{name: "runs limit 0", server: "b", method: "GET", target: "/v1/runs?limit=0", code: 400, offSpec: true},
		{name: "runs misspelt parameter", server: "b", method: "GET", target: "/v1/runs?Limit=5", code: 400, offSpec: true},
		{name: "runs without a token", server: "a", method: "GET", target: "/v1/runs", code: 401},
		{name: "run", server: "b", method: "GET", target: "/v1/runs/11", code: 200},
		{name: "run unknown", server: "b", method: "GET", target: "/v1/runs/404", code: 404},
		{name: "run not canonical", server: "b", method: "GET", target: "/v1/runs/011", code: 400, offSpec: true},
		{name: "events", server: "b", method: "GET", target: "/v1/events?after=0&limit=10&node=node-b&workflow=orders&instance=1042&kind=node_ack&run=11&since=2026-11-23T14:00:00Z&until=2026-11-24T00:00:00Z", code: 200},
		{name: "events empty page", server: "b", method: "GET", target: "/v1/events?after=2", code: 200},
		{name: "events unknown kind", server: "b", method: "GET", target: "/v1/events?kind=nosuchkind", code: 400},
		{name: "events bad time", server: "b", method: "GET", target: "/v1/events?since=yesterday", code: 400, offSpec: true},
		{name: "events database down", server: "b", method: "GET", target: "/v1/events?node=db-down", code: 503},
		// Holds and retries.
		{name: "holds", server: "b", method: "GET", target: "/v1/holds?workflow=orders&limit=10", code: 200},
		{name: "holds unknown workflow", server: "b", method: "GET", target: "/v1/holds?workflow=unknown", code: 404},
		{name: "holds empty workflow", server: "b", method: "GET", target: "/v1/holds?workflow=", code: 400, offSpec: true},
		{name: "holds retry", server: "a", method: "POST", target: "/v1/holds/retry", token: "tok", body: `{"instances":[{"workflow":"orders","instance":"1042"}],"reason":"fixed"}`, code: 200},
		{name: "holds retry forwarded", server: "b", method: "POST", target: "/v1/holds/retry", token: "tok", body: `{"all":true,"workflow":"orders"}`, code: 200},
		{name: "holds retry conflict", server: "a", method: "POST", target: "/v1/holds/retry", token: "tok", body: `{"all":true,"reason":"race"}`, code: 409},
		{name: "holds fail", server: "a", method: "POST", target: "/v1/holds/fail", token: "tok", body: `{"all":true}`, code: 200},
		{name: "holds fail conflict", server: "a", method: "POST", target: "/v1/holds/fail", token: "tok", body: `{"all":true,"reason":"race"}`, code: 409},
		{name: "holds fail unknown workflow", server: "a", method: "POST", target: "/v1/holds/fail", token: "tok", body: `{"all":true,"workflow":"unknown"}`, code: 400},
		{name: "holds fail neither", server: "a", method: "POST", target: "/v1/holds/fail", token: "tok", body: `{"reason":"x"}`, code: 400},
		{name: "holds fail without a token", server: "a", method: "POST", target: "/v1/holds/fail", body: `{"all":true}`, code: 401, offSpec: true},
		{name: "retry", server: "a", method: "POST", target: "/v1/retry", token: "tok", body: `{"workflow":"orders","instance":"1042","task":"charge","reason":"fixed"}`, code: 200},
		{name: "retry forwarded", server: "b", method: "POST", target: "/v1/retry", token: "tok", body: `{"workflow":"orders","instance":"1042"}`, code: 200},
		{name: "retry no instance", server: "a", method: "POST", target: "/v1/retry", token: "tok", body: `{"workflow":"orders","instance":"missing"}`, code: 404},
		{name: "retry refused", server: "a", method: "POST", target: "/v1/retry", token: "tok", body: `{"workflow":"orders","instance":"claimed"}`, code: 409},
		{name: "retry unknown workflow", server: "a", method: "POST", target: "/v1/retry", token: "tok", body: `{"workflow":"unknown","instance":"1"}`, code: 400},
		{name: "retry database down", server: "a", method: "POST", target: "/v1/retry", token: "tok", body: `{"workflow":"orders","instance":"db-down"}`, code: 503},
		{name: "retry without an instance", server: "a", method: "POST", target: "/v1/retry", token: "tok", body: `{"workflow":"orders"}`, code: 400, offSpec: true},
		// Instances.
		{name: "instance", server: "b", method: "GET", target: "/v1/instances/orders/1042?limit=10", code: 200},
		{name: "instance whose row is gone", server: "b", method: "GET", target: "/v1/instances/orders/gone", code: 200},
		{name: "instance unknown workflow", server: "b", method: "GET", target: "/v1/instances/unknown/1", code: 404},
		{name: "instance missing", server: "b", method: "GET", target: "/v1/instances/orders/missing", code: 404},
		{name: "instance by query", server: "b", method: "GET", target: "/v1/instances?workflow=orders&id=eu%2F7", code: 200},
		{name: "instance newest first, paged back", server: "b", method: "GET", target: "/v1/instances?workflow=orders&id=1042&order=newest&before=90&limit=5", code: 200},
		{name: "instance unknown order", server: "b", method: "GET", target: "/v1/instances/orders/1042?order=random", code: 400, offSpec: true},
		{name: "instance before without order=newest", server: "b", method: "GET", target: "/v1/instances/orders/1042?before=9", code: 400},
		{name: "instance before 0", server: "b", method: "GET", target: "/v1/instances/orders/1042?order=newest&before=0", code: 400, offSpec: true},
		{name: "instance by query missing", server: "b", method: "GET", target: "/v1/instances?workflow=orders&id=missing", code: 404},
		{name: "instance by query without an id", server: "b", method: "GET", target: "/v1/instances?workflow=orders", code: 400, offSpec: true},
		{name: "instance without a token", server: "a", method: "GET", target: "/v1/instances?workflow=orders&id=1", code: 401},
		{name: "retry stats", server: "b", method: "GET", target: "/v1/retries/stats", code: 200},
		{name: "retry stats unknown parameter", server: "b", method: "GET", target: "/v1/retries/stats?x=1", code: 400, offSpec: true},
		{name: "retry stats without a token", server: "a", method: "GET", target: "/v1/retries/stats", code: 401},
		// No operation of the document: 404 and 405.
		{name: "unknown path", server: "a", method: "GET", target: "/v2/nodes", code: 404, noRoute: true},
		{name: "instance without an id", server: "b", method: "GET", target: "/v1/instances/orders", code: 404, noRoute: true},
		{name: "GET of a mutation", server: "a", method: "GET", target: "/v1/check", code: 405, noRoute: true},
		{name: "POST of a probe", server: "a", method: "POST", target: "/readyz", code: 405, noRoute: true},
		{name: "DELETE of a node", server: "a", method: "DELETE", target: "/v1/nodes/node-a", code: 405, noRoute: true},
		{name: "path not canonical", server: "a", method: "GET", target: "/v1//nodes", code: 400, noRoute: true},
	}
	cases = append(cases, genericCases(doc, busy, deadMaster)...)
	seen := map[string]bool{} // "METHOD /path CODE" validated
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.setup != nil {
				defer c.setup()()
			}
			route, code := specExchange(t, doc, router, addrs[c.server], c)
			if route != "" {
				seen[route+" "+strconv.Itoa(code)] = true
			}
		})
	}
	// Every documented answer of every operation was validated, but a
	// body that does not arrive within the server's read timeout (408):
	// it takes the 5 s of that timeout.
	for _, r := range specRoutes(doc) {
		method, path, _ := strings.Cut(r, " ")
		for code := range doc.Paths.Value(path).GetOperation(method).Responses.Map() {
			if !seen[r+" "+code] && code != "408" {
				t.Errorf("%s %s: documented but not driven by this test", r, code)
			}
		}
	}
}

// bodies are valid bodies of the mutations.
var bodies = map[string]string{
	"/v1/pause": `{"reason":"maintenance"}`, "/v1/holds/retry": `{"all":true}`, "/v1/holds/fail": `{"all":true}`,
	"/v1/retry": `{"workflow":"orders","instance":"1042"}`,
}

// genericCases are the answers every operation of a kind gives alike,
// for each operation of doc: 400 (a query parameter it does not take),
// 401 (no token; reads on a node with api.auth_reads), 403 (a read
// token on a mutation), 429 (locked out), 503 (the database down), and
// for mutations 413, 415 and 502 (the master not reachable).
func genericCases(doc *openapi3.T, busy, deadMaster func() func()) []specCase {
	var cases []specCase
	for _, r := range specRoutes(doc) {
		method, path, _ := strings.Cut(r, " ")
		op := doc.Paths.Value(path).GetOperation(method)
		target := strings.NewReplacer("{name}", "node-a", "{id}", "11", "{workflow}", "orders").Replace(path)
		body := bodies[path]
		if method == "POST" && body == "" {
			body = "{}"
		}
		if path == "/v1/instances" {
			target += "?workflow=orders&id=1042"
		}
		add := func(c specCase) {
			c.name, c.method = r+" "+strconv.Itoa(c.code)+" "+c.name, method
			if c.target == "" {
				c.target = target
			}
			if c.body == "" && c.ctype == "" {
				c.body = body
			}
			cases = append(cases, c)
		}
		probe := path == "/healthz" || path == "/readyz" || path == "/metrics"
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		if probe {
			add(specCase{name: "query parameter given twice", server: "a", target: target + "?x=1&x=2", code: 400})
		} else {
			add(specCase{name: "unknown query parameter", server: "a", target: target + sep + "zz=1", token: "tok", code: 400, offSpec: true})
		}
		_, resp503 := op.Responses.Map()["503"]
		switch {
		case path == "/metrics":
			add(specCase{name: "busy", server: "down", code: 503, setup: busy})
		case path == "/healthz" || path == "/readyz":
		case resp503:
			add(specCase{name: "database down", server: "down", token: "tok", code: 503})
		}
		if _, ok := op.Responses.Map()["401"]; ok {
			add(specCase{name: "no token", server: "a", code: 401, offSpec: method == "POST"})
			add(specCase{name: "locked out", server: "lock", token: "tok", code: 429})
		}
		if method != "POST" {
			continue
		}
		add(specCase{name: "read token", server: "a", token: "rtok", code: 403})
		add(specCase{name: "over 64 KiB", server: "a", token: "tok", body: `{"reason":"` + strings.Repeat("x", 70<<10) + `"}`, code: 413, offSpec: true})
		add(specCase{name: "not JSON", server: "a", token: "tok", ctype: "text/plain", body: "x", code: 415, offSpec: true})
		if _, ok := op.Responses.Map()["502"]; ok {
			add(specCase{name: "master not reachable", server: "b", token: "tok", code: 502, setup: deadMaster})
		}
	}
	return cases
}

// specExchange sends c to the server at addr and validates the request
// and the answer against doc; it returns the route ("METHOD /path") of
// the operation and the status.
func specExchange(t *testing.T, doc *openapi3.T, router routers.Router, addr string, c specCase) (string, int) {
	t.Helper()
	req, err := http.NewRequest(c.method, "http://"+addr+c.target, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.body == "" {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if ct := c.ctype; ct != "" || c.body != "" {
		req.Header.Set("Content-Type", cmpOr(ct, "application/json"))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != c.code {
		t.Fatalf("%s %s: %d, want %d: %s", c.method, c.target, resp.StatusCode, c.code, body)
	}
	if c.want != "" && !bytes.Contains(body, []byte(c.want)) {
		t.Errorf("%s %s: answer without %q: %s", c.method, c.target, c.want, body)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("no X-Request-Id")
	}
	if c.noRoute {
		// No operation takes it: the error answer's shape, from the
		// document's components.
		name := map[int]string{404: "NotFound", 405: "MethodNotAllowed", 400: "BadRequest"}[resp.StatusCode]
		r := doc.Components.Responses[name].Value
		if err := r.Content.Get("application/json").Schema.Value.VisitJSON(decodeJSON(t, body), openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("%s %s: %d answer does not match %s: %v\n%s", c.method, c.target, resp.StatusCode, name, err, body)
		}
		for h, hdr := range r.Headers {
			if hdr.Value.Required && resp.Header.Get(h) == "" {
				t.Errorf("%s %s: no header %s", c.method, c.target, h)
			}
		}
		if _, _, err := router.FindRoute(req); err == nil && resp.StatusCode != 400 {
			t.Errorf("%s %s: the document has an operation for it", c.method, c.target)
		}
		return "", resp.StatusCode
	}
	// The request as the server got it: the document's router finds the
	// operation on the path, not the host.
	vreq := req.Clone(context.Background())
	vreq.Body = io.NopCloser(strings.NewReader(c.body))
	route, pathParams, err := router.FindRoute(vreq)
	if err != nil {
		t.Fatalf("%s %s: no operation of the document: %v", c.method, c.target, err)
	}
	opts := &openapi3filter.Options{
		MultiError: true,
		// The bearer scheme: a request that names it carries a token.
		AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
			if in.SecurityScheme.Type == "http" && !strings.HasPrefix(strings.ToLower(in.RequestValidationInput.Request.Header.Get("Authorization")), "bearer ") {
				return errors.New("no bearer token")
			}
			return nil
		},
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: pathParams, Route: route, Options: opts}
	err = openapi3filter.ValidateRequest(context.Background(), in)
	if err == nil {
		err = onlyDocumentedQuery(route, vreq)
	}
	switch {
	case c.offSpec && err == nil:
		t.Errorf("%s %s: the request is outside the document, but validates", c.method, c.target)
	case !c.offSpec && err != nil:
		t.Errorf("%s %s: the request does not match the document: %v", c.method, c.target, err)
	}
	rin := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: &openapi3filter.Options{MultiError: true, IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), rin); err != nil {
		t.Errorf("%s %s: the %d answer does not match the document: %v\n%s", c.method, c.target, resp.StatusCode, err, body)
	}
	// Headers the document says are required (ValidateResponse checks
	// their values; a missing one too, but say so plainly).
	if r := route.Operation.Responses.Status(resp.StatusCode); r != nil {
		for h, hdr := range r.Value.Headers {
			if hdr.Value.Required && resp.Header.Get(h) == "" {
				t.Errorf("%s %s: %d without header %s", c.method, c.target, resp.StatusCode, h)
			}
		}
	}
	return c.method + " " + route.Path, resp.StatusCode
}

// onlyDocumentedQuery: a /v1 route or the page takes the query
// parameters its operation lists and no other (the document's
// description says so; OpenAPI cannot).
func onlyDocumentedQuery(route *routers.Route, r *http.Request) error {
	if !strings.HasPrefix(route.Path, "/v1/") && route.Path != "/" {
		return nil
	}
	for k := range r.URL.Query() {
		if route.Operation.Parameters.GetByInAndName("query", k) == nil {
			return fmt.Errorf("query parameter %q: not one the operation takes", k)
		}
	}
	return nil
}

func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return v
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
