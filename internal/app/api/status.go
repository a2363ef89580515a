package api

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// certificates returns this node's certificate files now ([] without
// any).
func (h *handler) certificates() []apitype.Certificate {
	out := []apitype.Certificate{}
	if h.cfg.Certificates == nil {
		return out
	}
	for _, e := range h.cfg.Certificates() {
		out = append(out, apitype.Certificate{Which: e.Which, CN: e.CN, NotAfter: e.NotAfter.UTC(),
			ExpiresInSeconds: math.Round(e.Left.Seconds()), ExpiringSoon: e.Soon()})
	}
	return out
}

func nodeState(n nodes.Node) apitype.NodeState {
	return apitype.NodeState{Name: n.Name, Status: string(n.Status), Grade: n.FailoverGrade, IsMaster: n.IsMaster, LastActive: n.LastActive,
		SecondsSinceActive: n.SecondsSinceActive, Why: nodes.Why(n)}
}

// master looks the acting master up (outside any database slot: the
// lookup takes one briefly itself).
func (h *handler) master(r *http.Request) (*apitype.Leader, string, error) {
	l, err := h.acting(r, leaderLookup)
	var nm *noMaster
	switch {
	case errors.As(err, &nm):
		return nil, strings.Join(nm.reasons, "; "), nil
	case err != nil:
		return nil, "", err
	}
	return &l, "", nil
}

// status reads what Status needs from the database (in a slot), runs
// newest first included up to runs, and returns every node as well.
func (h *handler) status(ctx context.Context, l *apitype.Leader, why string, runs int) (apitype.Status, []apitype.NodeState, []apitype.Run, error) {
	st := apitype.Status{Node: apitype.SelfState{Name: h.cfg.Self, Ready: h.cfg.Ready()}, Master: l, MasterError: why,
		Nodes: map[string]int{}, NotReady: []apitype.NodeState{}, Certificates: h.certificates()}
	if h.cfg.Etcd != nil {
		e := h.cfg.Etcd()
		st.Etcd = &e
	}
	if h.cfg.Build != nil {
		b := *h.cfg.Build
		st.Build = &b
	}
	if l != nil {
		st.Checks, st.Disruption = l.Passes, l.Passes.Disruption
	}
	ns, err := h.cfg.Nodes.List(ctx)
	if err != nil {
		return st, nil, nil, err
	}
	all := make([]apitype.NodeState, 0, len(ns))
	for _, n := range ns {
		s := nodeState(n)
		all = append(all, s)
		st.Nodes[string(n.Status)]++
		if n.Status != nodes.StatusReady || (n.FailoverGrade != "" && n.FailoverGrade != nodes.GradeNormal) {
			st.NotReady = append(st.NotReady, s)
		}
	}
	p, err := h.cfg.Ops.PauseState(ctx)
	if err != nil {
		return st, all, nil, err
	}
	st.Paused = wirePause(p)
	last, err := h.cfg.Ops.Runs(ctx, 1)
	if err != nil {
		return st, all, nil, err
	}
	if len(last) > 0 {
		st.LastRun = new(wireRun(last[0]))
	}
	acted, err := h.cfg.Ops.ActedRuns(ctx, max(runs, 1))
	if err != nil {
		return st, all, nil, err
	}
	rs := wireAll(acted, wireRun)
	if len(rs) > 0 {
		st.LastActed = &rs[0]
	}
	n, oldest, err := h.cfg.Ops.HoldsOpen(ctx)
	st.Holds = apitype.HoldsSummary{Open: n}
	if n > 0 {
		st.Holds.OldestAgeSeconds = new(oldest.Seconds())
	}
	return st, all, rs, err
}

// withMaster looks the acting master up, then runs next in a database
// slot with it (nil, and why, when no node acts).
func (h *handler) withMaster(next func(w http.ResponseWriter, r *http.Request, l *apitype.Leader, why string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		l, why, err := h.master(r)
		if errors.Is(err, errBusy) {
			h.busy(w, r)
			return
		}
		if err != nil {
			h.internal(w, r, err)
			return
		}
		h.limited(func(w http.ResponseWriter, r *http.Request) { next(w, r, l, why) })(w, r)
	}
}

// getStatus serves GET /v1/status.
func (h *handler) getStatus(w http.ResponseWriter, r *http.Request, l *apitype.Leader, why string) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	st, _, _, err := h.status(ctx, l, why, 1)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// getRun serves GET /v1/runs/{id}.
func (h *handler) getRun(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	d, err := h.cfg.Ops.Run(ctx, id)
	switch {
	case errors.Is(err, recovery.ErrNoRun):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no run %d", id))
	case err != nil:
		h.internal(w, r, err)
	default:
		writeJSON(w, http.StatusOK, wireRunDetail(d))
	}
}

//go:embed status.html
var pageHTML string

// Page sizes of the status page.
const (
	pageRuns    = 10
	pageHolds   = 20
	pageWaiting = 20
	pageEvents  = 25
	// pageRefresh is the seconds between the page's reloads.
	pageRefresh = 5
)

// pageFuncs are the status page's template functions (the console's
// too).
var pageFuncs = template.FuncMap{
	"stamp": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"ago":   func(t time.Time) string { return ago(time.Since(t).Seconds()) + " ago" },
	"secs":  ago,
	// due says when a waiting retry runs, from its seconds to go.
	"due": func(s float64) string {
		if s <= 0 {
			return "now: the next pass runs it"
		}
		return "in " + ago(s)
	},
	// retry: "retry k of n" of a waiting retry (n unknown once its task
	// is no longer configured).
	"retry": func(w apitype.WaitingRetry) string {
		if w.MaxAttempts == 0 {
			return fmt.Sprintf("retry %d", w.Attempts+1)
		}
		return fmt.Sprintf("retry %d of %d", w.Attempts+1, w.MaxAttempts)
	},
	// class turns a status into a CSS class ("Not responding" →
	// "Not-responding"); the template escapes it as an attribute.
	"class": func(s string) string { return strings.ReplaceAll(s, " ", "-") },
	"did":   runSummary,
	"about": func(e apitype.Event) string {
		var parts []string
		for _, p := range []*string{e.Node, e.Workflow, e.Instance, e.Task} {
			if p != nil {
				parts = append(parts, *p)
			}
		}
		return strings.Join(parts, " ")
	},
	"change": func(e apitype.Event) string {
		from, to := "", ""
		if e.FromState != nil {
			from = *e.FromState
		}
		if e.ToState != nil {
			to = *e.ToState
		}
		if from == "" && to == "" {
			return ""
		}
		return from + " → " + to
	},
}

var pageTemplate = template.Must(template.New("status").Funcs(pageFuncs).Parse(pageHTML))

// ago says a number of seconds as a person reads it.
func ago(s float64) string {
	switch {
	case s < 90:
		return fmt.Sprintf("%.0f s", s)
	case s < 90*60:
		return fmt.Sprintf("%.0f min", s/60)
	case s < 48*3600:
		return fmt.Sprintf("%.1f h", s/3600)
	}
	return fmt.Sprintf("%.0f days", s/86400)
}

// runSummary says what a run did.
func runSummary(r apitype.Run) string {
	s := fmt.Sprintf("%d claims expired, %d of %d instances repaired", r.ClaimsExpired, r.Done, r.Planned)
	if r.ResumedFrom != nil {
		s += fmt.Sprintf(", resumes run %d", *r.ResumedFrom)
	}
	if r.Error != "" {
		s += "; " + r.Error
	}
	return s
}

// pageData is what the status page shows.
type pageData struct {
	Self    string
	Now     time.Time
	Refresh int
	Status  apitype.Status
	// Banners reports whether some banner is shown (the title says so).
	Banners bool
	// Error means the database could not be read; what is known is shown.
	Error  string
	Nodes  []apitype.NodeState
	Runs   []apitype.Run
	Holds  []apitype.Hold
	Events []apitype.Event

	// Waiting lists retries waiting for their time, soonest first, at most
	// WaitingMax.
	Waiting    []apitype.WaitingRetry
	WaitingMax int
}

// page serves GET /, the status page. Server-rendered, self-contained (no
// script, no external asset: the Content-Security-Policy forbids both),
// reloaded every few seconds; every stored text is escaped by
// html/template.
func (h *handler) page(w http.ResponseWriter, r *http.Request, l *apitype.Leader, why string) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	d := pageData{Self: h.cfg.Self, Now: time.Now(), Refresh: pageRefresh, WaitingMax: pageWaiting}
	code := http.StatusOK
	err := func() error {
		var err error
		if d.Status, d.Nodes, d.Runs, err = h.status(ctx, l, why, pageRuns); err != nil {
			return err
		}
		hs, err := h.cfg.Ops.Holds(ctx, "", pageHolds)
		if err != nil {
			return err
		}
		d.Holds = wireAll(hs, wireHold)
		ws, err := h.cfg.Ops.Waiting(ctx, "", pageWaiting)
		if err != nil {
			return err
		}
		d.Waiting = wireAll(ws, wireWaiting)
		es, err := h.recentEvents(ctx, pageEvents)
		d.Events = wireAll(es, wireEvent)
		return err
	}()
	if err != nil {
		// The person sees what could be read and that the rest could not.
		h.reqLog(r).ErrorContext(r.Context(), "status page: read failed", "err", err.Error())
		d.Error = "the database could not be read (the daemon logged the cause under request id " + w.Header().Get(requestIDHeader) + ")"
		code = http.StatusServiceUnavailable
	}
	d.Banners = d.Error != "" || d.Status.Paused.Paused || d.Status.Disruption != "" || d.Status.Master == nil ||
		d.Status.Etcd != nil && !d.Status.Etcd.Reachable ||
		slices.ContainsFunc(d.Status.Certificates, func(c apitype.Certificate) bool { return c.ExpiringSoon })
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	// html/template escapes markup; stored text may also hold control,
	// invisible or reordering characters (an engine's error text): shown
	// as escapes, as the CLI shows them.
	terminalSafe(reflect.ValueOf(&d).Elem())
	if err := pageTemplate.Execute(w, d); err != nil {
		h.reqLog(r).ErrorContext(r.Context(), "status page: render", "err", err.Error())
	}
}

// terminalSafe replaces, in place, every string reachable from v through
// exported struct fields, pointers and slices with TerminalSafe's.
func terminalSafe(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(TerminalSafe(v.String()))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			terminalSafe(v.Elem())
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			terminalSafe(v.Index(i))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				terminalSafe(v.Field(i))
			}
		}
	}
}

// recentEvents returns the newest n events, oldest first.
func (h *handler) recentEvents(ctx context.Context, n int) ([]audit.Event, error) {
	if h.cfg.LastEventID == nil {
		return nil, nil
	}
	last, err := h.cfg.LastEventID(ctx)
	if err != nil {
		return nil, err
	}
	return h.cfg.Events(ctx, audit.ListParams{AfterID: max(last-int64(n), 0), Limit: n, MaxTextBytes: maxEventText})
}
