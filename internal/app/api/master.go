// The operator's actions the master carries out (POST /v1/check,
// /v1/recovery, /v1/pause, /v1/resume), forwarded to it from any node.

package api

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/recovery"
)

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
	Instance(ctx context.Context, ref recovery.Ref, p recovery.InstanceParams) (recovery.InstanceView, error)
	Workflows() []string
	Parked(ctx context.Context, f recovery.ParkedFilter) ([]recovery.WaitingRetry, int64, error)
	Violations(ctx context.Context, since time.Time, perKind int) ([]recovery.ViolationCount, []recovery.Violation, error)
	RetryStats(ctx context.Context) ([]recovery.RetryStats, error)
	HoldsOpen(ctx context.Context) (int64, time.Duration, error)
	Run(ctx context.Context, id int64) (recovery.RunDetail, error)
}

// Check is a named liveness check; nil means healthy.
type Check struct {
	Name  string
	Check func() error
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
	l, err := h.acting(r, forwardLookup)
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
	// The host is the acting master's API address (its node record,
	// confirmed by its own answer); only the path and the body come from
	// the request.
	req, err := http.NewRequestWithContext(r.Context(), r.Method, URL(l.APIAddress, r.URL.RequestURI()), bytes.NewReader(body)) //nolint:gosec // G704: see above
	if err != nil {
		h.internal(w, r, err)
		return
	}
	req.Header.Set("Authorization", r.Header.Get("Authorization"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(forwardedHeader, h.cfg.Self)
	req.Header.Set(requestIDHeader, requestID(r.Context()))
	resp, err := h.cfg.Forward.Do(req) //nolint:gosec // G704: to the master, as above
	if err != nil {
		writeError(w, http.StatusBadGateway, "forward to the master "+l.Name+" at "+l.APIAddress+": "+err.Error())
		return
	}
	defer func() { _ = resp.Body.Close() }() // closing a response body: nothing to act on
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
	var req apitype.CheckRequest
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
		writeJSON(w, http.StatusOK, wireCheckResult(res))
	}
}

// pause serves POST /v1/pause and /v1/resume, on the master (forwarded).
func (h *handler) pause(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req apitype.AckRequest
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
			writeJSON(w, http.StatusOK, wirePause(p))
		}
	}
}

func (h *handler) recovery(w http.ResponseWriter, r *http.Request) {
	var req apitype.RecoveryRequest
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
			writeJSON(w, http.StatusOK, apitype.RecoveryAnswer{DryRun: true, Plan: wireAll(plan, wirePlan)})
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
		writeJSON(w, http.StatusOK, apitype.RecoveryAnswer{Result: new(wireResult(res))})
	}
}
