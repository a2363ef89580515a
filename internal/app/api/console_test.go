package api

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/recovery"
)

// consoleClient is a browser of the console over handler h: it keeps
// the session cookie, as a browser would on this origin.
type consoleClient struct {
	t      *testing.T
	h      http.Handler
	cookie *http.Cookie
}

func (c *consoleClient) do(method, target string, form url.Values, edit ...func(*http.Request)) *httptest.ResponseRecorder {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, target, body)
	req.RemoteAddr = "127.0.0.1:4000"
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c.cookie != nil {
		req.AddCookie(c.cookie)
	}
	for _, e := range edit {
		e(req)
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	for _, ck := range rec.Result().Cookies() {
		if ck.Name == sessionCookie {
			c.cookie = ck
			if ck.MaxAge < 0 {
				c.cookie = nil
			}
		}
	}
	return rec
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the session's CSRF token from a console page.
func (c *consoleClient) csrf() string {
	c.t.Helper()
	rec := c.do("GET", "/console", nil)
	m := csrfField.FindStringSubmatch(rec.Body.String())
	if m == nil {
		c.t.Fatalf("no CSRF token on the console page (%d): %s", rec.Code, rec.Body.String())
	}
	return m[1]
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newConsole(t *testing.T) (http.Handler, *store, *clock) {
	t.Helper()
	s := &store{}
	clk := &clock{now: time.Now()}
	h := NewHandler(Config{Self: "me", Nodes: s, Acker: s, Auth: operators(), AuthReads: true, Ops: s, Events: s.Events,
		Local: func() (apitype.Leader, error) { return apitype.Leader{}, errors.New("not in office") },
		Clock: clk.Now, SessionTTL: time.Hour, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return h, s, clk
}

// TestConsoleSessions: sign-in with a named token gives a session
// cookie (HttpOnly, Secure, SameSite=Strict, path /console, with an
// expiry); a wrong token gives none; reads need a sign-in when reads
// need a token; the session ends at its expiry and at sign-out.
func TestConsoleSessions(t *testing.T) {
	h, _, clk := newConsole(t)
	c := &consoleClient{t: t, h: h}
	if rec := c.do("GET", "/console?id=1", nil); rec.Code != http.StatusSeeOther ||
		rec.Header().Get("Location") != "/console/signin?next=%2Fconsole%3Fid%3D1" {
		t.Fatalf("a read without a session: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	if rec := c.do("POST", "/console/signin", url.Values{"token": {"nope"}}); rec.Code != http.StatusUnauthorized || c.cookie != nil ||
		!strings.Contains(rec.Body.String(), "That token names no operator") {
		t.Fatalf("a wrong token: %d, cookie %v", rec.Code, c.cookie)
	}
	rec := c.do("POST", "/console/signin", url.Values{"token": {"alice-token"}, "next": {"/console?id=1"}})
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/console?id=1" || c.cookie == nil {
		t.Fatalf("sign-in: %d to %q, cookie %v", rec.Code, rec.Header().Get("Location"), c.cookie)
	}
	if ck := c.cookie; !ck.HttpOnly || !ck.Secure || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console" ||
		ck.MaxAge != 3600 || len(ck.Value) < 40 {
		t.Fatalf("the session cookie: %+v", ck)
	}
	page := c.do("GET", "/console", nil)
	if page.Code != http.StatusOK || !strings.Contains(page.Body.String(), "alice (operate)") {
		t.Fatalf("signed in: %d %s", page.Code, page.Body.String())
	}
	if csp := page.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe") ||
		strings.Contains(csp, "script-src") {
		t.Fatalf("CSP %q", csp)
	}
	for _, next := range []string{"https://evil.example/", "//evil.example/console", "/console/signout", "/v1/pause", "/console\\@evil"} {
		c2 := &consoleClient{t: t, h: h}
		if rec := c2.do("POST", "/console/signin", url.Values{"token": {"alice-token"}, "next": {next}}); rec.Header().Get("Location") != "/console" {
			t.Errorf("next %q: sent to %q", next, rec.Header().Get("Location"))
		}
	}

	clk.add(time.Hour)
	rec = c.do("GET", "/console", nil)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("an expired session still reads: %d", rec.Code)
	}

	c.cookie = nil
	c.do("POST", "/console/signin", url.Values{"token": {"alice-token"}})
	csrf := c.csrf()
	old := c.cookie
	if rec := c.do("POST", "/console/signout", url.Values{}); rec.Code != http.StatusForbidden {
		t.Fatalf("sign-out without the CSRF token: %d", rec.Code)
	}
	if rec := c.do("POST", "/console/signout", url.Values{"csrf": {csrf}}); rec.Code != http.StatusSeeOther || c.cookie != nil {
		t.Fatalf("sign-out: %d, cookie %v", rec.Code, c.cookie)
	}
	c.cookie = old // a copy of the cookie, kept: no good any more
	if rec := c.do("GET", "/console", nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("a signed-out session still reads: %d", rec.Code)
	}
}

// TestConsoleActions: an action goes through the API's route with the
// session's operator (the store sees the name); without the session's
// CSRF token, from another origin, by a read operator, with an expired
// session or without a reason, it is refused and nothing is called.
func TestConsoleActions(t *testing.T) {
	h, s, clk := newConsole(t)
	alice := &consoleClient{t: t, h: h}
	alice.do("POST", "/console/signin", url.Values{"token": {"alice-token"}})
	csrf := alice.csrf()
	reader := &consoleClient{t: t, h: h}
	reader.do("POST", "/console/signin", url.Values{"token": {"reader-token"}})
	if page := reader.do("GET", "/console/instance?workflow=orders&id=a%2F..%2F%C3%A9", nil); page.Code != http.StatusOK ||
		strings.Contains(page.Body.String(), `action="/console/act"`) {
		t.Fatalf("a read operator's instance page: %d, with action forms: %s", page.Code, page.Body.String())
	}
	readerCSRF := reader.csrf()

	hold := func(csrf string) url.Values {
		return url.Values{"csrf": {csrf}, "action": {"hold-retry"}, "workflow": {"orders"}, "id": {"a/../é"}, "reason": {"checked the payment"}}
	}
	before := s.count()
	refusals := []struct {
		name string
		c    *consoleClient
		form url.Values
		edit func(*http.Request)
		code int
		want string
	}{
		{"no CSRF token", alice, url.Values{"action": {"hold-retry"}, "workflow": {"orders"}, "id": {"1"}, "reason": {"x"}}, nil, 403, "CSRF"},
		{"another session's CSRF token", alice, hold(readerCSRF), nil, 403, "CSRF"},
		{"from another origin", alice, hold(csrf), func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, 403, "not sent from this console"},
		{"a read operator, forged form", reader, hold(readerCSRF), nil, 403, "has role read"},
		{"no reason", alice, url.Values{"csrf": {csrf}, "action": {"hold-fail"}, "workflow": {"orders"}, "id": {"1"}, "reason": {"  "}}, nil, 400, "reason is required"},
		{"unknown action", alice, url.Values{"csrf": {csrf}, "action": {"drop-table"}, "reason": {"x"}}, nil, 400, "no such action"},
		{"no session", &consoleClient{t: t, h: h}, hold(csrf), nil, 401, "sign in"},
		{"JSON, not a form", alice, nil, func(r *http.Request) { r.Header.Set("Content-Type", "application/json") }, 415, "not a form"},
	}
	for _, c := range refusals {
		rec := c.c.do("POST", "/console/act", c.form, func(r *http.Request) {
			if c.edit != nil {
				c.edit(r)
			}
		})
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("%s: %d, want %d with %q: %s", c.name, rec.Code, c.code, c.want, rec.Body.String())
		}
	}
	if n := s.count(); n != before {
		t.Fatalf("refused actions called the store: %v", s.calls[before:])
	}

	rec := alice.do("POST", "/console/act", hold(csrf))
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/console/instance?id=a%2F..%2F%C3%A9&workflow=orders" {
		t.Fatalf("hold retry: %d to %q: %s", rec.Code, rec.Header().Get("Location"), rec.Body.String())
	}
	if got := s.calls[len(s.calls)-1]; got != "holds retry alice (operator)|me||checked the payment" {
		t.Fatalf("the API decided %q", got)
	}
	// The result is shown once, on the page the action redirected to.
	if page := alice.do("GET", rec.Header().Get("Location"), nil); !strings.Contains(page.Body.String(), `id="result"`) {
		t.Fatalf("no result shown: %s", page.Body.String())
	} else if again := alice.do("GET", rec.Header().Get("Location"), nil); strings.Contains(again.Body.String(), `id="result"`) {
		t.Fatal("the result is shown twice")
	}

	// A bulk decision shows its count first, and is not made when the
	// count changed since it was confirmed.
	bulk := url.Values{"csrf": {csrf}, "action": {"holds-bulk-fail"}, "workflow": {"orders"}, "task": {"ship"}, "older": {"1h"}, "reason": {"gone"}}
	if rec := alice.do("POST", "/console/act", bulk); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `name="confirmed" value="0"`) {
		t.Fatalf("bulk without confirmation: %d %s", rec.Code, rec.Body.String())
	}
	if got := s.calls[len(s.calls)-1]; got != "parked held orders|ship|||1h0m0s" {
		t.Fatalf("the list read %q", got)
	}
	bulk.Set("confirmed", "5")
	calls := s.count()
	rec = alice.do("POST", "/console/act", bulk)
	if page := alice.do("GET", rec.Header().Get("Location"), nil); rec.Code != http.StatusSeeOther ||
		!strings.Contains(page.Body.String(), "Nothing was decided: the instances that match changed since you confirmed (5 then, 0 now)") {
		t.Fatalf("bulk with a stale count: %d, then %s", rec.Code, page.Body.String())
	}
	for _, call := range s.calls[calls:] {
		if strings.HasPrefix(call, "holds fail") {
			t.Fatalf("a stale bulk decision was made: %q", call)
		}
	}
	// A double-click posts a confirmed decision twice: the second shows
	// the first's result, not "nothing was decided", and decides nothing.
	s.mu.Lock()
	s.held = []recovery.WaitingRetry{{Hold: recovery.Hold{Workflow: "orders", Instance: "41", Task: "ship"}}, {Hold: recovery.Hold{Workflow: "orders", Instance: "42", Task: "ship"}}}
	s.mu.Unlock()
	bulk.Del("confirmed")
	confirm := alice.do("POST", "/console/act", bulk)
	m := regexp.MustCompile(`name="set" value="([0-9a-f]+)"`).FindStringSubmatch(confirm.Body.String())
	if confirm.Code != http.StatusOK || m == nil {
		t.Fatalf("the confirmation of 2: %d %s", confirm.Code, confirm.Body.String())
	}
	bulk.Set("confirmed", "2")
	bulk.Set("set", m[1])
	calls = s.count()
	for i := range 2 {
		rec := alice.do("POST", "/console/act", bulk)
		page := alice.do("GET", rec.Header().Get("Location"), nil)
		if rec.Code != http.StatusSeeOther || !strings.Contains(page.Body.String(), "2 of 2 holds decided: fail") {
			t.Fatalf("post %d of a double-click: %d, then %s", i+1, rec.Code, page.Body.String())
		}
	}
	decisions := 0
	for _, call := range s.calls[calls:] {
		if strings.HasPrefix(call, "holds fail") {
			decisions++
		}
	}
	if decisions != 1 {
		t.Fatalf("a double-click decided %d times: %v", decisions, s.calls[calls:])
	}
	for _, q := range []string{"older=banana", "older=-1h", "cause=whim", "node=%00", "sort=1"} {
		if rec := alice.do("GET", "/console/held?"+q, nil); rec.Code != http.StatusBadRequest {
			t.Errorf("held list ?%s: %d", q, rec.Code)
		}
	}

	// Pause and resume, with the reason, through the API.
	for _, action := range []string{"pause", "resume"} {
		rec := alice.do("POST", "/console/act", url.Values{"csrf": {csrf}, "action": {action}, "reason": {"db upgrade"}})
		if rec.Code != http.StatusSeeOther || s.calls[len(s.calls)-1] != action+" db upgrade" {
			t.Fatalf("%s: %d, called %q", action, rec.Code, s.calls[len(s.calls)-1])
		}
		if page := alice.do("GET", "/console", nil); !strings.Contains(page.Body.String(), "Automatic repair "+action+"d.") {
			t.Fatalf("%s's result not shown", action)
		}
	}

	// A check forced through the guard: first what the guard sees, then,
	// confirmed, the check through the API with the reason.
	force := url.Values{"csrf": {csrf}, "action": {"check-force"}, "reason": {""}}
	if rec := alice.do("POST", "/console/act", force); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "reason is required") {
		t.Fatalf("a forced check without a reason: %d", rec.Code)
	}
	force.Set("reason", "rack 7 is gone")
	rec = alice.do("POST", "/console/act", force)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `id="guard-nodes"`) ||
		!strings.Contains(rec.Body.String(), "no node acts as master: me: not in office") || strings.Contains(s.calls[len(s.calls)-1], "check") {
		t.Fatalf("a forced check's confirmation: %d %s", rec.Code, rec.Body.String())
	}
	seen := regexp.MustCompile(`name="confirmed" value="([0-9a-f]+)"`).FindStringSubmatch(rec.Body.String())
	if seen == nil {
		t.Fatal("the confirmation carries no view of the guard")
	}
	// Confirmed for another view of the guard: shown again, not forced.
	force.Set("confirmed", "0123456789abcdef0123456789abcdef")
	if rec := alice.do("POST", "/console/act", force); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "What the guard sees changed") {
		t.Fatalf("a confirmation of another view: %d", rec.Code)
	}
	force.Set("confirmed", seen[1])
	if rec := alice.do("POST", "/console/act", force); rec.Code != http.StatusSeeOther || s.calls[len(s.calls)-1] != "check rack 7 is gone" {
		t.Fatalf("a confirmed forced check: %d, called %q", rec.Code, s.calls[len(s.calls)-1])
	}
	if page := alice.do("GET", "/console", nil); !strings.Contains(page.Body.String(), "Check run 1:") {
		t.Fatalf("the check's result: %s", page.Body.String())
	}

	clk.add(time.Hour)
	if rec := alice.do("POST", "/console/act", hold(csrf)); rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "session has ended") {
		t.Fatalf("an expired session's action: %d %s", rec.Code, rec.Body.String())
	}
}

// TestConsoleEdges: what the outside review found: console refusals are
// pages, not the API's JSON; an operator signing in again and again ends
// only their own sessions; an action's result is shown on its own page
// only.
func TestConsoleEdges(t *testing.T) {
	h, _, _ := newConsole(t)
	alice := &consoleClient{t: t, h: h}
	alice.do("POST", "/console/signin", url.Values{"token": {"alice-token"}})
	for _, c := range []struct {
		method, target string
		code           int
		want           string
	}{
		{"GET", "/console?fbclid=1", 400, `Query parameter &#34;fbclid&#34; is unknown`},
		{"GET", "/console/held?older=1h&older=2h", 400, "given more than once"},
		{"GET", "/console/instance?workflow=orders&id=1&before=-5", 400, "not a positive event id"},
		{"GET", "/console/", 404, "No such page"},
		{"GET", "/console/nonexistent", 404, "No such page"},
		{"GET", "/console/act", 405, "No such action"},
		{"GET", "/console/held?older=8761h", 400, "from 0 to a year"},
	} {
		rec := alice.do(c.method, c.target, nil)
		if rec.Code != c.code || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("%s %s: %d %s, want %d with %q", c.method, c.target, rec.Code, rec.Header().Get("Content-Type"), c.code, c.want)
		}
	}
	if rec := alice.do("GET", "/console/held?older=-1h", nil); strings.Contains(rec.Body.String(), `id="count"`) {
		t.Error("a refused filter still shows a count")
	}

	// Another operator's sign-ins, many, end none of alice's sessions.
	for range maxOperatorSessions + 5 {
		(&consoleClient{t: t, h: h}).do("POST", "/console/signin", url.Values{"token": {"reader-token"}})
	}
	if rec := alice.do("GET", "/console", nil); rec.Code != http.StatusOK {
		t.Fatalf("alice's session ended by another's sign-ins: %d", rec.Code)
	}
	// Her own, more than the limit: the oldest ends.
	for range maxOperatorSessions {
		(&consoleClient{t: t, h: h}).do("POST", "/console/signin", url.Values{"token": {"alice-token"}})
	}
	if rec := alice.do("GET", "/console", nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("alice's oldest session, past %d of hers: %d", maxOperatorSessions, rec.Code)
	}

	// A result is shown on its own page, not on another read meanwhile.
	alice = &consoleClient{t: t, h: h}
	alice.do("POST", "/console/signin", url.Values{"token": {"alice-token"}})
	csrf := alice.csrf()
	rec := alice.do("POST", "/console/act", url.Values{"csrf": {csrf}, "action": {"hold-fail"}, "workflow": {"orders"}, "id": {"3"}, "reason": {"x"}})
	if other := alice.do("GET", "/console/instance?workflow=orders&id=4", nil); strings.Contains(other.Body.String(), `id="result"`) {
		t.Fatal("the result of an action on orders/3 is shown on orders/4")
	}
	if own := alice.do("GET", rec.Header().Get("Location"), nil); !strings.Contains(own.Body.String(), `id="result"`) {
		t.Fatal("the result is not shown on its own page")
	}
}

// TestConsoleClientCertificate: under auth_reads, a client certificate
// the handshake verified reads the console as its CN, with role read:
// no action forms, and a forged action is refused (no session).
func TestConsoleClientCertificate(t *testing.T) {
	s := &store{}
	h := NewHandler(Config{Self: "me", Nodes: s, Acker: s, Auth: Either(operators(), ClientCerts{}), AuthReads: true, Ops: s, Events: s.Events,
		Local: func() (apitype.Leader, error) { return apitype.Leader{}, errors.New("not in office") },
		Log:   slog.New(slog.NewTextHandler(io.Discard, nil))})
	c := &consoleClient{t: t, h: h}
	cert := func(r *http.Request) {
		r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{CommonName: "auditor"}}}}}
	}
	page := c.do("GET", "/console/instance?workflow=orders&id=1", nil, cert)
	if page.Code != http.StatusOK || !strings.Contains(page.Body.String(), "auditor (read, client certificate)") ||
		strings.Contains(page.Body.String(), `action="/console/act"`) {
		t.Fatalf("a client certificate's page: %d %s", page.Code, page.Body.String())
	}
	if rec := c.do("POST", "/console/act", url.Values{"action": {"pause"}, "reason": {"x"}}, cert); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a client certificate's action: %d", rec.Code)
	}
	if rec := c.do("GET", "/console", nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("without the certificate: %d", rec.Code)
	}
}
