// The reads of the record: GET /v1/runs and /v1/events.

package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/nodes"
)

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
	writeJSON(w, http.StatusOK, wireAll(runs, wireRun))
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
	var kind string
	for _, f := range []struct {
		name string
		dst  *string
	}{{"workflow", &p.Workflow}, {"instance", &p.Instance}, {"kind", &kind}} {
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
	if p.Kind = audit.Kind(kind); p.Kind != "" && !p.Kind.Valid() {
		writeProblem(w, http.StatusBadRequest, "query parameter kind: not an event kind", "got "+quoteShort(kind)+"; kinds: "+eventKinds)
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
	writeJSON(w, http.StatusOK, wireAll(es, wireEvent))
}

// eventKinds are the kinds of events the sidecar writes, as a problem's
// detail lists them.
var eventKinds = func() string {
	ks := make([]string, len(audit.Kinds))
	for i, k := range audit.Kinds {
		ks[i] = string(k)
	}
	return strings.Join(ks, ", ")
}()

// maxEventText bounds the text of the events in one answer (256 KiB; its
// JSON is at most about six times that, when every character needs an
// escape): a page may end before limit, and the client pages on with
// after= the last id.
const maxEventText = 256 << 10

// Page sizes of GET /v1/runs and /v1/events when limit is not given (the
// CLI's --limit defaults), and the most a request may ask for.
const (
	DefaultRunsLimit   = 20
	DefaultEventsLimit = audit.DefaultListLimit
	MaxLimit           = maxIntParam
)
