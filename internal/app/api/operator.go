package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/recovery"
)

// Operators' decisions on instances: GET /v1/holds, POST /v1/holds/retry,
// POST /v1/holds/fail and POST /v1/retry. Decisions need the token and
// run on the master (forwarded to it from any node).

// maxName bounds workflow, task and instance names in requests.
const maxName = 200

// maxRefs bounds the instances one decision names.
const maxRefs = 1000

// nameProblem says why a workflow, task or instance name is not
// acceptable ("" when it is): non-empty (unless optional) text.
func nameProblem(s string, optional bool) string {
	if s == "" {
		if optional {
			return ""
		}
		return "empty"
	}
	return textProblem(s, maxName)
}

func (h *handler) listHolds(w http.ResponseWriter, r *http.Request) {
	limit, ok := intParam(w, r, "limit", recovery.DefaultHoldsLimit)
	if !ok {
		return
	}
	wf, given := queryValue(r, "workflow")
	if p := nameProblem(wf, !given); p != "" {
		writeProblem(w, http.StatusBadRequest, "query parameter workflow: "+p, "got "+quoteShort(wf))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	hs, err := h.cfg.Ops.Holds(ctx, wf, limit)
	switch {
	case errors.Is(err, recovery.ErrScope):
		writeError(w, http.StatusNotFound, afterSentinel(err, recovery.ErrScope))
	case err != nil:
		h.internal(w, r, err)
	default:
		writeJSON(w, http.StatusOK, wireAll(hs, wireHold))
	}
}

// decideHolds serves POST /v1/holds/{action}.
func (h *handler) decideHolds(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req apitype.HoldsRequest
		body, ok := decodeBody(w, r, &req)
		if !ok {
			return
		}
		if p := h.holdsProblem(req); p != "" {
			writeError(w, http.StatusBadRequest, p)
			return
		}
		// "workflow": "" is not "every workflow" (that is no workflow
		// key): a script's unset variable must not fail every hold.
		var keys map[string]json.RawMessage
		if req.Workflow == "" && json.Unmarshal(body, &keys) == nil && keys["workflow"] != nil {
			writeError(w, http.StatusBadRequest, "body.workflow: empty (leave it out to decide the holds of every workflow)")
			return
		}
		h.extendDeadlines(w)
		d := recovery.HoldDecision{Action: action, Instances: wireAll(req.Instances, domainRef), All: req.All, Workflow: req.Workflow,
			By: h.operator(r), Reason: req.Reason}
		if d.Reason == "" {
			d.Reason = "decided by an operator"
		}
		res, err := h.cfg.Ops.DecideHolds(context.WithoutCancel(r.Context()), d)
		switch {
		case errors.Is(err, health.ErrNotMaster):
			h.forward(w, r, body)
		case errors.Is(err, recovery.ErrScope):
			writeError(w, http.StatusBadRequest, afterSentinel(err, recovery.ErrScope))
		case errors.Is(err, recovery.ErrConflict):
			writeProblem(w, http.StatusConflict, "holds changed while the decision ran: nothing of its last batch was applied", "retry the request")
		case err != nil:
			h.internal(w, r, err)
		default:
			h.reqLog(r).InfoContext(r.Context(), "holds decided by an operator", "action", action, "decided", res.Decided,
				"cancelled", len(res.Cancelled), "not_held", len(res.NotHeld), "reason", d.Reason)
			writeJSON(w, http.StatusOK, wireHoldResult(res))
		}
	}
}

func (h *handler) holdsProblem(req apitype.HoldsRequest) string {
	switch {
	case req.All && len(req.Instances) > 0:
		return "body: give instances or all, not both"
	case !req.All && len(req.Instances) == 0:
		return "body: give instances (a list of {workflow, instance}) or all: true"
	case len(req.Instances) > maxRefs:
		return fmt.Sprintf("body.instances: %d instances, more than %d", len(req.Instances), maxRefs)
	case req.Workflow != "" && !req.All:
		return "body.workflow: only with all: true (instances name their workflow)"
	}
	if p := nameProblem(req.Workflow, true); p != "" {
		return "body.workflow: " + p
	}
	if p := textProblem(req.Reason, maxReason); p != "" {
		return "body.reason: " + p
	}
	for i, ref := range req.Instances {
		if p := nameProblem(ref.Workflow, false); p != "" {
			return fmt.Sprintf("body.instances[%d].workflow: %s", i, p)
		}
		if p := nameProblem(ref.Instance, false); p != "" {
			return fmt.Sprintf("body.instances[%d].instance: %s", i, p)
		}
	}
	return ""
}

func (h *handler) retry(w http.ResponseWriter, r *http.Request) {
	var req apitype.RetryRequest
	body, ok := decodeBody(w, r, &req)
	if !ok {
		return
	}
	for _, f := range []struct {
		name, v  string
		optional bool
	}{{"workflow", req.Workflow, false}, {"instance", req.Instance, false}, {"task", req.Task, true}} {
		if p := nameProblem(f.v, f.optional); p != "" {
			writeError(w, http.StatusBadRequest, "body."+f.name+": "+p)
			return
		}
	}
	if p := textProblem(req.Reason, maxReason); p != "" {
		writeError(w, http.StatusBadRequest, "body.reason: "+p)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.cfg.Timeout)
	defer cancel()
	res, err := h.cfg.Ops.Retry(ctx, recovery.ManualRetry{Ref: recovery.Ref{Workflow: req.Workflow, Instance: req.Instance},
		Task: req.Task, By: h.operator(r), Reason: req.Reason})
	switch {
	case errors.Is(err, health.ErrNotMaster):
		h.forward(w, r, body)
	case errors.Is(err, recovery.ErrScope):
		writeError(w, http.StatusBadRequest, afterSentinel(err, recovery.ErrScope))
	case errors.Is(err, recovery.ErrNoInstance):
		writeError(w, http.StatusNotFound, afterSentinel(err, recovery.ErrNoInstance))
	case errors.Is(err, recovery.ErrRefused):
		writeProblem(w, http.StatusConflict, "retry refused", afterSentinel(err, recovery.ErrRefused))
	case errors.Is(err, recovery.ErrConflict):
		writeProblem(w, http.StatusConflict, "the instance changed while the retry ran: nothing was written", "retry the request")
	case err != nil:
		h.internal(w, r, err)
	default:
		h.reqLog(r).InfoContext(ctx, "instance retried by an operator", "workflow", res.Workflow, "instance", res.Instance,
			"task", res.Task, "from", res.From, "manual", res.Manual, "reason", req.Reason)
		writeJSON(w, http.StatusOK, wireRetryResult(res))
	}
}

// afterSentinel returns err's text after sentinel's ("...: refused: the
// instance is claimed" → "the instance is claimed"): the part meant for
// the client.
func afterSentinel(err, sentinel error) string {
	s := err.Error()
	if i := strings.LastIndex(s, sentinel.Error()+": "); i >= 0 {
		return s[i+len(sentinel.Error())+2:]
	}
	return s
}

// instance answers GET /v1/instances/{workflow}/{id} (in "path"
// parameters) and GET /v1/instances?workflow=W&id=X ("query"), the form
// for any id: one with empty, "." or ".." segments has no canonical path.
func (h *handler) instance(in string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var ref recovery.Ref
		for _, p := range []struct {
			name string
			to   *string
		}{{"workflow", &ref.Workflow}, {"id", &ref.Instance}} {
			given := true
			if in == "path" {
				*p.to = r.PathValue(p.name)
			} else {
				*p.to, given = queryValue(r, p.name)
			}
			if !given {
				writeProblem(w, http.StatusBadRequest, in+" parameter "+p.name+": missing", "GET /v1/instances?workflow=W&id=X names both")
				return
			}
			if prob := nameProblem(*p.to, false); prob != "" {
				writeProblem(w, http.StatusBadRequest, in+" parameter "+p.name+": "+prob, "got "+quoteShort(*p.to))
				return
			}
			// The path form takes the rest of the path as the id, whose
			// segments must not be empty: not a trailing slash either.
			if in == "path" && strings.HasSuffix(*p.to, "/") {
				writeProblem(w, http.StatusBadRequest, "path parameter id: ends with a slash",
					"got "+quoteShort(*p.to)+"; an id that does is named by GET /v1/instances?workflow=W&id=X")
				return
			}
		}
		h.instanceOf(w, r, ref)
	}
}

func (h *handler) instanceOf(w http.ResponseWriter, r *http.Request, ref recovery.Ref) {
	p, ok := instanceParams(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	v, err := h.cfg.Ops.Instance(ctx, ref, p)
	switch {
	case errors.Is(err, recovery.ErrScope):
		writeError(w, http.StatusNotFound, afterSentinel(err, recovery.ErrScope))
	case errors.Is(err, recovery.ErrNoInstance):
		writeError(w, http.StatusNotFound, afterSentinel(err, recovery.ErrNoInstance))
	case err != nil:
		h.internal(w, r, err)
	default:
		writeJSON(w, http.StatusOK, wireInstance(v))
	}
}

// instanceParams reads the instance routes' limit, order (oldest, the
// default, or newest) and before (only with order=newest: paging back).
func instanceParams(w http.ResponseWriter, r *http.Request) (recovery.InstanceParams, bool) {
	var p recovery.InstanceParams
	var ok bool
	if p.Limit, ok = intParam(w, r, "limit", recovery.DefaultInstanceEvents); !ok {
		return p, false
	}
	switch order, _ := queryValue(r, "order"); order {
	case "", "oldest":
	case "newest":
		p.Newest = true
	default:
		writeProblem(w, http.StatusBadRequest, "query parameter order: not oldest or newest", "got "+quoteShort(order))
		return p, false
	}
	if p.BeforeID, ok = idParam(w, r, "before"); !ok {
		return p, false
	}
	if _, given := queryValue(r, "before"); given && (!p.Newest || p.BeforeID == 0) {
		writeProblem(w, http.StatusBadRequest, "query parameter before: only with order=newest, and a positive id",
			"page oldest first with GET /v1/events?instance=…&after=")
		return p, false
	}
	return p, true
}

func (h *handler) retryStats(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	st, err := h.cfg.Ops.RetryStats(ctx)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wireAll(st, wireRetryStats))
}
