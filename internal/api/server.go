// Package api is the daemon's HTTP surface and the CLI's client of it.
//
// Read-only routes are open; mutations (added by later features) need the
// configured bearer token. Every response is JSON; errors are
// {"error": "..."} with a 4xx or 5xx status.
package api

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/audit"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
	"github.com/lmittmann/tint"
)

// NodeReader is what the API reads node records from.
type NodeReader interface {
	List(ctx context.Context) ([]nodes.Node, error)
	Get(ctx context.Context, name string) (nodes.Node, error)
}

// NodeAcker acknowledges an unexpected shutdown.
type NodeAcker interface {
	Ack(ctx context.Context, name, actor, reason string) (nodes.Node, error)
}

// MasterOps are the operations that need master-ship; on a non-master
// node they fail with health.ErrNotMaster and the request is forwarded.
type MasterOps interface {
	Check(ctx context.Context) (health.CheckResult, error)
	Recover(ctx context.Context, sc recovery.Scope) (recovery.Result, error)
	Plan(ctx context.Context, sc recovery.Scope) ([]recovery.WorkflowPlan, error)
	Runs(ctx context.Context, limit int) ([]recovery.RunRow, error)
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
	DryRun bool                    `json:"dry_run"`
	Plan   []recovery.WorkflowPlan `json:"plan,omitempty"`
	Result *recovery.Result        `json:"result,omitempty"`
}

// Ready is the body of GET /readyz.
type Ready struct {
	Ready  bool   `json:"ready"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

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
	Candidates func(ctx context.Context) ([]Candidate, error)
	// Token enables mutations; empty turns them off.
	Token string
	Ops   MasterOps
	// Events lists the audit trail.
	Events func(ctx context.Context, p audit.ListParams) ([]audit.Event, error)
	// Forward is the HTTP client used to reach the master.
	Forward *http.Client
	// Live checks decide GET /healthz.
	Live []Check
	Log  *slog.Logger
	// Timeout of one request's database work; default 5s.
	Timeout time.Duration
}

// NewHandler returns the daemon's HTTP handler.
func NewHandler(cfg Config) http.Handler {
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Forward == nil {
		cfg.Forward = &http.Client{Timeout: 10 * time.Minute}
	}
	h := &handler{cfg: cfg, log: cfg.Log.With("component", "api")}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", h.healthz)
	mux.HandleFunc("GET /readyz", h.readyz)
	mux.HandleFunc("GET /v1/leader", h.leader)
	mux.HandleFunc("POST /v1/nodes/{name}/ack", h.mutation(h.ackNode))
	mux.HandleFunc("POST /v1/check", h.mutation(h.check))
	mux.HandleFunc("POST /v1/recovery", h.mutation(h.recovery))
	mux.HandleFunc("GET /v1/runs", h.runs)
	mux.HandleFunc("GET /v1/events", h.events)
	mux.HandleFunc("GET /v1/nodes", h.listNodes)
	mux.HandleFunc("GET /v1/nodes/{name}", h.getNode)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return mux
}

type handler struct {
	cfg Config
	log *slog.Logger
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

// mutation guards a state-changing route with the bearer token.
func (h *handler) mutation(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.cfg.Token == "" {
			writeError(w, http.StatusForbidden, "mutations are off: no API token is configured (api.token_file or api.token_env)")
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(h.cfg.Token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="enginehealth"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		next(w, r)
	}
}

// AckRequest is the optional body of POST /v1/nodes/{name}/ack.
type AckRequest struct {
	Reason string `json:"reason"`
}

func (h *handler) ackNode(w http.ResponseWriter, r *http.Request) {
	var req AckRequest
	if r.ContentLength != 0 {
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, "body: want {\"reason\": \"...\"}: "+err.Error())
			return
		}
	}
	if req.Reason == "" {
		req.Reason = "acknowledged by an operator"
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	name := r.PathValue("name")
	n, err := h.cfg.Acker.Ack(ctx, name, h.cfg.Self+" (operator)", req.Reason)
	switch {
	case errors.Is(err, nodes.ErrNotFound):
		writeError(w, http.StatusNotFound, "no node named "+name)
	case errors.Is(err, nodes.ErrNotAcknowledgeable):
		writeError(w, http.StatusConflict, err.Error())
	case err != nil:
		h.internal(w, r, err)
	default:
		h.log.InfoContext(ctx, "node acknowledged by operator", "subject", name, "reason", req.Reason)
		writeJSON(w, http.StatusOK, n)
	}
}

// forwardedHeader marks a request a node forwarded to the master.
const forwardedHeader = "X-Enginehealth-Forwarded-By"

// forward sends a master-only request to the master and relays its answer.
func (h *handler) forward(w http.ResponseWriter, r *http.Request, body []byte) {
	if by := r.Header.Get(forwardedHeader); by != "" {
		writeError(w, http.StatusServiceUnavailable, "forwarded by "+by+" but this node is not the master either: the election is changing, retry")
		return
	}
	l, err := h.acting(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "not the master, and no master to forward to: "+err.Error())
		return
	}
	if l.AnsweredBy == h.cfg.Self {
		writeError(w, http.StatusServiceUnavailable, "this node just took office: retry")
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+l.APIAddress+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		h.internal(w, r, err)
		return
	}
	req.Header.Set("Authorization", r.Header.Get("Authorization"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(forwardedHeader, h.cfg.Self)
	resp, err := h.cfg.Forward.Do(req)
	if err != nil {
		writeError(w, http.StatusBadGateway, "forward to the master "+l.Name+" at "+l.APIAddress+": "+err.Error())
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Enginehealth-Master", l.Name)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// readBody reads a small JSON body into v; an empty body leaves v as is.
func readBody(w http.ResponseWriter, r *http.Request, v any) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "body too large")
		return nil, false
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return b, true
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "body: "+err.Error())
		return nil, false
	}
	return b, true
}

func (h *handler) check(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, &struct{}{})
	if !ok {
		return
	}
	// A run, once started, completes even if the client goes away.
	res, err := h.cfg.Ops.Check(context.WithoutCancel(r.Context()))
	switch {
	case errors.Is(err, health.ErrNotMaster):
		h.forward(w, r, body)
	case err != nil:
		h.internal(w, r, err)
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

func (h *handler) recovery(w http.ResponseWriter, r *http.Request) {
	var req RecoveryRequest
	body, ok := readBody(w, r, &req)
	if !ok {
		return
	}
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
		writeJSON(w, http.StatusOK, RecoveryAnswer{Result: &res})
	}
}

func (h *handler) runs(w http.ResponseWriter, r *http.Request) {
	limit, ok := intParam(w, r, "limit", 20)
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
	limit, ok := intParam(w, r, "limit", 100)
	if !ok {
		return
	}
	after, ok := intParam(w, r, "after", 0)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	es, err := h.cfg.Events(ctx, audit.ListParams{Node: r.URL.Query().Get("node"), AfterID: int64(after), Limit: limit})
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if es == nil {
		es = []audit.Event{}
	}
	writeJSON(w, http.StatusOK, es)
}

// intParam reads a non-negative integer query parameter (at most 10000).
func intParam(w http.ResponseWriter, r *http.Request, name string, def int) (int, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 10000 {
		writeError(w, http.StatusBadRequest, "query parameter "+name+": want an integer from 0 to 10000, got "+strconv.Quote(v))
		return 0, false
	}
	return n, true
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
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	n, err := h.cfg.Nodes.Get(ctx, r.PathValue("name"))
	if errors.Is(err, nodes.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no node named "+r.PathValue("name"))
		return
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, n)
}

func (h *handler) internal(w http.ResponseWriter, r *http.Request, err error) {
	h.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, tint.Err(err))
	writeError(w, http.StatusServiceUnavailable, err.Error())
}

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
