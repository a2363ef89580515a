// Package api is the daemon's HTTP surface and the CLI's client of it.
//
// Read-only routes are open; mutations (added by later features) need the
// configured bearer token. Every response is JSON; errors are
// {"error": "..."} with a 4xx or 5xx status.
package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/enginehealth/enginehealth/nodes"
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

// Leader is the body of GET /v1/leader.
type Leader struct {
	Name        string    `json:"name"`
	Incarnation string    `json:"incarnation"`
	APIAddress  string    `json:"api_address"`
	Term        int64     `json:"term"`
	Since       time.Time `json:"since,omitzero"`
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
	// Leader returns the current master; leader.ErrNoLeader-like errors
	// are answered 503.
	Leader func(ctx context.Context) (Leader, error)
	// Token enables mutations; empty turns them off.
	Token string
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
	h := &handler{cfg: cfg, log: cfg.Log.With("component", "api")}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", h.healthz)
	mux.HandleFunc("GET /readyz", h.readyz)
	mux.HandleFunc("GET /v1/leader", h.leader)
	mux.HandleFunc("POST /v1/nodes/{name}/ack", h.mutation(h.ackNode))
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

func (h *handler) leader(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	l, err := h.cfg.Leader(ctx)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, l)
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
