package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/nodes"
)

// acker records acknowledgements; the API's own seam, not a database fake.
type acker struct{ calls []string }

func (a *acker) Ack(_ context.Context, name string, by audit.By, reason string) (nodes.Node, error) {
	a.calls = append(a.calls, name+"|"+by.Actor+" via "+by.Via+"|"+reason)
	if name == "missing" {
		return nodes.Node{}, nodes.ErrNotFound
	}
	return nodes.Node{Name: name, Status: nodes.StatusReady, StatusReason: reason}, nil
}

func (a *acker) ResetGrade(_ context.Context, name string, by audit.By, reason string) (nodes.GradeChange, error) {
	a.calls = append(a.calls, "reset "+name+"|"+by.Actor+" via "+by.Via+"|"+reason)
	switch name {
	case "missing":
		return nodes.GradeChange{}, nodes.ErrNotFound
	case "normal":
		return nodes.GradeChange{}, nodes.ErrGradeNormal
	}
	return nodes.GradeChange{Name: name, From: nodes.GradeError, To: nodes.GradeNormal, Reason: reason}, nil
}

func TestMutationGuardAndBadRequests(t *testing.T) {
	a := &acker{}
	h := NewHandler(Config{Self: "me", Acker: a, Auth: tokenAuth("tok"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	cases := []struct {
		name, method, path, auth, body string
		code                           int
		forwardedBy                    string
		cert                           string // CN of a verified client certificate
	}{
		{"no token", "POST", "/v1/nodes/n/ack", "", "", http.StatusUnauthorized, "", ""},
		{"wrong token", "POST", "/v1/nodes/n/ack", "Bearer nope", "", http.StatusUnauthorized, "", ""},
		{"not bearer", "POST", "/v1/nodes/n/ack", "Basic dG9rOg==", "", http.StatusUnauthorized, "", ""},
		{"bad body", "POST", "/v1/nodes/n/ack", "Bearer tok", "{reason", http.StatusBadRequest, "", ""},
		{"unknown node", "POST", "/v1/nodes/missing/ack", "Bearer tok", "", http.StatusNotFound, "", ""},
		{"wrong method", "GET", "/v1/nodes/n/ack", "Bearer tok", "", http.StatusMethodNotAllowed, "", ""},
		{"wrong method on a read", "POST", "/v1/nodes", "Bearer tok", "", http.StatusMethodNotAllowed, "", ""},
		{"unknown method", "BREW", "/readyz", "", "", http.StatusMethodNotAllowed, "", ""},
		{"unknown path", "GET", "/v2/anything", "", "", http.StatusNotFound, "", ""},
		{"ok", "POST", "/v1/nodes/n/ack", "Bearer tok", `{"reason":"checked"}`, http.StatusOK, "", ""},
		{"scheme in lower case (RFC 7235)", "POST", "/v1/nodes/n/ack", "bearer tok", `{"reason":"checked"}`, http.StatusOK, "", ""},
		{"token in another case", "POST", "/v1/nodes/n/ack", "Bearer TOK", "", http.StatusUnauthorized, "", ""},
		{"reset-grade without token", "POST", "/v1/nodes/n/reset-grade", "", "", http.StatusUnauthorized, "", ""},
		{"reset-grade of an unknown node", "POST", "/v1/nodes/missing/reset-grade", "Bearer tok", "", http.StatusNotFound, "", ""},
		{"reset-grade of a NORMAL node", "POST", "/v1/nodes/normal/reset-grade", "Bearer tok", "", http.StatusConflict, "", ""},
		{"reset-grade", "POST", "/v1/nodes/n/reset-grade", "Bearer tok", `{"reason":"disk replaced"}`, http.StatusOK, "", ""},
		// Via: the node that took the request from the operator.
		{"forwarded ack", "POST", "/v1/nodes/n/ack", "Bearer tok", `{"reason":"fwd"}`, http.StatusOK, "node-b", ""},
		{"forwarded ack, lying header", "POST", "/v1/nodes/n/ack", "Bearer tok", `{"reason":"lie"}`, http.StatusOK, "<b>x</b>", ""},
		// With a client certificate, the header must name its holder.
		{"forwarded ack with the node's certificate", "POST", "/v1/nodes/n/ack", "Bearer tok", `{"reason":"cert"}`, http.StatusOK, "node-b", "node-b"},
		{"forged header with an operator's certificate", "POST", "/v1/nodes/n/ack", "Bearer tok", `{"reason":"forged"}`, http.StatusOK, "node-b", "mallory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			if c.forwardedBy != "" {
				req.Header.Set(forwardedHeader, c.forwardedBy)
			}
			if c.cert != "" {
				req.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{CommonName: c.cert}}}}}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != c.code {
				t.Fatalf("%s %s: %d, want %d: %s", c.method, c.path, rec.Code, c.code, rec.Body)
			}
			if !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
				t.Fatalf("content type %q", rec.Header().Get("Content-Type"))
			}
		})
	}
	if len(a.calls) != 10 || a.calls[8] != "n|operator (operator) via node-b|cert" || a.calls[9] != "n|operator (operator) via me|forged" || a.calls[1] != "n|operator (operator) via me|checked" || a.calls[2] != "n|operator (operator) via me|checked" ||
		a.calls[5] != "reset n|operator (operator) via me|disk replaced" || a.calls[6] != "n|operator (operator) via node-b|fwd" ||
		a.calls[7] != "n|operator (operator) via me|lie" {
		t.Fatalf("ack calls %v: refused requests must not reach the store", a.calls)
	}
}

// TestTwoAuthorizationHeaders: two credentials are refused whatever their
// order (outside review: a good one first and a bad one second passed).
func TestTwoAuthorizationHeaders(t *testing.T) {
	h := NewHandler(Config{Self: "me", Acker: &acker{}, Auth: tokenAuth("tok"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, order := range [][]string{{"Bearer tok", "Bearer nope"}, {"Bearer nope", "Bearer tok"}, {"Bearer tok", "Bearer tok"}} {
		req := httptest.NewRequest("POST", "/v1/nodes/n/ack", strings.NewReader(`{"reason":"x"}`))
		for _, a := range order {
			req.Header.Add("Authorization", a)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "given more than once") {
			t.Errorf("%v: %d %s, want 400", order, rec.Code, rec.Body)
		}
	}
}

func TestMutationsOffWithoutToken(t *testing.T) {
	a := &acker{}
	h := NewHandler(Config{Acker: a, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	req := httptest.NewRequest("POST", "/v1/nodes/n/ack", nil)
	req.Header.Set("Authorization", "Bearer ")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || len(a.calls) != 0 {
		t.Fatalf("%d, calls %v", rec.Code, a.calls)
	}
}

// TestWrongMethod: a route's path under a method it does not take is a
// 405 that names the methods it takes (Allow); an unknown path is a 404
// whatever the method.
func TestWrongMethod(t *testing.T) {
	h := NewHandler(Config{Self: "me", Acker: &acker{}, Auth: tokenAuth("tok"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, c := range []struct {
		method, path string
		code         int
		allow        string
	}{
		{"GET", "/v1/nodes/n/ack", http.StatusMethodNotAllowed, "POST"},
		{"DELETE", "/v1/nodes/n", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"POST", "/readyz", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"PUT", "/", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"DELETE", "/v2/nodes", http.StatusNotFound, ""},
		{"GET", "/v1/nodes/n/ack/x", http.StatusNotFound, ""},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code != c.code || rec.Header().Get("Allow") != c.allow {
			t.Errorf("%s %s: %d, Allow %q; want %d, Allow %q: %s", c.method, c.path, rec.Code, rec.Header().Get("Allow"), c.code, c.allow, rec.Body)
		}
	}
}

// TestViaIsProven: the forwarded-by header is recorded as via only when
// it names a registered node and, with a client certificate, its holder;
// with client CAs configured, a request without a certificate proves
// nothing (nodes forward with theirs). Otherwise the answering node is
// recorded, and the header is logged (outside review: an operator could
// write any node, or their own name, into via).
func TestViaIsProven(t *testing.T) {
	cert := func(cn string) *tls.ConnectionState {
		return &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{CommonName: cn}}}}}
	}
	for _, c := range []struct {
		name             string
		verifyForwarders bool
		header           string
		tls              *tls.ConnectionState
		want             string
	}{
		{"a registered node, no client CAs", false, "node-b", nil, "node-b"},
		{"an unregistered name", false, "missing", nil, "me"},
		{"the node's own certificate", true, "node-b", cert("node-b"), "node-b"},
		{"an operator's certificate naming a node", true, "node-b", cert("alice"), "me"},
		{"no certificate where nodes present theirs", true, "node-b", nil, "me"},
		{"this node itself", false, "me", nil, "me"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &acker{}
			s := &store{}
			var logged bytes.Buffer
			h := NewHandler(Config{Self: "me", Nodes: s, Acker: a, Auth: tokenAuth("tok"), VerifyForwarders: c.verifyForwarders,
				Log: slog.New(slog.NewJSONHandler(&logged, nil))})
			req := httptest.NewRequest("POST", "/v1/nodes/n/ack", strings.NewReader(`{"reason":"r"}`))
			req.Header.Set("Authorization", "Bearer tok")
			req.Header.Set(forwardedHeader, c.header)
			req.TLS = c.tls
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || len(a.calls) != 1 || a.calls[0] != "n|operator (operator) via "+c.want+"|r" {
				t.Fatalf("%d %s; recorded %v, want via %s", rec.Code, rec.Body, a.calls, c.want)
			}
			warned := strings.Contains(logged.String(), "a forwarded request names a node it does not prove")
			if warned != (c.want == "me" && c.header != "me") {
				t.Fatalf("logged %v:\n%s", warned, logged.String())
			}
			for _, l := range strings.Split(logged.String(), "\n") {
				if strings.Count(l, `"operator":`) > 1 {
					t.Fatalf("a record with a key twice: %s", l)
				}
			}
		})
	}
}
