// Package api is the daemon's HTTP surface and the CLI's client of it.
//
// Read-only routes are open; mutations (added by later features) need the
// configured bearer token. Every response is JSON; errors are
// {"error": "..."} with a 4xx or 5xx status.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/enginehealth/enginehealth/nodes"
	"github.com/lmittmann/tint"
)

// NodeReader is what the API reads node records from.
type NodeReader interface {
	List(ctx context.Context) ([]nodes.Node, error)
	Get(ctx context.Context, name string) (nodes.Node, error)
}

// Check is a named liveness check; nil means healthy.
type Check struct {
	Name  string
	Check func() error
}

// Config of the handler.
type Config struct {
	Nodes NodeReader
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
