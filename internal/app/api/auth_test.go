package api

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/leader"
)

// tokenAuth authenticates one operator, named "operator" with role
// operate, by token tok: what api.token_file configures.
func tokenAuth(tok string) *Tokens {
	return mustTokens(Operator{Name: "operator", SHA256: sha256.Sum256([]byte(tok)), Role: RoleOperate})
}

func mustTokens(ops ...Operator) *Tokens {
	t, err := NewTokens(ops)
	if err != nil {
		panic(err)
	}
	return t
}

func op(name, token string, role Role) Operator {
	return Operator{Name: name, SHA256: sha256.Sum256([]byte(token)), Role: role}
}

// operators: alice may do everything, reader may read.
func operators() *Tokens {
	return mustTokens(op("alice", "alice-token", RoleOperate), op("reader", "reader-token", RoleRead))
}

// send makes a request to h as from addr (host:port) with token ("": no
// Authorization header).
func send(h http.Handler, addr, method, target, token, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.RemoteAddr = addr
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

const holdsRetry = `{"instances":[{"workflow":"orders","instance":"7"}],"reason":"carrier back"}`

// TestRoles: an operate token does a mutation, recorded with its
// operator's name; a read token is refused it with 403 naming the role
// needed; no token or an unknown one is a 401 with WWW-Authenticate.
func TestRoles(t *testing.T) {
	s := &store{}
	h := NewHandler(Config{Self: "me", Nodes: s, Acker: s, Ops: s, Events: s.Events, Auth: operators(),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	const from = "192.0.2.1:4000"

	rec := send(h, from, "POST", "/v1/holds/retry", "reader-token", holdsRetry)
	if eb := errorBody(t, rec); rec.Code != http.StatusForbidden || !strings.Contains(eb.Error, "needs role operate") ||
		!strings.Contains(eb.Error, "reader has role read") {
		t.Fatalf("holds retry with a read token: %d %+v, want 403 naming role operate", rec.Code, eb)
	}
	for _, token := range []string{"", "wrong-token", "alice-token "} {
		rec := send(h, from, "POST", "/v1/holds/retry", token, holdsRetry)
		if rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") != `Bearer realm="enginehealth"` {
			t.Fatalf("holds retry with token %q: %d %v, want 401 with WWW-Authenticate", token, rec.Code, rec.Header())
		}
	}
	if n := s.count(); n != 0 {
		t.Fatalf("refused requests reached the store: %v", s.calls)
	}
	rec = send(h, from, "POST", "/v1/holds/retry", "alice-token", holdsRetry)
	if rec.Code != http.StatusOK || rec.Header().Get(NodeHeader) != "me" {
		t.Fatalf("holds retry with an operate token: %d %s", rec.Code, rec.Body)
	}
	if got := s.calls[len(s.calls)-1]; got != "holds retry alice (operator)|me||carrier back" {
		t.Fatalf("the decision was recorded as %q, want alice (operator) via me", got)
	}
	// Without auth_reads, reads are open: no token, or a wrong one.
	for _, token := range []string{"", "wrong-token"} {
		if rec := send(h, from, "GET", "/v1/nodes", token, ""); rec.Code != http.StatusOK {
			t.Fatalf("GET /v1/nodes without auth_reads, token %q: %d %s", token, rec.Code, rec.Body)
		}
	}
	// Without operators, mutations are off whatever is sent.
	off := NewHandler(Config{Self: "me", Nodes: s, Acker: s, Ops: s, Events: s.Events, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if rec := send(off, from, "POST", "/v1/holds/retry", "alice-token", holdsRetry); rec.Code != http.StatusForbidden ||
		!strings.Contains(rec.Body.String(), "mutations are off") {
		t.Fatalf("a mutation without operators: %d %s", rec.Code, rec.Body)
	}
}

// getRoutes are the API's reads: with auth_reads each needs a token.
var getRoutes = []string{"/v1/leader", "/v1/nodes", "/v1/nodes/n1", "/v1/events", "/v1/runs", "/v1/runs/1", "/v1/holds",
	"/v1/instances/orders/7", "/v1/instances?workflow=orders&id=7", "/v1/retries/stats", "/v1/status", "/"}

// TestAuthReads: with auth_reads, every read needs a token of either
// role (401 without); /healthz, /readyz, /metrics and the nodes' own
// /v1/leader?local=true stay open.
func TestAuthReads(t *testing.T) {
	s := &store{}
	h := NewHandler(Config{Self: "me", Nodes: s, Acker: s, Ops: s, Events: s.Events, Auth: operators(), AuthReads: true,
		Ready:   func() apitype.Ready { return apitype.Ready{Ready: true, Status: "Ready"} },
		Local:   func() (apitype.Leader, error) { return apitype.Leader{Name: "me"}, nil },
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up 1\n") }),
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil))})
	const from = "192.0.2.1:4000"
	for _, target := range getRoutes {
		rec := send(h, from, "GET", target, "", "")
		if rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("GET %s without a token: %d, want 401 with WWW-Authenticate", target, rec.Code)
		}
		for _, token := range []string{"reader-token", "alice-token"} {
			if rec := send(h, from, "GET", target, token, ""); rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden {
				t.Errorf("GET %s with %s: %d %s", target, token, rec.Code, rec.Body)
			}
		}
	}
	if rec := send(h, from, "GET", "/v1/nodes", "reader-token", ""); rec.Code != http.StatusOK {
		t.Fatalf("GET /v1/nodes with a read token: %d %s", rec.Code, rec.Body)
	}
	for _, target := range []string{"/healthz", "/readyz", "/metrics", "/v1/leader?local=true"} {
		if rec := send(h, from, "GET", target, "", ""); rec.Code != http.StatusOK {
			t.Errorf("GET %s without a token: %d %s, want 200 (open)", target, rec.Code, rec.Body)
		}
	}
}

// TestForwardedOperator: a mutation sent to a node that is not the
// master is forwarded with its token; the master authenticates it again
// and records the name its own tokens give it, via the node it was sent
// to. A token the master does not know is refused there (401, relayed).
// The master lets the standby ask its ?local=true view without a token,
// though its reads need one.
func TestForwardedOperator(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ms := &store{}
	var self atomic.Value // the master's address, once it listens
	master := NewHandler(Config{Self: "master", Nodes: ms, Acker: ms, Ops: ms, Events: ms.Events, AuthReads: true,
		Auth: mustTokens(op("alice.on-master", "alice-token", RoleOperate)),
		Local: func() (apitype.Leader, error) {
			return apitype.Leader{Name: "master", APIAddress: self.Load().(string)}, nil
		}, Log: log})
	masterAddr, _ := serve(t, master, log, ServerOptions{})
	self.Store(masterAddr)

	ss := &store{}
	standby := NewHandler(Config{Self: "standby", Nodes: ss, Acker: ss, Ops: notMaster{ss}, Events: ss.Events,
		Auth:  mustTokens(op("alice", "alice-token", RoleOperate), op("carol", "carol-token", RoleOperate)),
		Local: func() (apitype.Leader, error) { return apitype.Leader{}, errors.New("not in office") },
		Candidates: func(context.Context) ([]leader.Candidate, error) {
			return []leader.Candidate{{Name: "master", APIAddress: masterAddr}}, nil
		}, Log: log})
	standbyAddr, _ := serve(t, standby, log, ServerOptions{})

	cl := NewClient(standbyAddr, "alice-token")
	if _, err := cl.DecideHolds(t.Context(), "retry", apitype.HoldsRequest{Instances: nil, All: true, Reason: "carrier back"}); err != nil {
		t.Fatalf("holds retry through the standby: %v", err)
	}
	// The master looked the forwarding node up (a registered node), then
	// recorded the decision via it.
	if cl.DoneBy != "master" || ms.count() != 2 || ms.calls[0] != "get standby" || ms.calls[1] != "holds retry alice.on-master (operator)|standby||carrier back" {
		t.Fatalf("done by %q; the master recorded %v, want alice.on-master (operator) via standby", cl.DoneBy, ms.calls)
	}
	_, err := NewClient(standbyAddr, "carol-token").DecideHolds(t.Context(), "retry", apitype.HoldsRequest{All: true})
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusUnauthorized || ms.count() != 2 {
		t.Fatalf("a token only the standby knows: %v (master calls %v), want the master's 401", err, ms.calls)
	}

	// A lookup slower than GET /v1/leader's second (a starved host's
	// database read): the leader view gives up within its budget, a
	// mutation waits for it and is forwarded, not refused 503.
	slow := func(ctx context.Context) ([]leader.Candidate, error) {
		select {
		case <-time.After(1500 * time.Millisecond): // the simulated read's duration
			return []leader.Candidate{{Name: "master", APIAddress: masterAddr}}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	slowStandby := NewHandler(Config{Self: "standby", Nodes: ss, Acker: ss, Ops: notMaster{ss}, Events: ss.Events,
		Auth:       mustTokens(op("alice", "alice-token", RoleOperate)),
		Local:      func() (apitype.Leader, error) { return apitype.Leader{}, errors.New("not in office") },
		Candidates: slow, Log: log})
	slowAddr, _ := serve(t, slowStandby, log, ServerOptions{})
	began := time.Now()
	_, err = NewClient(slowAddr, "").Leader(t.Context())
	if took := time.Since(began); !errors.As(err, &se) || se.Code != http.StatusServiceUnavailable || took >= time.Second {
		t.Fatalf("GET /v1/leader with a slow lookup: %v after %s, want 503 within a second", err, took)
	}
	cl = NewClient(slowAddr, "alice-token")
	if _, err := cl.DecideHolds(t.Context(), "retry", apitype.HoldsRequest{All: true, Reason: "slow lookup"}); err != nil || cl.DoneBy != "master" {
		t.Fatalf("holds retry through a standby whose lookup is slow: %v (done by %q), want forwarded", err, cl.DoneBy)
	}
}

// fakeClock is a clock a test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// clientFrom is an HTTP client whose connections come from ip.
func clientFrom(t *testing.T, ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Timeout: 10 * time.Second, Transport: tr}
}

// TestAuthLockout, over real HTTP: 10 failed authentications from one
// address within a minute lock it out: 429 with Retry-After for a minute,
// a right token included, logged once; another address goes on; the
// minute over, the right token works again. Requests without a token
// are not failures.
func TestAuthLockout(t *testing.T) {
	logs := &testkit.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	s := &store{}
	clock := &fakeClock{now: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	h := NewHandler(Config{Self: "me", Nodes: s, Acker: s, Ops: s, Events: s.Events, Auth: operators(), Clock: clock.Now, Log: log})
	addr, _ := serve(t, h, log, ServerOptions{})
	one, two := clientFrom(t, "127.0.0.1"), clientFrom(t, "127.0.0.2")
	post := func(c *http.Client, token string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("POST", "http://"+addr+"/v1/holds/retry", strings.NewReader(holdsRetry))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	lockouts := func() int {
		return strings.Count(logs.String(), "too many failed authentications: locking the address out")
	}

	for i := range 20 {
		if resp := post(one, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("request %d without a token: %d, want 401 (no lockout: nothing was guessed)", i, resp.StatusCode)
		}
	}
	// 9 failures, then a minute passes: they no longer count.
	for range 9 {
		post(one, "guess")
	}
	clock.add(authFailWindow)
	for i := range 10 {
		if resp := post(one, "guess-"+strconv.Itoa(i)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i+1, resp.StatusCode)
		}
		clock.add(time.Second)
	}
	if lockouts() != 1 {
		t.Fatalf("%d lockouts logged after 10 failures in 10s, want 1:\n%s", lockouts(), logs)
	}
	clock.add(-time.Second) // locked at the 10th failure: a minute from now
	for _, token := range []string{"alice-token", "guess", ""} {
		resp := post(one, token)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" {
			t.Fatalf("locked out, token %q: %d, Retry-After %q; want 429 and 60", token, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if resp := post(two, "alice-token"); resp.StatusCode != http.StatusOK {
		t.Fatalf("another address with the right token: %d, want 200", resp.StatusCode)
	}
	resp, err := one.Get("http://" + addr + "/v1/nodes")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("an open read from the locked address: %d, want 200", resp.StatusCode)
	}
	clock.add(authLockout - time.Second)
	if resp := post(one, "alice-token"); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("a second before the end: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	clock.add(time.Second)
	if resp := post(one, "alice-token"); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the lockout, the right token: %d, want 200", resp.StatusCode)
	}
	if lockouts() != 1 {
		t.Fatalf("%d lockouts logged, want 1 (not one per refused request)", lockouts())
	}
	// The count starts afresh: one more failure does not lock it again.
	if resp := post(one, "guess"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a failure after the lockout: %d, want 401", resp.StatusCode)
	}
	var rec struct{ Remote string }
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(line, "locking the address out") {
			_ = json.Unmarshal([]byte(line), &rec)
		}
	}
	if rec.Remote != "127.0.0.1" {
		t.Fatalf("the lockout names %q, want 127.0.0.1", rec.Remote)
	}
}

// TestAuthFailuresBounded: a flood of failures from distinct addresses
// keeps at most authFailAddrs of them, forgetting the least recent, in
// bounded memory.
func TestAuthFailuresBounded(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	f := newAuthFailures(authFailAddrs, clock.Now)
	flood := func(from, n int) {
		for i := from; i < from+n; i++ {
			f.fail("10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255))
		}
	}
	for range authFailLimit {
		f.fail("192.0.2.7")
	}
	if _, locked := f.locked("192.0.2.7"); !locked {
		t.Fatal("10 failures did not lock the address out")
	}
	flood(0, authFailAddrs)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	flood(authFailAddrs, 200_000)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := f.tracked(); n != authFailAddrs {
		t.Fatalf("%d addresses tracked after a flood of 200,000, want %d", n, authFailAddrs)
	}
	if _, locked := f.locked("192.0.2.7"); locked {
		t.Fatal("the least recent address was not the one forgotten")
	}
	// Unbounded, 200,000 more addresses would take tens of MiB.
	if after.HeapAlloc > before.HeapAlloc+4<<20 {
		t.Fatalf("the heap grew by %d bytes over the flood", after.HeapAlloc-before.HeapAlloc)
	}
}

// TestTokensSet: the operators can be replaced while the handler runs
// (a reload): the old token stops working, the new one works; a set
// with a duplicate, an unknown role or no operator is refused and the
// set in force stays.
func TestTokensSet(t *testing.T) {
	tokens := operators()
	s := &store{}
	h := NewHandler(Config{Self: "me", Nodes: s, Acker: s, Ops: s, Events: s.Events, Auth: tokens,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	const from = "192.0.2.1:4000"
	if err := tokens.Set([]Operator{op("bob", "bob-token", RoleOperate)}); err != nil {
		t.Fatal(err)
	}
	if rec := send(h, from, "POST", "/v1/holds/retry", "alice-token", holdsRetry); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a token of the old set: %d", rec.Code)
	}
	if rec := send(h, from, "POST", "/v1/holds/retry", "bob-token", holdsRetry); rec.Code != http.StatusOK {
		t.Fatalf("a token of the new set: %d %s", rec.Code, rec.Body)
	}
	for _, bad := range [][]Operator{
		nil,
		{op("a", "x", RoleRead), op("a", "y", RoleRead)},
		{op("a", "x", RoleRead), op("b", "x", RoleOperate)},
		{op("a", "x", "admin")},
		{op("a b", "x", RoleRead)},
	} {
		if err := tokens.Set(bad); err == nil {
			t.Errorf("set %v accepted", bad)
		}
	}
	if id, err := tokens.Authenticate(httptest.NewRequest("GET", "/", nil)); !errors.Is(err, ErrNoCredential) || id != (Identity{}) {
		t.Fatalf("no header: %+v %v", id, err)
	}
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Authorization", "bearer bob-token")
	if id, err := tokens.Authenticate(req); err != nil || id != (Identity{Name: "bob", Role: RoleOperate}) {
		t.Fatalf("after refused sets: %+v %v, want bob still", id, err)
	}
}
