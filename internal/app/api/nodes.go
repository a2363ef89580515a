// The node routes: GET /v1/nodes and /v1/nodes/{name}, and the
// operator's decisions on a node (POST …/ack, …/reset-grade).

package api

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/nodes"
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

// nodeDecision reads the name and the optional {"reason"} body of an
// operator's decision on a node; false: the request was answered.
func nodeDecision(w http.ResponseWriter, r *http.Request, defaultReason string) (name, reason string, ok bool) {
	name, ok = nameParam(w, r)
	if !ok {
		return "", "", false
	}
	var req apitype.AckRequest
	if _, ok := decodeReasoned(w, r, &req, &req.Reason); !ok {
		return "", "", false
	}
	return name, cmp.Or(req.Reason, defaultReason), true
}

// resetGrade serves POST /v1/nodes/{name}/reset-grade, an operator's reset of a
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
		writeJSON(w, http.StatusOK, wireGradeChange(c))
	}
}

func (h *handler) ackNode(w http.ResponseWriter, r *http.Request) {
	name, reason, ok := nodeDecision(w, r, "acknowledged by an operator")
	if !ok {
		return
	}
	req := apitype.AckRequest{Reason: reason}
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
		writeJSON(w, http.StatusOK, wireNode(n))
	}
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
	writeJSON(w, http.StatusOK, wireAll(ns, wireNode))
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
	writeJSON(w, http.StatusOK, wireNode(n))
}
