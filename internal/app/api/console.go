package api

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// The operator console under /console: sign-in (a session, session.go),
// finding an instance by id, its page (state, claim, attempts rows and
// its timeline from the events, newest first, paged back), and the
// actions an operate operator takes there (a hold's retry or fail, a
// retry now of an exhausted or failed instance, pause and resume), each
// with a required reason.
//
// Pages are rendered on the server, with no script; their stylesheet is
// the static /static/eh.css (the Content-Security-Policy allows no
// inline style or script). Every action is a form posted to
// /console/act with the session's CSRF token; the console checks the
// session, the token and the role, then calls the API's own route
// (POST /v1/holds/retry, /v1/retry, …) with the session's operator token,
// as the CLI would: the same checks, the forwarding to the master, the
// same audit event with the operator's name. The answer is shown on the
// page the action redirects to, with the event it wrote.

//go:embed console.html
var consoleHTML string

//go:embed static/eh.css
var styleCSS []byte

// consoleTemplate: the status page's functions, and show (TerminalSafe:
// stored text with control, invisible or reordering characters shown as
// escapes; the template escapes markup).
var consoleTemplate = template.Must(template.New("console").Funcs(pageFuncs).Funcs(template.FuncMap{"show": TerminalSafe,
	"list":  func(s ...string) []string { return s },
	"int64": func(n int) int64 { return int64(n) },
	"sub":   func(a int64, b int) int64 { return a - int64(b) },
	"plural": func(n int, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return strconv.Itoa(n) + " " + many
	},
}).Parse(consoleHTML))

// consoleCSP: nothing but this origin's stylesheet, forms posted here,
// no script, no frame.
const consoleCSP = "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// viewer is who reads a console page: signed in (a session), named by a
// client certificate, or no one (reads open without api.auth_reads).
type viewer struct {
	Name string
	Role Role
	Cert bool
	// Signed means by a session (CSRF, cookie: only it can act).
	Signed bool
	CSRF   string

	sess   session
	cookie string
	// stale means the request carried a session cookie that is no
	// longer good (expired, signed out, its token removed).
	stale bool
}

func (v viewer) canAct() bool { return v.Signed && v.Role.covers(RoleOperate) }

// consoleData is what a console page shows.
type consoleData struct {
	Page, Title string
	Self        string
	Who         viewer
	Flash       *flash
	// Wrote is the event the flash's action wrote, when the page shows it.
	Wrote   *apitype.Event
	Problem string
	CanAct  bool
	// StatusLink: the status page (/) reads without a token (it takes
	// no console session).
	StatusLink bool

	// signin
	Next        string
	NoOperators bool
	Insecure    bool
	SessionTTL  string

	// search
	Workflows []string
	Query     apitype.Ref
	Searched  bool
	Matches   []apitype.Ref
	Pause     *apitype.Pause

	// instance
	View          *apitype.InstanceView
	Before, Older int64
	// RetryTasks are the tasks it may be retried in now (retry now).
	RetryTasks []string

	// held, waiting (lists), confirm (a bulk decision)
	Filter  parkedFilter
	Parked  []apitype.WaitingRetry
	Total   int64
	Bulk    *bulkDecision
	Listed  int
	ListMax int

	// day
	Day *dayChart

	// doctor
	Doctor *doctorPage

	// guard: a forced check's confirmation
	Guard *guardView
}

// guardView is what the disruption guard sees, shown before a check is
// forced through it.
type guardView struct {
	Reason string
	// Holds is the acting master's last word on the guard ("" when its
	// last pass was not stopped by it).
	Holds string
	// Master names the acting master ("" when none acts: a forced check
	// then fails, as the CLI's would).
	Master string
	// Nodes are the nodes least recently active, first the stalest.
	Nodes []apitype.NodeState
	Total int
	// Seen names this view (a hash of what the guard holds and of the
	// nodes' statuses): the confirmation carries it.
	Seen string
}

// seen hashes what the guard holds and the nodes' names and statuses.
func (g *guardView) seen() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", g.Holds, g.Master)
	// By name: the list's order (staleness) changes from one look to
	// the next.
	ns := slices.SortedFunc(slices.Values(g.Nodes), func(a, b apitype.NodeState) int { return cmp.Compare(a.Name, b.Name) })
	for _, n := range ns {
		fmt.Fprintf(h, "%s\x00%s\x00", n.Name, n.Status)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// doctorPage is what the protocol doctor found in the last day.
type doctorPage struct {
	Kinds []doctorKind
	Total int64
}

// doctorKind is one kind of violation: what it means, its counts by
// workflow and node, its latest findings.
type doctorKind struct {
	Kind, About string
	Total       int64
	Counts      []recovery.ViolationCount
	Latest      []recovery.Violation
}

// violationAbout says what each kind of violation means, and what an
// engine did to cause it.
var violationAbout = map[string]string{
	recovery.ViolationClaimWithoutNode:     "A claim is held by a node name no sidecar registered: the engine's node.name differs from its sidecar's, or a node was forgotten while its engine went on.",
	recovery.ViolationClaimNotInterim:      "A claim is on an instance that is gone, or in no task's interim state: the engine moved the instance without deleting its claim, or claimed without entering the interim state (rules 1 and 3).",
	recovery.ViolationInterimWithoutClaim:  "An instance was repaired out of an interim state with no claim on it and none seen expiring: the engine entered the state without a claim, or deleted its claim and left the instance there.",
	recovery.ViolationClaimByNotResponding: "A node marked Not responding took or renewed a claim after it was marked: its engine runs while its sidecar is down or cut off.",
	recovery.ViolationLateWrite:            "A repair was lost to a late write: someone changed instances between the repair's read and its write, which the protocol rules out for unclaimed interim instances (an engine moved or claimed an instance it held no claim on).",
}

// parkedFilter is a list's filters as the form has them.
type parkedFilter struct {
	Workflow, Task, Node, Cause, Older string
}

// query is the filters as a URL query (the list's link).
func (f parkedFilter) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"workflow": f.Workflow, "task": f.Task, "node": f.Node, "cause": f.Cause, "older": f.Older} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// bulkDecision is a decision on every held (or waiting) instance a
// filter selects, shown for confirmation with their count.
type bulkDecision struct {
	State, Action, Reason string
	Count                 int64
	// Capped: more match than one decision takes (Max).
	Max    int
	Capped bool
	// Set names the instances shown (setOf); Unnamed counts those of
	// them whose ids the API takes no request for (left alone).
	Set     string
	Unnamed int
}

// Mine reports whether e was written by the action the page's flash
// reports: after it began, by the viewer.
func (d consoleData) Mine(e apitype.Event) bool {
	return d.Flash != nil && d.Flash.After > 0 && e.ID > d.Flash.After && e.Actor == d.Who.Name+" (operator)"
}

// consoleRoutes adds the console's routes to mux.
func (h *handler) consoleRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /static/eh.css", only(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(styleCSS)
	}))
	page := h.consoleOnly
	mux.HandleFunc("GET /console/signin", page(h.signinPage, "next"))
	mux.HandleFunc("POST /console/signin", page(h.signin))
	mux.HandleFunc("POST /console/signout", page(h.signout))
	mux.HandleFunc("GET /console", page(h.consoleRead(h.searchPage), "workflow", "id"))
	mux.HandleFunc("GET /console/instance", page(h.consoleRead(h.instancePage), "workflow", "id", "before"))
	mux.HandleFunc("GET /console/held", page(h.consoleRead(h.parkedPage(recovery.AttemptHeld)), "workflow", "task", "node", "cause", "older"))
	mux.HandleFunc("GET /console/waiting", page(h.consoleRead(h.parkedPage(recovery.AttemptWaiting)), "workflow", "task", "node", "cause", "older"))
	mux.HandleFunc("GET /console/day", page(h.consoleRead(h.dayPage)))
	mux.HandleFunc("GET /console/doctor", page(h.consoleRead(h.doctorPage)))
	mux.HandleFunc("POST /console/act", page(h.act))
	// Any other path under /console: a page that says so (405 with
	// Allow when the path is a page's under another method).
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		if allow := allowed(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			h.consoleProblem(w, r, http.StatusMethodNotAllowed, viewer{}, "No such action: "+quoteShort(r.Method)+" "+quoteShort(r.URL.Path)+
				" (use "+strings.Join(allow, " or ")+").")
			return
		}
		h.consoleProblem(w, r, http.StatusNotFound, viewer{}, "No such page: "+quoteShort(r.URL.Path)+".")
	})
}

// consoleOnly is only for the console's pages: a query parameter the
// page does not take is answered with a page naming it (a link a chat
// tool added ?utm_… to says what is wrong).
func (h *handler) consoleOnly(next http.HandlerFunc, names ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k := range r.URL.Query() {
			if !slices.Contains(names, k) {
				takes := "this page takes none"
				if len(names) > 0 {
					takes = "this page takes " + strings.Join(names, ", ")
				}
				h.consoleProblem(w, r, http.StatusBadRequest, viewer{}, "Query parameter "+quoteShort(k)+" is unknown: "+takes+".")
				return
			}
		}
		next(w, r)
	}
}

// problem answers a request the edge refuses: a console page under
// /console, else the API's error body.
func (h *handler) problem(w http.ResponseWriter, r *http.Request, code int, msg, detail string) {
	if r.URL.Path == "/console" || strings.HasPrefix(r.URL.Path, "/console/") {
		h.consoleProblem(w, r, code, viewer{}, strings.TrimSuffix("Refused: "+msg+"; "+detail, "; ")+".")
		return
	}
	writeProblem(w, code, msg, detail)
}

// viewerOf finds who sends r: its session, else what the authenticator
// reads in the request itself (a client certificate, a bearer token).
func (h *handler) viewerOf(r *http.Request) viewer {
	var v viewer
	if c, err := r.Cookie(sessionCookie); err == nil {
		ss, ok := h.sessions.get(c.Value)
		if ok && h.cfg.Auth != nil {
			if id, err := h.cfg.Auth.Authenticate(withToken(r, ss.token)); err == nil {
				return viewer{Name: id.Name, Role: id.Role, Signed: true, CSRF: ss.csrf, sess: ss, cookie: c.Value}
			}
			h.sessions.drop(c.Value) // its token is no longer an operator's
		}
		v.stale = true
	}
	if h.cfg.Auth != nil {
		if id, err := h.cfg.Auth.Authenticate(r); err == nil {
			v.Name, v.Role, v.Cert = id.Name, id.Role, id.Cert
		}
	}
	return v
}

// withToken returns a copy of r carrying token as its only credential.
func withToken(r *http.Request, token string) *http.Request {
	c := r.Clone(r.Context())
	c.Header = http.Header{"Authorization": {"Bearer " + token}}
	return c
}

// consoleRead serves a console page that reads: to anyone when reads
// are open, else to a viewer with a name (others are sent to sign in).
func (h *handler) consoleRead(next func(w http.ResponseWriter, r *http.Request, d consoleData)) http.HandlerFunc {
	return h.limited(func(w http.ResponseWriter, r *http.Request) {
		v := h.viewerOf(r)
		if h.cfg.AuthReads && v.Name == "" {
			http.Redirect(w, r, "/console/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		d := consoleData{Self: h.cfg.Self, Who: v, CanAct: v.canAct(), StatusLink: !h.cfg.AuthReads}
		if v.Signed {
			d.Flash = h.sessions.takeFlash(v.cookie, r.URL.RequestURI())
		}
		if v.stale {
			d.Problem = "Your session has ended (it expired, or you signed out, or your token was removed): sign in again to act."
		}
		next(w, r, d)
	})
}

// renderConsole writes a console page.
func (h *handler) renderConsole(w http.ResponseWriter, r *http.Request, code int, d consoleData) {
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Content-Security-Policy", consoleCSP)
	hdr.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: a browser then sends the Origin of
	// this console's own forms (with no-referrer it sends "null", which
	// sameOrigin refuses), and no URL (instance ids) to other sites.
	hdr.Set("Referrer-Policy", "same-origin")
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if err := consoleTemplate.Execute(w, d); err != nil {
		h.reqLog(r).ErrorContext(r.Context(), "console: render", "page", d.Page, "err", err.Error())
	}
}

// consoleProblem answers a console request that cannot be served with a
// page saying why.
func (h *handler) consoleProblem(w http.ResponseWriter, r *http.Request, code int, v viewer, text string) {
	h.renderConsole(w, r, code, consoleData{Page: "message", Title: http.StatusText(code), Self: h.cfg.Self, Who: v, Problem: text})
}

// searchPage serves GET /console: the search form; with an id, the
// instances of that id (a workflow's, or every workflow's): one found
// opens its page.
func (h *handler) searchPage(w http.ResponseWriter, r *http.Request, d consoleData) {
	d.Page, d.Title, d.Workflows = "search", "find an instance", h.cfg.Ops.Workflows()
	d.Query.Workflow, _ = queryValue(r, "workflow")
	id, given := queryValue(r, "id")
	d.Query.Instance = id
	code := http.StatusOK
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	if given && id != "" {
		if p := idProblem(id); p != "" {
			d.Problem, code = "The id: "+p+".", http.StatusBadRequest
		} else {
			wfs := d.Workflows
			if d.Query.Workflow != "" {
				wfs = []string{d.Query.Workflow}
			}
			d.Searched = true
			for _, wf := range wfs {
				v, err := h.cfg.Ops.Instance(ctx, recovery.Ref{Workflow: wf, Instance: id}, recovery.InstanceParams{Limit: 1})
				switch {
				case errors.Is(err, recovery.ErrNoInstance):
				case errors.Is(err, recovery.ErrScope):
					d.Problem, code = afterSentinel(err, recovery.ErrScope)+".", http.StatusNotFound
				case err != nil:
					h.consoleInternal(w, r, d.Who, err)
					return
				default:
					d.Matches = append(d.Matches, apitype.Ref{Workflow: wf, Instance: v.Instance})
				}
			}
			if len(d.Matches) == 1 {
				m := d.Matches[0]
				http.Redirect(w, r, instanceURL(m.Workflow, m.Instance, 0), http.StatusSeeOther)
				return
			}
			if len(d.Matches) == 0 && code == http.StatusOK {
				code = http.StatusNotFound
			}
		}
	}
	p, err := h.cfg.Ops.PauseState(ctx)
	if err != nil {
		h.consoleInternal(w, r, d.Who, err)
		return
	}
	d.Pause = new(wirePause(p))
	h.renderConsole(w, r, code, d)
}

// instanceURL is the console page of an instance (its events before
// before, when set).
func instanceURL(workflow, id string, before int64) string {
	q := url.Values{"workflow": {workflow}, "id": {id}}
	if before > 0 {
		q.Set("before", fmt.Sprint(before))
	}
	return "/console/instance?" + q.Encode()
}

// consolePageEvents is the events an instance page shows at once.
const consolePageEvents = 50

// instancePage serves GET /console/instance?workflow=W&id=X[&before=N].
func (h *handler) instancePage(w http.ResponseWriter, r *http.Request, d consoleData) {
	d.Page = "instance"
	var ref recovery.Ref
	for _, p := range []struct {
		name string
		to   *string
	}{{"workflow", &ref.Workflow}, {"id", &ref.Instance}} {
		*p.to, _ = queryValue(r, p.name)
		prob := nameProblem(*p.to, false)
		if p.name == "id" {
			prob = idProblem(*p.to)
		}
		if prob != "" {
			h.consoleProblem(w, r, http.StatusBadRequest, d.Who, "Query parameter "+p.name+": "+prob+".")
			return
		}
	}
	var before int64
	if v, given := queryValue(r, "before"); given {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			h.consoleProblem(w, r, http.StatusBadRequest, d.Who, "Query parameter before: not a positive event id (got "+quoteShort(v)+").")
			return
		}
		before = n
	}
	d.Title, d.Before = ref.Workflow+" / "+ref.Instance, before
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	v, err := h.cfg.Ops.Instance(ctx, ref, recovery.InstanceParams{Limit: consolePageEvents, Newest: true, BeforeID: before})
	switch {
	case errors.Is(err, recovery.ErrScope):
		h.consoleProblem(w, r, http.StatusNotFound, d.Who, afterSentinel(err, recovery.ErrScope)+".")
		return
	case errors.Is(err, recovery.ErrNoInstance):
		h.consoleProblem(w, r, http.StatusNotFound, d.Who, afterSentinel(err, recovery.ErrNoInstance)+".")
		return
	case err != nil:
		h.consoleInternal(w, r, d.Who, err)
		return
	}
	wv := wireInstance(v)
	d.View = &wv
	// Retry now: in a task whose failed state it is in, or whose attempts
	// row says exhausted or failed (not one it is held in: decided above).
	held := map[string]bool{}
	for _, a := range v.Attempts {
		if a.State == recovery.AttemptHeld {
			held[a.Task] = true
		}
	}
	for _, a := range v.Attempts {
		if (a.State == recovery.AttemptExhausted || a.State == recovery.AttemptFailed) && !slices.Contains(d.RetryTasks, a.Task) {
			d.RetryTasks = append(d.RetryTasks, a.Task)
		}
	}
	for _, t := range v.FailedIn {
		if !held[t] && !slices.Contains(d.RetryTasks, t) {
			d.RetryTasks = append(d.RetryTasks, t)
		}
	}
	if n := len(wv.Events); n > 0 && wv.Truncated {
		d.Older = wv.Events[n-1].ID
	}
	for i := range wv.Events {
		if d.Mine(wv.Events[i]) {
			d.Wrote = &wv.Events[i] // the newest the action wrote
			break
		}
	}
	h.renderConsole(w, r, http.StatusOK, d)
}

// idProblem says why an instance id cannot be looked up ("" when it
// can): the console reads any id an engine may have written (its pages
// escape what they show), but not an empty one, invalid UTF-8, a NUL
// byte or a longer one than the API's names.
func idProblem(id string) string {
	switch {
	case id == "":
		return "empty"
	case !utf8.ValidString(id):
		return "not valid UTF-8"
	case strings.ContainsRune(id, 0):
		return "a NUL byte"
	case len(id) > maxName:
		return fmt.Sprintf("%d bytes, longer than %d", len(id), maxName)
	}
	return ""
}

// consoleListMax is the rows a list page shows.
const consoleListMax = 200

// filterOf reads a list's filters from v (a query or a form): names as
// the API takes them, a cause, an age as a Go duration ("90m").
func filterOf(v url.Values, state string) (parkedFilter, recovery.ParkedFilter, string) {
	pf := parkedFilter{Workflow: v.Get("workflow"), Task: v.Get("task"), Node: v.Get("node"), Cause: v.Get("cause"), Older: v.Get("older")}
	f := recovery.ParkedFilter{State: state, Workflow: pf.Workflow, Task: pf.Task, Node: pf.Node, Cause: recovery.Cause(pf.Cause)}
	for _, c := range []struct{ name, v string }{{"workflow", pf.Workflow}, {"task", pf.Task}, {"node", pf.Node}} {
		if p := nameProblem(c.v, true); p != "" {
			return pf, f, "the filter " + c.name + ": " + p
		}
	}
	switch f.Cause {
	case "", recovery.CauseInterrupt, recovery.CauseFailure:
	default:
		return pf, f, "the filter cause: " + quoteShort(pf.Cause) + " is not interrupt or failure"
	}
	if pf.Older != "" {
		d, err := time.ParseDuration(pf.Older)
		if err != nil || d < 0 || d > 365*24*time.Hour {
			return pf, f, "the filter older: " + quoteShort(pf.Older) + " is not a duration such as 90m or 12h, from 0 to a year (8760h)"
		}
		f.OlderThan = d
	}
	return pf, f, ""
}

// parkedPage serves GET /console/held and /console/waiting: the held
// (or waiting) instances a filter selects, their count, and for an
// operate operator the bulk decision on the holds.
func (h *handler) parkedPage(state string) func(w http.ResponseWriter, r *http.Request, d consoleData) {
	return func(w http.ResponseWriter, r *http.Request, d consoleData) {
		d.Page, d.Title, d.Workflows, d.ListMax = state, state, h.cfg.Ops.Workflows(), consoleListMax
		if state == recovery.AttemptHeld {
			d.Title = "held instances"
		} else {
			d.Title = "retries waiting"
		}
		var f recovery.ParkedFilter
		var problem string
		d.Filter, f, problem = filterOf(r.URL.Query(), state)
		if problem != "" {
			d.Problem = "Refused: " + problem + "."
			h.renderConsole(w, r, http.StatusBadRequest, d)
			return
		}
		f.Limit = consoleListMax
		ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
		defer cancel()
		ps, total, err := h.cfg.Ops.Parked(ctx, f)
		switch {
		case errors.Is(err, recovery.ErrScope):
			d.Problem = afterSentinel(err, recovery.ErrScope) + "."
			h.renderConsole(w, r, http.StatusNotFound, d)
			return
		case err != nil:
			h.consoleInternal(w, r, d.Who, err)
			return
		}
		d.Parked, d.Total, d.Listed = wireAll(ps, wireWaiting), total, len(ps)
		h.renderConsole(w, r, http.StatusOK, d)
	}
}

// bulkRetriesMax bounds the waiting retries one bulk "retry now" runs
// (an API call each).
const bulkRetriesMax = 200

// bulk serves a bulk decision on the instances a filter selects: held
// ones retried or failed (POST /v1/holds/{retry,fail}, at most maxRefs
// at once), or waiting ones retried now (POST /v1/retry each, at most
// bulkRetriesMax). First (without confirmed) a page shows their count
// and asks to confirm; then, with confirmed the count shown, the
// decision on the instances the filter selects now, unless their count
// changed since.
func (h *handler) bulk(w http.ResponseWriter, r *http.Request, v viewer, state, action string) {
	form := r.PostForm
	pf, f, problem := filterOf(form, state)
	reason := form.Get("reason")
	switch {
	case problem != "":
	case strings.TrimSpace(reason) == "":
		problem = "a reason is required: it is recorded in the audit trail"
	case textProblem(reason, maxReason) != "":
		problem = "the reason: " + textProblem(reason, maxReason)
	}
	if problem != "" {
		h.consoleProblem(w, r, http.StatusBadRequest, v, "Refused: "+problem+".")
		return
	}
	f.Limit = maxRefs
	if state == recovery.AttemptWaiting {
		f.Limit = bulkRetriesMax
	}
	if form.Has("confirmed") {
		// One decision of the session at a time: the second post of a
		// double-click reads the set after the first decided it.
		defer h.sessions.lockBulk(v.cookie)()
	}
	ps, total, err := h.cfg.Ops.Parked(r.Context(), f)
	switch {
	case errors.Is(err, recovery.ErrScope):
		h.consoleProblem(w, r, http.StatusNotFound, v, afterSentinel(err, recovery.ErrScope)+".")
		return
	case err != nil:
		h.consoleInternal(w, r, v, err)
		return
	}
	back := "/console/" + state
	if q := pf.query().Encode(); q != "" {
		back += "?" + q
	}
	// The instances the API can name (the others are left, and said).
	var named []recovery.WaitingRetry
	var unnamed []string
	for _, p := range ps {
		if nameProblem(p.Workflow, false) == "" && nameProblem(p.Instance, false) == "" {
			named = append(named, p)
		} else if len(unnamed) < 3 {
			unnamed = append(unnamed, TerminalSafe(p.Workflow+"/"+p.Instance))
		}
	}
	set, left := setOf(ps), len(ps)-len(named)
	if !form.Has("confirmed") {
		d := consoleData{Page: "confirm", Title: "confirm " + action + " of " + state + " instances", Self: h.cfg.Self, Who: v, CanAct: true,
			Filter: pf, Parked: wireAll(ps[:min(len(ps), 20)], wireWaiting), Total: total,
			Bulk: &bulkDecision{State: state, Action: action, Reason: reason, Count: total, Max: f.Limit, Capped: total > int64(f.Limit), Set: set,
				Unnamed: left}}
		h.renderConsole(w, r, http.StatusOK, d)
		return
	}
	confirmed, err := strconv.ParseInt(form.Get("confirmed"), 10, 64)
	if err != nil {
		h.consoleProblem(w, r, http.StatusBadRequest, v, "Refused: the confirmation's count "+quoteShort(form.Get("confirmed"))+" is not a number.")
		return
	}
	// The decision: its page (the list and its filters), action and set.
	key := back + "\n" + action + "\n" + form.Get("set")
	if confirmed != total || form.Get("set") != set {
		if last, ok := h.sessions.lastDecided(v.cookie); ok && last.key == key {
			// This very decision was just made (a double-click, a
			// resubmitted form): its result again, not "nothing decided".
			h.sessions.setFlash(v.cookie, last.fl)
			http.Redirect(w, r, back, http.StatusSeeOther) //nolint:gosec // G710: /console/held or /console/waiting and an encoded query, never another site
			return
		}
		h.sessions.setFlash(v.cookie, flash{For: back, Text: fmt.Sprintf("Nothing was decided: the instances that match changed since you confirmed (%d then, %d now). Review the list and decide again.",
			confirmed, total)})
		http.Redirect(w, r, back, http.StatusSeeOther) //nolint:gosec // G710: /console/held or /console/waiting and an encoded query, never another site
		return
	}
	ps = named
	fl := flash{For: back}
	if h.cfg.LastEventID != nil {
		if fl.After, err = h.cfg.LastEventID(r.Context()); err != nil {
			h.consoleInternal(w, r, v, err)
			return
		}
	}
	switch {
	case len(ps) == 0:
		fl.Text = "Nothing to decide: no instance the API can name matches."
	case state == recovery.AttemptHeld:
		refs := make([]apitype.Ref, len(ps))
		for i, p := range ps {
			refs[i] = apitype.Ref{Workflow: p.Workflow, Instance: p.Instance}
		}
		code, body := h.callAPI(r, v.sess.token, "/v1/holds/"+action, apitype.HoldsRequest{Instances: refs, Reason: reason})
		fl.Text, fl.OK = answerText(code, body, func(b []byte) (string, bool) {
			var res apitype.HoldResult
			if json.Unmarshal(b, &res) != nil {
				return "", false
			}
			return fmt.Sprintf("%d of %d holds decided: %s; %d closed without the decision (the instance had moved), %d no longer held.",
				res.Decided, len(refs), res.Action, len(res.Cancelled), len(res.NotHeld)), res.Decided > 0
		})
	default:
		var retried int
		var refused []string
		for _, p := range ps {
			code, body := h.callAPI(r, v.sess.token, "/v1/retry", apitype.RetryRequest{Workflow: p.Workflow, Instance: p.Instance, Task: p.Task, Reason: reason})
			if code == http.StatusOK {
				retried++
				continue
			}
			if len(refused) < 3 {
				text, _ := answerText(code, body, nil)
				refused = append(refused, p.Workflow+"/"+p.Instance+": "+text)
			}
		}
		fl.OK = retried > 0
		fl.Text = fmt.Sprintf("%d of %d waiting retries run now.", retried, len(ps))
		if len(refused) > 0 {
			fl.Text += " Not retried: " + strings.Join(refused, "; ")
			if n := len(ps) - retried - len(refused); n > 0 {
				fl.Text += fmt.Sprintf("; and %d more", n)
			}
			fl.Text += "."
		}
	}
	if left > 0 {
		fl.Text += fmt.Sprintf(" Left alone: %d whose ids the API cannot name (%s): decide them with holds retry --all (or holds fail --all) --workflow W.",
			left, strings.Join(unnamed, ", "))
	}
	h.sessions.setDecided(v.cookie, key, fl)
	http.Redirect(w, r, back, http.StatusSeeOther) //nolint:gosec // G710: as above
}

// setOf names a set of instances (a hash of their workflows and ids): a
// bulk decision confirmed for one set is not made on another.
func setOf(ps []recovery.WaitingRetry) string {
	h := sha256.New()
	for _, p := range ps {
		fmt.Fprintf(h, "%d:%s%d:%s", len(p.Workflow), p.Workflow, len(p.Instance), p.Instance)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// guardNodes bounds the nodes a forced check's confirmation lists.
const guardNodes = 25

// checkNow serves a check pass asked from the console: at once, or
// forced through the disruption guard, which first (without confirmed)
// shows what the guard sees and asks to confirm.
func (h *handler) checkNow(w http.ResponseWriter, r *http.Request, v viewer, force bool) {
	form := r.PostForm
	reason := form.Get("reason")
	switch {
	case strings.TrimSpace(reason) == "":
		h.consoleProblem(w, r, http.StatusBadRequest, v, "Refused: a reason is required: it is recorded in the audit trail (a forced check's in a guard_override event).")
		return
	case textProblem(reason, maxReason) != "":
		h.consoleProblem(w, r, http.StatusBadRequest, v, "Refused: the reason: "+textProblem(reason, maxReason)+".")
		return
	}
	if force {
		g := &guardView{Reason: reason}
		l, why, err := h.master(r)
		switch {
		case err != nil:
			h.consoleInternal(w, r, v, err)
			return
		case l == nil:
			g.Holds = "no node acts as master: " + why
		default:
			g.Master, g.Holds = l.Name, l.Passes.Disruption
		}
		ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
		defer cancel()
		ns, err := h.cfg.Nodes.List(ctx)
		if err != nil {
			h.consoleInternal(w, r, v, err)
			return
		}
		slices.SortFunc(ns, func(a, b nodes.Node) int { return cmp.Compare(b.SecondsSinceActive, a.SecondsSinceActive) })
		g.Total = len(ns)
		for _, n := range ns[:min(len(ns), guardNodes)] {
			g.Nodes = append(g.Nodes, nodeState(n))
		}
		g.Seen = g.seen()
		// Forced only as confirmed for what the guard sees now: a page
		// confirmed later, on another view, is shown again.
		if got := form.Get("confirmed"); got != g.Seen {
			d := consoleData{Page: "guard", Title: "force a check through the guard", Self: h.cfg.Self, Who: v, CanAct: true, Guard: g}
			if got != "" {
				d.Problem = "What the guard sees changed since you confirmed: review it, and confirm again."
			}
			h.renderConsole(w, r, http.StatusOK, d)
			return
		}
	}
	fl := flash{}
	code, body := h.callAPI(r, v.sess.token, "/v1/check", apitype.CheckRequest{Force: force, Reason: reason})
	fl.Text, fl.OK = answerText(code, body, func(b []byte) (string, bool) {
		var res apitype.CheckResult
		if json.Unmarshal(b, &res) != nil {
			return "", false
		}
		switch {
		case res.Disruption:
			return fmt.Sprintf("Check run %d did nothing: the disruption guard holds (%s).", res.RunID, res.DisruptionReason), false
		case res.Paused != nil:
			return fmt.Sprintf("Check run %d marked nodes but repaired nothing: automatic repair is paused.", res.RunID), true
		}
		s := fmt.Sprintf("Check run %d: %d claims expired, %d instances repaired, %d nodes marked Not responding.", res.RunID,
			res.Recovery.ClaimsExpired, res.Recovery.Done(), len(res.NotResponding))
		if res.Forced {
			s += " The guard was overridden (" + res.DisruptionReason + "), recorded with your reason."
		}
		return s, true
	})
	fl.For = "/console"
	h.sessions.setFlash(v.cookie, fl)
	http.Redirect(w, r, "/console", http.StatusSeeOther)
}

// answerText says what an API answer means: done's reading of a 200,
// else the error it names.
func answerText(code int, body []byte, done func([]byte) (string, bool)) (string, bool) {
	if code == http.StatusOK {
		if s, ok := done(body); s != "" {
			return s, ok
		}
		return "The API's answer could not be read.", false
	}
	var e apitype.ErrorBody
	_ = json.Unmarshal(body, &e)
	s := fmt.Sprintf("Refused (%d): %s", code, cmp.Or(e.Error, http.StatusText(code)))
	if e.Detail != "" {
		s += " — " + e.Detail
	}
	return s, false
}

// doctorExamples is the latest findings of each kind the doctor page
// shows.
const doctorExamples = 10

// doctorPage serves GET /console/doctor: the protocol doctor's findings
// of the last day, by kind, workflow and node, with the latest of each
// kind.
func (h *handler) doctorPage(w http.ResponseWriter, r *http.Request, d consoleData) {
	d.Page, d.Title = "doctor", "engine protocol doctor"
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	counts, latest, err := h.cfg.Ops.Violations(ctx, h.cfg.Clock().Add(-dayWindow), doctorExamples)
	if err != nil {
		h.consoleInternal(w, r, d.Who, err)
		return
	}
	p := &doctorPage{}
	for _, k := range recovery.ViolationKinds {
		dk := doctorKind{Kind: k, About: violationAbout[k]}
		for _, c := range counts {
			if c.Kind == k {
				dk.Counts, dk.Total = append(dk.Counts, c), dk.Total+c.Count
			}
		}
		for _, v := range latest {
			if v.Kind == k {
				dk.Latest = append(dk.Latest, v)
			}
		}
		p.Kinds, p.Total = append(p.Kinds, dk), p.Total+dk.Total
	}
	d.Doctor = p
	h.renderConsole(w, r, http.StatusOK, d)
}

func (h *handler) consoleInternal(w http.ResponseWriter, r *http.Request, v viewer, err error) {
	h.reqLog(r).ErrorContext(r.Context(), "console: read failed", "err", err.Error())
	h.consoleProblem(w, r, http.StatusServiceUnavailable, v,
		"The database could not be read (the daemon logged the cause under request id "+w.Header().Get(requestIDHeader)+").")
}

// formError is why a console form was refused, and its status.
type formError struct {
	code int
	msg  string
}

func (e *formError) Error() string { return e.msg }

// readForm parses a console form (at most maxBody bytes, urlencoded):
// 415 for another body, 413 for a bigger one, 400 for one that does not
// parse or repeats a field.
func readForm(w http.ResponseWriter, r *http.Request) *formError {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		return &formError{http.StatusUnsupportedMediaType, "the body is not a form (Content-Type application/x-www-form-urlencoded), but " +
			quoteShort(r.Header.Get("Content-Type"))}
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &formError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the form is larger than %d bytes", maxBody)}
		}
		return &formError{http.StatusBadRequest, "the form does not parse"}
	}
	for k, vs := range r.PostForm {
		if len(vs) > 1 {
			return &formError{http.StatusBadRequest, "the field " + quoteShort(k) + " is given more than once"}
		}
	}
	return nil
}

// sameOrigin reports whether a browser's Origin header, when sent,
// names this server (a form posted from another site is refused even
// before its CSRF token is looked at).
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return o == scheme+"://"+r.Host
}

// safeNext is where a sign-in goes on: a console page, else /console.
func safeNext(next string) string {
	if strings.HasPrefix(next, "/console") && !strings.ContainsAny(next, "\\\r\n") && !strings.HasPrefix(next, "/console/sign") {
		if u, err := url.Parse(next); err == nil && u.Host == "" && u.Scheme == "" {
			return next
		}
	}
	return "/console"
}

func (h *handler) signinData(r *http.Request, v viewer) consoleData {
	next, _ := queryValue(r, "next")
	if r.Method == http.MethodPost {
		next = r.PostForm.Get("next")
	}
	return consoleData{Page: "signin", Title: "sign in", Self: h.cfg.Self, Who: v, Next: safeNext(next), NoOperators: h.cfg.Auth == nil,
		Insecure: r.TLS == nil && !loopback(r), SessionTTL: h.sessions.ttl.String()}
}

// loopback reports whether r came from this machine.
func loopback(r *http.Request) bool {
	host := remoteHost(r)
	return host == "127.0.0.1" || host == "::1"
}

func (h *handler) signinPage(w http.ResponseWriter, r *http.Request) {
	h.renderConsole(w, r, http.StatusOK, h.signinData(r, h.viewerOf(r)))
}

// signin serves POST /console/signin: a token that names an operator
// starts a session. A wrong one counts against the address, as a wrong
// bearer token does (authFailures).
func (h *handler) signin(w http.ResponseWriter, r *http.Request) {
	if err := readForm(w, r); err != nil {
		h.consoleProblem(w, r, err.code, viewer{}, "Sign-in refused: "+err.msg+".")
		return
	}
	if !sameOrigin(r) {
		h.consoleProblem(w, r, http.StatusForbidden, viewer{}, "Sign-in refused: the form was not sent from this console's own page.")
		return
	}
	d := h.signinData(r, viewer{})
	if h.cfg.Auth == nil {
		h.renderConsole(w, r, http.StatusForbidden, d)
		return
	}
	addr := remoteHost(r)
	if wait, locked := h.fails.locked(addr); locked {
		w.Header().Set("Retry-After", fmt.Sprint(int(wait.Seconds()+0.999)))
		d.Problem = fmt.Sprintf("Too many failed sign-ins from this address: try again in %.0f s.", wait.Seconds()+0.5)
		h.renderConsole(w, r, http.StatusTooManyRequests, d)
		return
	}
	token := r.PostForm.Get("token")
	id, err := h.cfg.Auth.Authenticate(withToken(r, token))
	if token == "" || len(token) > maxBody || err != nil || id.Cert {
		if token != "" && h.fails.fail(addr) {
			h.reqLog(r).WarnContext(r.Context(), "too many failed authentications: locking the address out (logged once per lockout)",
				"remote", addr, "failures", authFailLimit, "within", authFailWindow.String(), "for", authLockout.String())
		}
		d.Problem = "That token names no operator."
		h.renderConsole(w, r, http.StatusUnauthorized, d)
		return
	}
	value, expires := h.sessions.create(id.Name, token)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: value, Path: "/console", Expires: expires,
		MaxAge: int(h.sessions.ttl.Seconds()), HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	h.reqLog(r).InfoContext(r.Context(), "console: signed in", "operator", id.Name, "role", string(id.Role), "remote", addr)
	if d.Insecure {
		// A browser keeps a Secure cookie only over HTTPS or on this
		// machine's own address: say so, rather than land on a page
		// that says "not signed in".
		d.Page, d.Title = "message", "signed in over plain HTTP"
		d.Problem = "Signed in as " + id.Name + ", but this page was served over plain HTTP to another host: your browser will not keep the session " +
			"(its cookie is Secure), and your token crossed the network in clear. Serve the API over HTTPS (api.tls)."
		h.renderConsole(w, r, http.StatusOK, d)
		return
	}
	http.Redirect(w, r, d.Next, http.StatusSeeOther)
}

// signout serves POST /console/signout: ends the session (with its
// CSRF token: another site cannot sign an operator out).
func (h *handler) signout(w http.ResponseWriter, r *http.Request) {
	v, ok := h.mutationViewer(w, r)
	if !ok {
		return
	}
	h.sessions.drop(v.cookie)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/console", MaxAge: -1, HttpOnly: true, Secure: true,
		SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/console/signin", http.StatusSeeOther)
}

// mutationViewer checks a console form that changes something: a form,
// from this origin, by a session, with its CSRF token. It answers the
// refusal itself.
func (h *handler) mutationViewer(w http.ResponseWriter, r *http.Request) (viewer, bool) {
	if err := readForm(w, r); err != nil {
		h.consoleProblem(w, r, err.code, viewer{}, "Refused: "+err.msg+".")
		return viewer{}, false
	}
	v := h.viewerOf(r)
	switch {
	case !sameOrigin(r):
		h.consoleProblem(w, r, http.StatusForbidden, v, "Refused: the form was not sent from this console's own page.")
	case !v.Signed && v.stale:
		h.consoleProblem(w, r, http.StatusUnauthorized, v, "Refused: your session has ended (expired, or signed out): sign in again.")
	case !v.Signed:
		h.consoleProblem(w, r, http.StatusUnauthorized, v, "Refused: no console session (never signed in, signed out, or expired): sign in, then act.")
	case !v.sess.csrfOK(r.PostForm.Get("csrf")):
		h.consoleProblem(w, r, http.StatusForbidden, v, "Refused: the form's CSRF token is missing or not this session's (reload the page and try again).")
	default:
		return v, true
	}
	return v, false
}

// consoleAction is what a console form's action calls.
type consoleAction struct {
	path     string
	instance bool // names an instance (workflow, id)
	body     func(f url.Values) any
	// done says what the API's answer (JSON) means.
	done func(b []byte) (string, bool)
}

var consoleActions = map[string]consoleAction{
	"hold-retry": {path: "/v1/holds/retry", instance: true, body: holdBody, done: holdDone},
	"hold-fail":  {path: "/v1/holds/fail", instance: true, body: holdBody, done: holdDone},
	"retry": {path: "/v1/retry", instance: true, body: func(f url.Values) any {
		return apitype.RetryRequest{Workflow: f.Get("workflow"), Instance: f.Get("id"), Task: f.Get("task"), Reason: f.Get("reason")}
	}, done: func(b []byte) (string, bool) {
		var res apitype.RetryResult
		if json.Unmarshal(b, &res) != nil {
			return "", false
		}
		s := fmt.Sprintf("Retried: %s moved from %s to %s (manual retry %d).", res.Task, res.From, res.To, res.Manual)
		if res.Replaced != "" {
			s += " It replaced " + res.Replaced + "."
		}
		return s, true
	}},
	"pause":  {path: "/v1/pause", body: reasonBody, done: pauseDone},
	"resume": {path: "/v1/resume", body: reasonBody, done: pauseDone},
}

func holdBody(f url.Values) any {
	return apitype.HoldsRequest{Instances: []apitype.Ref{{Workflow: f.Get("workflow"), Instance: f.Get("id")}}, Reason: f.Get("reason")}
}

func holdDone(b []byte) (string, bool) {
	var res apitype.HoldResult
	if json.Unmarshal(b, &res) != nil {
		return "", false
	}
	switch {
	case res.Decided > 0:
		return fmt.Sprintf("Hold decided: %s.", res.Action), true
	case len(res.Cancelled) > 0:
		return "The hold was closed without the decision: " + res.Cancelled[0].Reason + ".", false
	}
	return "Nothing was decided: the instance has no open hold (decided already, or being decided by another request).", false
}

func reasonBody(f url.Values) any { return apitype.AckRequest{Reason: f.Get("reason")} }

func pauseDone(b []byte) (string, bool) {
	var p apitype.Pause
	if json.Unmarshal(b, &p) != nil {
		return "", false
	}
	if p.Paused {
		return "Automatic repair paused.", true
	}
	return "Automatic repair resumed.", true
}

// act serves POST /console/act: one action of an operate operator, with
// a reason, through the API's route.
func (h *handler) act(w http.ResponseWriter, r *http.Request) {
	v, ok := h.mutationViewer(w, r)
	if !ok {
		return
	}
	f := r.PostForm
	if v.Role.covers(RoleOperate) {
		switch f.Get("action") {
		case "holds-bulk-retry", "holds-bulk-fail":
			h.bulk(w, r, v, recovery.AttemptHeld, strings.TrimPrefix(f.Get("action"), "holds-bulk-"))
			return
		case "waiting-bulk-retry":
			h.bulk(w, r, v, recovery.AttemptWaiting, "retry")
			return
		case "check", "check-force":
			h.checkNow(w, r, v, f.Get("action") == "check-force")
			return
		}
	}
	a, known := consoleActions[f.Get("action")]
	var problem string
	switch {
	case !v.Role.covers(RoleOperate):
		h.consoleProblem(w, r, http.StatusForbidden, v, "Refused: operator "+v.Name+" has role "+string(v.Role)+": actions need role operate.")
		return
	case !known:
		problem = "no such action: " + quoteShort(f.Get("action"))
	case strings.TrimSpace(f.Get("reason")) == "":
		problem = "a reason is required: it is recorded in the audit trail"
	case textProblem(f.Get("reason"), maxReason) != "":
		problem = "the reason: " + textProblem(f.Get("reason"), maxReason)
	case a.instance && nameProblem(f.Get("workflow"), false) != "":
		problem = "the workflow: " + nameProblem(f.Get("workflow"), false)
	case a.instance && nameProblem(f.Get("id"), false) != "":
		problem = "the instance's id: " + nameProblem(f.Get("id"), false) + " (the API takes no such id: decide it with holds retry --all --workflow W)"
	case nameProblem(f.Get("task"), true) != "":
		problem = "the task: " + nameProblem(f.Get("task"), true)
	}
	if problem != "" {
		h.consoleProblem(w, r, http.StatusBadRequest, v, "Refused: "+problem+".")
		return
	}
	var after int64
	if h.cfg.LastEventID != nil {
		var err error
		if after, err = h.cfg.LastEventID(r.Context()); err != nil {
			h.consoleInternal(w, r, v, err)
			return
		}
	}
	code, body := h.callAPI(r, v.sess.token, a.path, a.body(f))
	fl := flash{After: after}
	fl.Text, fl.OK = answerText(code, body, a.done)
	back := "/console"
	if a.instance {
		back = instanceURL(f.Get("workflow"), f.Get("id"), 0)
	}
	fl.For = back
	h.sessions.setFlash(v.cookie, fl)
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// callAPI sends a JSON POST to the API's route path, authenticated with
// token, from r's peer (its address, its TLS state, its request id),
// and returns the answer's status and body.
func (h *handler) callAPI(r *http.Request, token, path string, body any) (int, []byte) {
	b, err := json.Marshal(body)
	if err != nil {
		return http.StatusInternalServerError, nil
	}
	// Never sent anywhere: path is one of the API's routes, served below
	// by this handler in this process.
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, path, bytes.NewReader(b)) //nolint:gosec // G704: served in process
	if err != nil {
		return http.StatusInternalServerError, nil
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(requestIDHeader, requestID(r.Context()))
	req.RemoteAddr, req.TLS, req.Host = r.RemoteAddr, r.TLS, r.Host
	rec := &answer{hdr: http.Header{}}
	h.api.ServeHTTP(rec, req)
	return cmp.Or(rec.code, http.StatusOK), rec.body.Bytes()
}

// answer keeps what a route answered an internal request (callAPI).
type answer struct {
	hdr  http.Header
	code int
	body bytes.Buffer
}

func (a *answer) Header() http.Header { return a.hdr }

func (a *answer) WriteHeader(code int) {
	if a.code == 0 {
		a.code = code
	}
}

func (a *answer) Write(p []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	return a.body.Write(p)
}
