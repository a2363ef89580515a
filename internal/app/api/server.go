// Package api is the daemon's HTTP API and the CLI's client of it.
//
// NewHandler (server.go: the routes, errors and answers) serves liveness
// and readiness (health.go), the node records (nodes.go), the runs and
// events (events.go), the operator's mutations, which need an operator's
// token of role operate (auth.go: named operators and their roles, reads
// behind tokens with AuthReads, the lockout of addresses that fail to
// authenticate): node ack and grade reset (nodes.go), check, recovery and
// pause (master.go: on a node that is not the master they are forwarded
// to it, with the token), holds, manual retries and the instance view
// (operator.go), and the status page (status.go). GET /v1/leader
// (leader.go) names the acting master: this node's own state, else the
// answer of the node that last took office or of the etcd election
// holder. Query and path parameters are read by params.go's helpers.
//
// Every request passes the edge first (edge.go): request id, canonical
// path, query parameters and body shape are checked before any database
// call. Routes that use the database run in a few slots, with a byte
// budget for answers being written, and are answered 503 busy when they
// get neither in time (limit.go). NewServer and NewListener
// (httpserver.go) set the server's timeouts and cap its connections.
// Client (client.go) is what the CLI calls.
//
// The handler answers JSON, the types of apitype (converted from the
// domain's by wire.go); its errors are an apitype.ErrorBody
// {"error", "detail", "request_id"} with a 4xx or 5xx status. What Go's
// server refuses before any handler runs (a malformed request line,
// oversized headers) gets that server's plain-text 400 or 431.
package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/certexpiry"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/recovery"
)

// Config of the handler.
type Config struct {
	// Self is this node's name, recorded as the actor of operator actions.
	Self  string
	Nodes NodeReader
	Acker NodeAcker
	// Ready decides GET /readyz.
	Ready func() apitype.Ready
	// Local returns this node's own state when it acts as master, else
	// an error saying why it does not. It must not block.
	Local func() (apitype.Leader, error)
	// Candidates returns the nodes that may act as master (the one that
	// last took office, the etcd election holder), asked when this node
	// does not act; ctx carries a short deadline.
	Candidates func(ctx context.Context) ([]leader.Candidate, error)
	// Auth finds who sent a request (Tokens: bearer tokens); nil turns
	// mutations off.
	Auth Authenticator
	// AuthReads means reads need role read too (see read); else they are open.
	AuthReads bool
	// Clock, when set, replaces time.Now for the lockout of addresses
	// that fail to authenticate (tests).
	Clock func() time.Time
	Ops   MasterOps
	// Events lists the audit trail; LastEventID returns the newest
	// event's id (the status page shows the events before it).
	Events      func(ctx context.Context, p audit.ListParams) ([]audit.Event, error)
	LastEventID func(ctx context.Context) (int64, error)
	// Changes lists the cluster's changes since a time, oldest first (at
	// most limit), and PerMinute counts the events about instances by
	// minute and kind: the console's day (nil: no day page).
	Changes   func(ctx context.Context, since time.Time, limit int) ([]audit.Event, error)
	PerMinute func(ctx context.Context, since time.Time) ([]audit.MinuteCount, error)
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
	// Certificates returns when this node's certificate files expire
	// (certexpiry.Watch.Expiries), for the status; nil: none.
	Certificates func() []certexpiry.Expiry
	// Etcd reports whether this node reaches etcd now (nil: not said).
	Etcd func() apitype.EtcdState
	// Build is this binary's build (nil: not said).
	Build *apitype.Build
	// SessionTTL is how long a console session lasts; default
	// DefaultSessionTTL.
	SessionTTL time.Duration
	// VerifyForwarders means client CAs are configured, so a node that
	// forwards a request presents its certificate; a forwarded-by header
	// without one is not believed (see handler.via).
	VerifyForwarders bool
}

// NewHandler returns the daemon's HTTP handler.
func NewHandler(cfg Config) http.Handler {
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.LongTimeout = cmp.Or(cfg.LongTimeout, defaultLongTimeout)
	cfg.Forward = cmp.Or(cfg.Forward, &http.Client{Timeout: 10 * time.Minute})
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	h := &handler{cfg: cfg, log: cfg.Log.With("component", "api"), slots: newSlots(cmp.Or(cfg.MaxDBRequests, DefaultMaxDBRequests)),
		fails: newAuthFailures(authFailAddrs, cfg.Clock), sessions: newSessions(cmp.Or(cfg.SessionTTL, DefaultSessionTTL), cfg.Clock)}
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
	mux.HandleFunc("GET /v1/instances/{workflow}/{id...}", only(h.read(h.limited(h.instance("path"))), "limit", "order", "before"))
	mux.HandleFunc("GET /v1/instances", only(h.read(h.limited(h.instance("query"))), "workflow", "id", "limit", "order", "before"))
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
	h.consoleRoutes(mux)
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
	h.api = h.edge(mux)
	return h.api
}

// allowed lists the methods whose routes in mux take r's path (GET
// with HEAD); none when only a catch-all ("/", "/console/") does.
func allowed(mux *http.ServeMux, r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		if _, pattern := mux.Handler(&http.Request{Method: m, URL: r.URL, Host: r.Host}); pattern != "" && pattern != "/" && pattern != "/console/" {
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
	// sessions are the console's signed-in operators (session.go).
	sessions *sessions
	// api is the whole handler, edge included: the console's actions
	// call its routes (console.go, callAPI).
	api http.Handler
}

// DefaultTimeout of one request's database work.
const DefaultTimeout = 5 * time.Second

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
	case pgdb.IsCanceled(err):
		// A statement the database cancelled: the request's time ran out
		// (the driver cancels it and returns the server's error, not the
		// context's), or the session's statement_timeout.
		msg = "timed out"
		detail = "the database did not finish the statement in time (a large read, or a loaded database); try again, or narrow the request; " + detail
		w.Header().Set("Retry-After", "5")
		log.WarnContext(r.Context(), "request failed: statement cancelled", "method", r.Method, "path", r.URL.Path, slog.Any("err", err))
	case errors.Is(err, context.DeadlineExceeded):
		msg = "timed out"
		detail = "the database or etcd did not answer in time; " + detail
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, slog.Any("err", err))
	default:
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, slog.Any("err", err))
	}
	writeProblem(w, http.StatusServiceUnavailable, msg, detail)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeProblem(w, code, msg, "")
}

// writeProblem answers an error with a detail; the request id comes from
// the response header set by the edge.
func writeProblem(w http.ResponseWriter, code int, msg, detail string) {
	writeJSON(w, code, apitype.ErrorBody{Error: msg, Detail: detail, RequestID: w.Header().Get(requestIDHeader)})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
