// Package api is the daemon's HTTP API and the CLI's client of it.
//
// NewHandler (server.go) serves liveness and readiness, the node, run and
// event reads, and the operator's mutations (node ack, check, recovery),
// which need an operator's token of role operate (auth.go: named
// operators and their roles, reads behind tokens with AuthReads, the
// lockout of addresses that fail to authenticate); check and recovery on
// a node that is not the master are forwarded to it, with the token. GET /v1/leader (leader.go)
// names the acting master: this node's own state, else the answer of the
// node that last took office or of the etcd election holder.
//
// Every request passes the edge first (edge.go): request id, canonical
// path, query parameters and body shape are checked before any database
// call. Routes that use the database run in a few slots, with a byte
// budget for answers being written, and are answered 503 busy when they
// get neither in time (limit.go). NewServer and NewListener
// (httpserver.go) set the server's timeouts and cap its connections.
// Client (client.go) is what the CLI calls.
//
// The handler answers JSON; its errors are an ErrorBody
// {"error", "detail", "request_id"} with a 4xx or 5xx status. What Go's
// server refuses before any handler runs (a malformed request line,
// oversized headers) gets that server's plain-text 400 or 431.
package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/certexpiry"
	"github.com/enginehealth/enginehealth/internal/infra/jsonx"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// NodeReader is what the API reads node records from.
type NodeReader interface {
	List(ctx context.Context) ([]nodes.Node, error)
	Get(ctx context.Context, name string) (nodes.Node, error)
}

// NodeAcker takes an operator's decisions on node records: the ack of an
// unexpected shutdown, the reset of a failover grade.
type NodeAcker interface {
	Ack(ctx context.Context, name string, by audit.By, reason string) (nodes.Node, error)
	ResetGrade(ctx context.Context, name string, by audit.By, reason string) (nodes.GradeChange, error)
}

// MasterOps are the operations that need master-ship; on a non-master
// node they fail with health.ErrNotMaster and the request is forwarded.
type MasterOps interface {
	Check(ctx context.Context, req health.CheckRequest) (health.CheckResult, error)
	Pause(ctx context.Context, by audit.By, reason string) (health.Pause, error)
	Resume(ctx context.Context, by audit.By, reason string) (health.Pause, error)
	PauseState(ctx context.Context) (health.Pause, error)
	Recover(ctx context.Context, sc recovery.Scope) (recovery.Result, error)
	Plan(ctx context.Context, sc recovery.Scope) ([]recovery.WorkflowPlan, error)
	Runs(ctx context.Context, limit int) ([]recovery.RunRow, error)
	ActedRuns(ctx context.Context, limit int) ([]recovery.RunRow, error)
	Holds(ctx context.Context, workflow string, limit int) ([]recovery.Hold, error)
	Waiting(ctx context.Context, workflow string, limit int) ([]recovery.WaitingRetry, error)
	DecideHolds(ctx context.Context, d recovery.HoldDecision) (recovery.HoldResult, error)
	Retry(ctx context.Context, m recovery.ManualRetry) (recovery.RetryResult, error)
	Instance(ctx context.Context, ref recovery.Ref, limit int) (recovery.InstanceView, error)
	RetryStats(ctx context.Context) ([]recovery.RetryStats, error)
	HoldsOpen(ctx context.Context) (int64, time.Duration, error)
	Run(ctx context.Context, id int64) (recovery.RunDetail, error)
}

// CheckRequest is the optional body of POST /v1/check.
type CheckRequest struct {
	// Force runs the pass through the disruption guard, once; Reason is
	// then required and recorded in a guard_override event.
	Force  bool   `json:"force"`
	Reason string `json:"reason"`
}

// RecoveryRequest is the body of POST /v1/recovery.
type RecoveryRequest struct {
	// Workflows in scope; all claimable ones when empty.
	Workflows []string `json:"workflows"`
	// DryRun computes the plan and changes nothing.
	DryRun bool `json:"dry_run"`
}

// RecoveryAnswer is the answer of POST /v1/recovery: a plan (dry run) or
// a result.
type RecoveryAnswer struct {
	DryRun bool `json:"dry_run"`
	// Plan of a dry run, Result of a run: the other is null.
	Plan   []recovery.WorkflowPlan `json:"plan"`
	Result *recovery.Result        `json:"result"`
}

// Ready is the body of GET /readyz.
type Ready struct {
	Ready  bool   `json:"ready"`
	Status string `json:"status"`
	// Grade: the node's failover grade (an ERROR node is not ready with
	// failover.error_not_ready); null before the node's first heartbeat
	// read it.
	Grade string `json:"grade" null:"zero"`
	// Reason: why the node is not ready; null when it is.
	Reason string `json:"reason" null:"zero"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (r Ready) MarshalJSON() ([]byte, error) { return jsonx.Marshal(r) }

// Check is a named liveness check; nil means healthy.
type Check struct {
	Name  string
	Check func() error
}

// Config of the handler.
type Config struct {
	// Self is this node's name, recorded as the actor of operator actions.
	Self  string
	Nodes NodeReader
	Acker NodeAcker
	// Ready decides GET /readyz.
	Ready func() Ready
	// Local returns this node's own state when it acts as master, else
	// an error saying why it does not. It must not block.
	Local func() (Leader, error)
	// Candidates returns the nodes that may act as master (the one that
	// last took office, the etcd election holder), asked when this node
	// does not act; ctx carries a short deadline.
	Candidates func(ctx context.Context) ([]leader.Candidate, error)
	// Auth finds who sent a request (Tokens: bearer tokens); nil turns
	// mutations off.
	Auth Authenticator
	// AuthReads: reads need role read too (see read); else they are open.
	AuthReads bool
	// Clock, when set, replaces time.Now for the lockout of addresses
	// that fail to authenticate (tests).
	Clock func() time.Time
	Ops   MasterOps
	// Events lists the audit trail; LastEventID returns the newest
	// event's id (the status page shows the events before it).
	Events      func(ctx context.Context, p audit.ListParams) ([]audit.Event, error)
	LastEventID func(ctx context.Context) (int64, error)
	// Forward is the HTTP client used to reach the master.
	Forward *http.Client
	// Live checks decide GET /healthz.
	Live []Check
	Log  *slog.Logger
	// Timeout of one request's database work; default DefaultTimeout.
	Timeout time.Duration
	// MaxDBRequests bounds the requests that use the database at once
	// (node, event and run reads, acks, the master lookup of /v1/leader);
	// default DefaultMaxDBRequests. Give the API a pool of this size.
	MaxDBRequests int
	// LongTimeout bounds POST /v1/check and /v1/recovery, which can run
	// for minutes (read, run, forward and answer); default 11 min.
	LongTimeout time.Duration
	// Metrics serves GET /metrics (in a database slot: a scrape reads
	// the node registry); nil: no such route.
	Metrics http.Handler
	// Requests, when set, is told of each answered request: its route
	// pattern ("" when refused before routing, "/" when no route
	// matched) and status code.
	Requests func(route string, code int)
	// Certificates: when this node's certificate files expire
	// (certexpiry.Watch.Expiries), for the status; nil: none.
	Certificates func() []certexpiry.Expiry
	// Etcd: whether this node reaches etcd now (nil: not said).
	Etcd func() EtcdState
	// Build: this binary's build (nil: not said).
	Build *Build
	// VerifyForwarders: client CAs are configured, so a node that
	// forwards a request presents its certificate; a forwarded-by header
	// without one is not believed (see handler.via).
	VerifyForwarders bool
}

// NewHandler returns the daemon's HTTP handler.
func NewHandler(cfg Config) http.Handler {
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	if cfg.LongTimeout == 0 {
		cfg.LongTimeout = defaultLongTimeout
	}
	if cfg.Forward == nil {
		cfg.Forward = &http.Client{Timeout: 10 * time.Minute}
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	h := &handler{cfg: cfg, log: cfg.Log.With("component", "api"), slots: newSlots(cmp.Or(cfg.MaxDBRequests, DefaultMaxDBRequests)),
		fails: newAuthFailures(authFailAddrs, cfg.Clock)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", h.healthz)
	mux.HandleFunc("GET /readyz", h.readyz)
	// Each /v1 route and the page name the query parameters they take:
	// any other (a typo such as ?Limit= or ?nod=) is a 400, not ignored.
	// A node asks the others for their own view (?local=true) without a
	// token: from memory, like /readyz, it stays open.
	readLeader := h.read(h.leader)
	mux.HandleFunc("GET /v1/leader", only(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("local") == "true" {
			h.leader(w, r)
			return
		}
		readLeader(w, r)
	}, "local"))
	mux.HandleFunc("POST /v1/nodes/{name}/ack", only(h.mutation(h.limited(h.ackNode))))
	mux.HandleFunc("POST /v1/nodes/{name}/reset-grade", only(h.mutation(h.limited(h.resetGrade))))
	mux.HandleFunc("POST /v1/check", only(h.mutation(h.check)))
	mux.HandleFunc("POST /v1/recovery", only(h.mutation(h.recovery)))
	mux.HandleFunc("POST /v1/pause", only(h.mutation(h.pause(true))))
	mux.HandleFunc("POST /v1/resume", only(h.mutation(h.pause(false))))
	mux.HandleFunc("POST /v1/holds/retry", only(h.mutation(h.decideHolds(recovery.DecideRetry))))
	mux.HandleFunc("POST /v1/holds/fail", only(h.mutation(h.decideHolds(recovery.DecideFail))))
	mux.HandleFunc("POST /v1/retry", only(h.mutation(h.limited(h.retry))))
	mux.HandleFunc("GET /v1/holds", only(h.read(h.limited(h.listHolds)), "workflow", "limit"))
	mux.HandleFunc("GET /v1/instances/{workflow}/{id...}", only(h.read(h.limited(h.instance("path"))), "limit"))
	mux.HandleFunc("GET /v1/instances", only(h.read(h.limited(h.instance("query"))), "workflow", "id", "limit"))
	// Without an id: a 404 here, where the mux would redirect to the
	// path with a slash (and an empty id).
	mux.HandleFunc("/v1/instances/{workflow}", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, http.StatusNotFound, "no such endpoint: "+quoteShort(r.Method)+" "+quoteShort(r.URL.Path),
			"an instance is GET /v1/instances/{workflow}/{id}")
	})
	mux.HandleFunc("GET /v1/retries/stats", only(h.read(h.limited(h.retryStats))))
	mux.HandleFunc("GET /v1/runs", only(h.read(h.limited(h.runs)), "limit"))
	mux.HandleFunc("GET /v1/runs/{id}", only(h.read(h.limited(h.getRun))))
	mux.HandleFunc("GET /v1/status", only(h.read(h.withMaster(h.getStatus))))
	mux.HandleFunc("GET /{$}", only(h.read(h.withMaster(h.page))))
	mux.HandleFunc("GET /v1/events", only(h.read(h.limited(h.events)), "after", "limit", "node", "workflow", "instance", "kind", "run", "since", "until"))
	mux.HandleFunc("GET /v1/nodes", only(h.read(h.limited(h.listNodes))))
	mux.HandleFunc("GET /v1/nodes/{name}", only(h.read(h.limited(h.getNode))))
	if cfg.Metrics != nil {
		// Open, like /healthz and /readyz: scraped by Prometheus.
		mux.HandleFunc("GET /metrics", h.limited(cfg.Metrics.ServeHTTP))
	}
	// Anything else: 405 with Allow when the path is a route's under
	// another method, else 404.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := allowed(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s: use %s",
				quoteShort(r.Method), quoteShort(r.URL.Path), strings.Join(allow, " or ")))
			return
		}
		writeError(w, http.StatusNotFound, "no such endpoint: "+quoteShort(r.Method)+" "+quoteShort(r.URL.Path))
	})
	return h.edge(mux)
}

// allowed lists the methods whose routes in mux take r's path (GET
// with HEAD); none when only the catch-all "/" does.
func allowed(mux *http.ServeMux, r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		if _, pattern := mux.Handler(&http.Request{Method: m, URL: r.URL, Host: r.Host}); pattern != "" && pattern != "/" {
			allow = append(allow, m)
			if m == http.MethodGet {
				allow = append(allow, http.MethodHead)
			}
		}
	}
	return allow
}

type handler struct {
	cfg   Config
	log   *slog.Logger
	slots *slots
	fails *authFailures
}

// Health is the body of /healthz.
type Health struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

func (h *handler) healthz(w http.ResponseWriter, r *http.Request) {
	res := Health{Status: "ok", Checks: map[string]string{}}
	code := http.StatusOK
	for _, c := range h.cfg.Live {
		if err := c.Check(); err != nil {
			res.Status, code = "unhealthy", http.StatusServiceUnavailable
			res.Checks[c.Name] = err.Error()
		} else {
			res.Checks[c.Name] = "ok"
		}
	}
	writeJSON(w, code, res)
}

func (h *handler) readyz(w http.ResponseWriter, r *http.Request) {
	rd := h.cfg.Ready()
	code := http.StatusOK
	if !rd.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, rd)
}

// AckRequest is the optional body of POST /v1/nodes/{name}/ack.
type AckRequest struct {
	Reason string `json:"reason"`
}

// nodeDecision reads the name and the optional {"reason"} body of an
// operator's decision on a node; false: the request was answered.
func nodeDecision(w http.ResponseWriter, r *http.Request, defaultReason string) (name, reason string, ok bool) {
	name, ok = nameParam(w, r)
	if !ok {
		return "", "", false
	}
	var req AckRequest
	if _, ok := decodeReasoned(w, r, &req, &req.Reason); !ok {
		return "", "", false
	}
	return name, cmp.Or(req.Reason, defaultReason), true
}

// resetGrade: POST /v1/nodes/{name}/reset-grade, an operator's reset of a
// failover grade to NORMAL (409 when it is NORMAL already).
func (h *handler) resetGrade(w http.ResponseWriter, r *http.Request) {
	name, reason, ok := nodeDecision(w, r, "reset by an operator")
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	c, err := h.cfg.Acker.ResetGrade(ctx, name, h.operator(r), reason)
	switch {
	case errors.Is(err, nodes.ErrNotFound):
		writeError(w, http.StatusNotFound, "no node named "+name)
	case errors.Is(err, nodes.ErrGradeNormal):
		writeError(w, http.StatusConflict, "the failover grade of "+name+" is "+nodes.GradeNormal+" already")
	case err != nil:
		h.internal(w, r, err)
	default:
		h.reqLog(r).InfoContext(ctx, "failover grade reset by operator", "subject", name, "from", c.From, "reason", reason)
		writeJSON(w, http.StatusOK, c)
	}
}

func (h *handler) ackNode(w http.ResponseWriter, r *http.Request) {
	name, reason, ok := nodeDecision(w, r, "acknowledged by an operator")
	if !ok {
		return
	}
	req := AckRequest{Reason: reason}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	n, err := h.cfg.Acker.Ack(ctx, name, h.operator(r), req.Reason)
	switch {
	case errors.Is(err, nodes.ErrNotFound):
		writeError(w, http.StatusNotFound, "no node named "+name)
	case errors.Is(err, nodes.ErrNotAcknowledgeable):
		writeError(w, http.StatusConflict, err.Error())
	case err != nil:
		h.internal(w, r, err)
	default:
		h.reqLog(r).InfoContext(ctx, "node acknowledged by operator", "subject", name, "reason", req.Reason)
		writeJSON(w, http.StatusOK, n)
	}
}

// forwardedHeader marks a request a node forwarded to the master.
const forwardedHeader = "X-Enginehealth-Forwarded-By"

// RefusedHeader marks a 503 that refuses rather than fails: no master
// could take the request (none acts, the election is changing) or the
// daemon is busy; try again later. Other 503s are failures (the database
// or etcd did not answer).
const RefusedHeader = "X-Enginehealth-Refused"

// NodeHeader names, in the answer to a mutation, the node that did it:
// the node asked, or the master it forwarded the request to.
const NodeHeader = "X-Enginehealth-Node"

// forward sends a master-only request to the master and relays its answer.
func (h *handler) forward(w http.ResponseWriter, r *http.Request, body []byte) {
	if by := r.Header.Get(forwardedHeader); by != "" {
		w.Header().Set(RefusedHeader, "no-master")
		writeError(w, http.StatusServiceUnavailable, "forwarded by "+by+" but this node is not the master either: the election is changing, retry")
		return
	}
	l, err := h.acting(r)
	var nm *noMaster
	if errors.Is(err, errBusy) {
		h.busy(w, r)
		return
	}
	if errors.As(err, &nm) {
		w.Header().Set(RefusedHeader, "no-master")
		writeProblem(w, http.StatusServiceUnavailable, "not the master, and no acting master to forward to", strings.Join(nm.reasons, "; "))
		return
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if l.AnsweredBy == h.cfg.Self {
		w.Header().Set(RefusedHeader, "no-master")
		writeError(w, http.StatusServiceUnavailable, "this node just took office: retry")
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, URL(l.APIAddress, r.URL.RequestURI()), bytes.NewReader(body))
	if err != nil {
		h.internal(w, r, err)
		return
	}
	req.Header.Set("Authorization", r.Header.Get("Authorization"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(forwardedHeader, h.cfg.Self)
	req.Header.Set(requestIDHeader, requestID(r.Context()))
	resp, err := h.cfg.Forward.Do(req)
	if err != nil {
		writeError(w, http.StatusBadGateway, "forward to the master "+l.Name+" at "+l.APIAddress+": "+err.Error())
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Enginehealth-Master", l.Name)
	w.Header().Set(NodeHeader, l.Name)
	if v := resp.Header.Get(RefusedHeader); v != "" {
		w.Header().Set(RefusedHeader, v)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// decodeReasoned decodes the body into v, whose reason field is reason,
// and checks the reason's text; false: the request was answered.
func decodeReasoned(w http.ResponseWriter, r *http.Request, v any, reason *string) ([]byte, bool) {
	body, ok := decodeBody(w, r, v)
	if !ok {
		return nil, false
	}
	if p := textProblem(*reason, maxReason); p != "" {
		writeProblem(w, http.StatusBadRequest, "body.reason: "+p,
			fmt.Sprintf("want at most %d bytes of UTF-8 text without control characters", maxReason))
		return nil, false
	}
	return body, true
}

func (h *handler) check(w http.ResponseWriter, r *http.Request) {
	var req CheckRequest
	body, ok := decodeReasoned(w, r, &req, &req.Reason)
	if !ok {
		return
	}
	if req.Force && strings.TrimSpace(req.Reason) == "" {
		writeProblem(w, http.StatusBadRequest, "body.reason: required with force",
			"say why the nodes the guard counts as cut off are really gone; it is recorded in a guard_override event")
		return
	}
	h.extendDeadlines(w)
	// A run, once started, completes even if the client goes away.
	res, err := h.cfg.Ops.Check(context.WithoutCancel(r.Context()),
		health.CheckRequest{Force: req.Force, By: h.operator(r), Reason: req.Reason})
	switch {
	case errors.Is(err, health.ErrNotMaster):
		h.forward(w, r, body)
	case err != nil:
		h.internal(w, r, err)
	default:
		log := h.reqLog(r)
		if res.Forced {
			log.WarnContext(r.Context(), "disruption guard overridden by an operator", "run", res.RunID, "reason", req.Reason)
		}
		log.InfoContext(r.Context(), "check run by an operator", "run", res.RunID, "force", req.Force, "took", res.Took.Round(time.Millisecond))
		writeJSON(w, http.StatusOK, res)
	}
}

// pause: POST /v1/pause and /v1/resume, on the master (forwarded).
func (h *handler) pause(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req AckRequest
		body, ok := decodeReasoned(w, r, &req, &req.Reason)
		if !ok {
			return
		}
		op, what := h.cfg.Ops.Resume, "resumed"
		if paused {
			op, what = h.cfg.Ops.Pause, "paused"
			if strings.TrimSpace(req.Reason) == "" {
				writeProblem(w, http.StatusBadRequest, "body.reason: required", "say why automatic repair stops; it is shown in status until a resume")
				return
			}
		}
		h.extendDeadlines(w)
		// It waits for a running pass; once begun it completes.
		p, err := op(context.WithoutCancel(r.Context()), h.operator(r), cmp.Or(req.Reason, what+" by an operator"))
		switch {
		case errors.Is(err, health.ErrNotMaster):
			h.forward(w, r, body)
		case errors.Is(err, health.ErrPaused):
			writeProblem(w, http.StatusConflict, "paused already", p.String())
		case errors.Is(err, health.ErrNotPaused):
			writeError(w, http.StatusConflict, "not paused")
		case err != nil:
			h.internal(w, r, err)
		default:
			h.reqLog(r).InfoContext(r.Context(), "automatic repair "+what+" by an operator", "actor", p.Actor, "reason", p.Reason)
			writeJSON(w, http.StatusOK, p)
		}
	}
}

func (h *handler) recovery(w http.ResponseWriter, r *http.Request) {
	var req RecoveryRequest
	body, ok := decodeBody(w, r, &req)
	if !ok {
		return
	}
	h.extendDeadlines(w)
	sc := recovery.Scope{Workflows: req.Workflows}
	if req.DryRun {
		plan, err := h.cfg.Ops.Plan(r.Context(), sc)
		switch {
		case errors.Is(err, recovery.ErrScope):
			writeError(w, http.StatusBadRequest, err.Error())
		case err != nil:
			h.internal(w, r, err)
		default:
			writeJSON(w, http.StatusOK, RecoveryAnswer{DryRun: true, Plan: plan})
		}
		return
	}
	res, err := h.cfg.Ops.Recover(context.WithoutCancel(r.Context()), sc)
	switch {
	case errors.Is(err, recovery.ErrScope):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, health.ErrNotMaster):
		h.forward(w, r, body)
	case err != nil:
		h.internal(w, r, err)
	default:
		h.reqLog(r).InfoContext(r.Context(), "recovery run by an operator", "run", res.RunID,
			"claims_expired", res.ClaimsExpired, "repaired", res.Done())
		writeJSON(w, http.StatusOK, RecoveryAnswer{Result: &res})
	}
}

func (h *handler) runs(w http.ResponseWriter, r *http.Request) {
	limit, ok := intParam(w, r, "limit", DefaultRunsLimit)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	runs, err := h.cfg.Ops.Runs(ctx, limit)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, runs)
}

func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	p := audit.ListParams{MaxTextBytes: maxEventText}
	var ok bool
	if p.Limit, ok = intParam(w, r, "limit", DefaultEventsLimit); !ok {
		return
	}
	if p.AfterID, ok = idParam(w, r, "after"); !ok {
		return
	}
	if p.RunID, ok = idParam(w, r, "run"); !ok {
		return
	}
	if v, given := queryValue(r, "run"); given && p.RunID == 0 {
		writeProblem(w, http.StatusBadRequest, "query parameter run: not a positive integer (runs count from 1)", "got "+quoteShort(v))
		return
	}
	node, given := queryValue(r, "node")
	if given {
		if err := nodes.ValidName(node); err != nil {
			writeProblem(w, http.StatusBadRequest, "query parameter node: not a valid node name", nameDetail(err))
			return
		}
		p.Node = node
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"workflow", &p.Workflow}, {"instance", &p.Instance}, {"kind", &p.Kind}} {
		v, given := queryValue(r, f.name)
		if !given {
			continue
		}
		if pr := nameProblem(v, false); pr != "" {
			writeProblem(w, http.StatusBadRequest, "query parameter "+f.name+": "+pr, "got "+quoteShort(v))
			return
		}
		*f.dst = v
	}
	if p.Kind != "" && !slices.Contains(eventKinds, p.Kind) {
		writeProblem(w, http.StatusBadRequest, "query parameter kind: not an event kind", "got "+quoteShort(p.Kind)+"; kinds: "+strings.Join(eventKinds, ", "))
		return
	}
	for _, f := range []struct {
		name string
		dst  **time.Time
	}{{"since", &p.Since}, {"until", &p.Until}} {
		v, given := queryValue(r, f.name)
		if !given {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil || t.Year() < 1 || t.Year() > 9999 {
			writeProblem(w, http.StatusBadRequest, "query parameter "+f.name+": want an RFC 3339 time such as 2026-11-23T14:00:00Z", "got "+quoteShort(v))
			return
		}
		t = t.UTC() // PostgreSQL takes offsets up to ±15:59 only; RFC 3339 allows ±23:59
		*f.dst = &t
	}
	if p.Since != nil && p.Until != nil && !p.Until.After(*p.Since) {
		writeError(w, http.StatusBadRequest, "query parameters since and until: until must be after since")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	es, err := h.cfg.Events(ctx, p)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if es == nil {
		es = []audit.Event{}
	}
	if len(es) > 0 {
		// The cursor of the next page (also: the last id of this one).
		w.Header().Set("X-Next-After", strconv.FormatInt(es[len(es)-1].ID, 10))
	}
	writeJSON(w, http.StatusOK, es)
}

// eventKinds are the kinds of events the sidecar writes.
var eventKinds = append([]string{leader.KindMasterElected, leader.KindMasterLost}, audit.Kinds...)

// maxEventText bounds the text of the events in one answer (256 KiB; its
// JSON is at most about six times that, when every character needs an
// escape): a page may end before limit, and the client pages on with
// after= the last id.
const maxEventText = 256 << 10

// maxIntParam caps integer query parameters (limit: at most 10,000 rows
// per request).
const maxIntParam = 10000

// DefaultTimeout of one request's database work.
const DefaultTimeout = 5 * time.Second

// Page sizes of GET /v1/runs and /v1/events when limit is not given (the
// CLI's --limit defaults), and the most a request may ask for.
const (
	DefaultRunsLimit   = 20
	DefaultEventsLimit = audit.DefaultListLimit
	MaxLimit           = maxIntParam
)

// only answers 400 to a request with a query parameter the route does
// not take, naming it and those it takes.
func only(next http.HandlerFunc, names ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k := range r.URL.Query() {
			if !slices.Contains(names, k) {
				takes := "this route takes none"
				if len(names) > 0 {
					takes = "this route takes " + strings.Join(names, ", ")
				}
				writeProblem(w, http.StatusBadRequest, "query parameter "+quoteShort(k)+": unknown", takes)
				return
			}
		}
		next(w, r)
	}
}

// intParam reads a positive integer query parameter (at most 10000).
func intParam(w http.ResponseWriter, r *http.Request, name string, def int) (int, bool) {
	v, given := queryValue(r, name)
	if !given {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxIntParam {
		writeProblem(w, http.StatusBadRequest, "query parameter "+name+": not an integer from 1 to "+strconv.Itoa(maxIntParam), "got "+quoteShort(v))
		return 0, false
	}
	return n, true
}

// idParam reads a non-negative 64-bit id query parameter (default 0).
func idParam(w http.ResponseWriter, r *http.Request, name string) (int64, bool) {
	v, given := queryValue(r, name)
	if !given {
		return 0, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		writeProblem(w, http.StatusBadRequest, "query parameter "+name+": not a non-negative integer", "got "+quoteShort(v))
		return 0, false
	}
	return n, true
}

// pathID reads a positive 64-bit id path parameter.
func pathID(w http.ResponseWriter, r *http.Request, name string) (int64, bool) {
	v := r.PathValue(name)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || strconv.FormatInt(n, 10) != v {
		writeProblem(w, http.StatusBadRequest, "path parameter "+name+": not a positive integer in canonical form", "got "+quoteShort(v))
		return 0, false
	}
	return n, true
}

// queryValue returns query parameter name and whether it was given (the
// edge has refused repeated ones).
func queryValue(r *http.Request, name string) (string, bool) {
	q := r.URL.Query()
	return q.Get(name), q.Has(name)
}

// nameParam returns the path parameter name, or answers 400 when it is
// not a valid node name.
func nameParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("name")
	if err := nodes.ValidName(name); err != nil {
		writeProblem(w, http.StatusBadRequest, "path parameter name: not a valid node name", nameDetail(err))
		return "", false
	}
	return name, true
}

// nameDetail is the detail of an invalid node name: the name (escaped)
// and the rule.
func nameDetail(err error) string {
	return strings.TrimPrefix(err.Error(), "nodes: ")
}

func (h *handler) listNodes(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	ns, err := h.cfg.Nodes.List(ctx)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ns)
}

func (h *handler) getNode(w http.ResponseWriter, r *http.Request) {
	name, ok := nameParam(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	n, err := h.cfg.Nodes.Get(ctx, name)
	if errors.Is(err, nodes.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no node named "+name)
		return
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, n)
}

// internal answers a request that failed inside the daemon (database,
// etcd): the cause is logged with the request id, never sent, as it may
// carry database text and the request's own input.
func (h *handler) internal(w http.ResponseWriter, r *http.Request, err error) {
	log := h.reqLog(r)
	msg, detail := "internal error", "the daemon logged the cause under this request id"
	switch {
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away: nobody reads the answer.
		log.DebugContext(r.Context(), "request cancelled by the client", "method", r.Method, "path", r.URL.Path, slog.Any("err", err))
	case errors.Is(err, leader.ErrNotTrusted), errors.Is(err, leader.ErrSessionLost), errors.Is(err, leader.ErrKeyDeleted), errors.Is(err, leader.ErrDeposed):
		// This node's office cannot act now (its etcd lease unconfirmed,
		// lost, or a newer term): a refusal, to try again, not a fault.
		log.InfoContext(r.Context(), "request refused: the master's office cannot act", "method", r.Method, "path", r.URL.Path, slog.Any("err", err))
		w.Header().Set(RefusedHeader, "no-master")
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, "this node's master office cannot act now: try again",
			"its etcd lease is not confirmed, or another node took office; "+detail)
		return
	case pgdb.Unavailable(err):
		// The database is down, failing over, read-only or another
		// cluster: its state, not a fault of this daemon.
		msg = pgdb.Summary(err)
		detail = "try again once PostgreSQL is back; " + detail
		w.Header().Set("Retry-After", "1")
		log.WarnContext(r.Context(), "request failed: database unavailable", "method", r.Method, "path", r.URL.Path, slog.Any("err", err))
	case errors.Is(err, context.DeadlineExceeded):
		msg = "timed out"
		detail = "the database or etcd did not answer in time; " + detail
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, slog.Any("err", err))
	default:
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, slog.Any("err", err))
	}
	writeProblem(w, http.StatusServiceUnavailable, msg, detail)
}

// ErrorBody is the body of every error response.
type ErrorBody struct {
	// Error says what is wrong, naming the parameter at fault
	// ("path parameter name: ...", "body.reason: ...").
	Error string `json:"error"`
	// Detail, when set, says more: what was expected, what was got;
	// null when there is nothing more to say.
	Detail string `json:"detail" null:"zero"`
	// RequestID is the request's X-Request-Id, under which the daemon
	// logs what it did with it (null only where no request id was set,
	// outside the edge).
	RequestID string `json:"request_id" null:"zero"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (e ErrorBody) MarshalJSON() ([]byte, error) { return jsonx.Marshal(e) }

func writeError(w http.ResponseWriter, code int, msg string) {
	writeProblem(w, code, msg, "")
}

// writeProblem answers an error with a detail; the request id comes from
// the response header set by the edge.
func writeProblem(w http.ResponseWriter, code int, msg, detail string) {
	writeJSON(w, code, ErrorBody{Error: msg, Detail: detail, RequestID: w.Header().Get(requestIDHeader)})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
