package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
)

// fuzzHandler is a whole handler over the recording store, acting as the
// master (so mutations run here, through their decoders, to the store).
func fuzzHandler() (http.Handler, *store) {
	s := &store{}
	return NewHandler(Config{Self: "me", Nodes: s, Acker: s, Auth: tokenAuth("tok"), Ops: s, Events: s.Events,
		Ready: func() apitype.Ready {
			return apitype.Ready{Ready: true, Status: string(nodes.StatusReady), Grade: nodes.GradeNormal}
		},
		Local: func() (apitype.Leader, error) {
			return apitype.Leader{Name: "me", Incarnation: "i1", APIAddress: "127.0.0.1:8642", Term: 7, Since: time.Unix(0, 0)}, nil
		},
		Candidates:  func(context.Context) ([]leader.Candidate, error) { return nil, nil },
		LastEventID: func(context.Context) (int64, error) { return 0, nil },
		Log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}), s
}

// FuzzHandler sends whatever method, target, Content-Type and body the
// fuzzer makes, with the token, through the whole handler (edge, routing,
// every query and body decoder) over the recording store. Whatever the
// request: no panic; no 5xx (the store does not fail on text the edge let
// through); every refusal is a JSON {error, detail, request_id} without
// PostgreSQL's text; and no text that PostgreSQL would refuse (invalid
// UTF-8, NUL) reaches the store. The seed corpus holds one valid request
// per route, and the hostile ones of TestHostileInput are in
// testdata/fuzz/FuzzHandler.
func FuzzHandler(f *testing.F) {
	for _, s := range []struct{ method, target, ctype, body string }{
		{"GET", "/healthz", "", ""},
		{"GET", "/readyz", "", ""},
		{"GET", "/v1/nodes", "", ""},
		{"GET", "/v1/nodes/n1", "", ""},
		{"GET", "/v1/status", "", ""},
		{"GET", "/v1/runs?limit=5", "", ""},
		{"GET", "/v1/runs/42", "", ""},
		{"GET", "/v1/events?after=10&limit=50&node=n1&workflow=orders&instance=7&kind=node_status&run=3&since=2026-11-23T14:00:00Z&until=2026-11-24T00:00:00%2B02:00", "", ""},
		{"GET", "/v1/holds?workflow=orders&limit=10", "", ""},
		{"GET", "/v1/instances/orders/51?limit=5", "", ""},
		{"GET", "/v1/instances?workflow=orders&id=a%2F..%2Fb&limit=5", "", ""},
		{"GET", "/v1/retries/stats", "", ""},
		{"POST", "/v1/nodes/n1/ack", "application/json", `{"reason":"host replaced"}`},
		{"POST", "/v1/nodes/n1/reset-grade", "application/json", `{"reason":"disk replaced"}`},
		{"POST", "/v1/check", "application/json", `{"force":true,"reason":"rack lost"}`},
		{"POST", "/v1/pause", "application/json", `{"reason":"migration"}`},
		{"POST", "/v1/resume", "application/json", `{"reason":"done"}`},
		{"POST", "/v1/recovery", "application/json", `{"workflows":["orders"],"dry_run":true}`},
		{"POST", "/v1/holds/retry", "application/json", `{"instances":[{"workflow":"orders","instance":"1"}],"reason":"fixed"}`},
		{"POST", "/v1/holds/fail", "application/json", `{"all":true,"workflow":"orders","reason":"gave up"}`},
		{"POST", "/v1/retry", "application/json", `{"workflow":"orders","instance":"1042","task":"ship","reason":"card re-issued"}`},
		{"POST", "/v1/pause", "application/json; charset=utf-8", `{"reason":"x","reason":"y"}`},
		{"GET", "/v1/events?since=2026-11-23T14:00:00%2B23:59", "", ""},
	} {
		f.Add(s.method, s.target, s.ctype, s.body)
	}
	f.Fuzz(func(t *testing.T, method, target, ctype, body string) {
		req, err := http.NewRequest(method, "http://127.0.0.1:8642"+target, strings.NewReader(body))
		if err != nil || !strings.HasPrefix(target, "/") {
			return // not a request a client can send
		}
		req.RequestURI = target
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("Authorization", "Bearer tok")
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		h, s := fuzzHandler()
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() { defer close(done); h.ServeHTTP(rec, req) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s %q (%q %q): no answer after 5 s", method, target, ctype, body)
		}

		if rec.Code >= 500 {
			t.Fatalf("%s %q (%q %q): %d %s", method, target, ctype, body, rec.Code, rec.Body)
		}
		if strings.Contains(rec.Body.String(), "pq:") {
			t.Fatalf("%s %q: PostgreSQL's text in the answer: %s", method, target, rec.Body)
		}
		if rec.Code >= 400 {
			var eb apitype.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error == "" || eb.RequestID == "" {
				t.Fatalf("%s %q: answer %d is not an error body: %v: %s", method, target, rec.Code, err, rec.Body)
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.calls {
			if !utf8.ValidString(c) || strings.ContainsRune(c, 0) {
				t.Fatalf("%s %q: text PostgreSQL refuses reached the store: %q", method, target, c)
			}
		}
	})
}
