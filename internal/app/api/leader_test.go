package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/leader"
)

func leaderHandler(self string, local func() (apitype.Leader, error), cands func(context.Context) ([]leader.Candidate, error)) http.Handler {
	return NewHandler(Config{Self: self, Local: local, Candidates: cands, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Code, rec.Body.String()
}

// TestLeaderNamesTheActingMaster: GET /v1/leader answers from the acting
// master's own state, found through the candidates when this node does not
// act; 503 with every node's reason when none acts; lookup errors (which
// may carry database text) are logged, not answered.
func TestLeaderNamesTheActingMaster(t *testing.T) {
	notMaster := func() (apitype.Leader, error) { return apitype.Leader{}, errors.New("not in office") }
	acting := apitype.Leader{Name: "b", Term: 7, TrustedUntil: time.Now().Add(time.Second)}
	b := httptest.NewServer(leaderHandler("b", func() (apitype.Leader, error) { return acting, nil }, nil))
	defer b.Close()
	suspended := httptest.NewServer(leaderHandler("c", func() (apitype.Leader, error) {
		return apitype.Leader{}, errors.New("suspended: no etcd keep-alive answered")
	}, nil))
	defer suspended.Close()
	addr := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }

	// This node acts: its own answer.
	code, body := get(t, leaderHandler("b", func() (apitype.Leader, error) { return acting, nil }, nil), "/v1/leader")
	if code != 200 || !strings.Contains(body, `"answered_by": "b"`) {
		t.Fatalf("acting node: %d %s", code, body)
	}
	// Through a candidate, even when another lookup failed.
	a := leaderHandler("a", notMaster, func(context.Context) ([]leader.Candidate, error) {
		return []leader.Candidate{{Name: "c", APIAddress: addr(suspended)}, {Name: "b", APIAddress: addr(b)}}, errors.New("read leader: etcd timed out")
	})
	code, body = get(t, a, "/v1/leader")
	var l apitype.Leader
	if code != 200 || json.Unmarshal([]byte(body), &l) != nil || l.Name != "b" || l.Term != 7 || l.AnsweredBy != "b" {
		t.Fatalf("via candidates: %d %s", code, body)
	}
	// Nobody acts: 503 with each node's reason, and no lookup error text.
	a = leaderHandler("a", notMaster, func(context.Context) ([]leader.Candidate, error) {
		return []leader.Candidate{{Name: "c", APIAddress: addr(suspended)}}, errors.New(`pq: relation "leader_term" does not exist`)
	})
	code, body = get(t, a, "/v1/leader")
	if code != 503 || !strings.Contains(body, "no acting master") || !strings.Contains(body, "a: not in office") ||
		!strings.Contains(body, "c: suspended") || strings.Contains(body, "pq:") {
		t.Fatalf("no acting master: %d %s", code, body)
	}
	a = leaderHandler("a", notMaster, func(context.Context) ([]leader.Candidate, error) {
		return nil, errors.New(`pq: password authentication failed`)
	})
	if code, body = get(t, a, "/v1/leader"); code != 503 || strings.Contains(body, "pq:") || !strings.Contains(body, "request id") {
		t.Fatalf("lookup failed: %d %s", code, body)
	}
	// ?local=true: this node's own state only.
	if code, body = get(t, a, "/v1/leader?local=true"); code != 503 || !strings.Contains(body, "not in office") {
		t.Fatalf("local, not master: %d %s", code, body)
	}
	if code, body = get(t, a, "/v1/leader?local=yes"); code != 400 || !strings.Contains(body, "query parameter local") {
		t.Fatalf("local=yes: %d %s", code, body)
	}
	// Given without a value it is no false: a poller of every node's
	// "?local" would see each answer as the master's (outside review).
	for _, q := range []string{"?local", "?local="} {
		if code, body = get(t, a, "/v1/leader"+q); code != 400 || !strings.Contains(body, "query parameter local") {
			t.Fatalf("%s: %d %s", q, code, body)
		}
	}
}

// TestClientNamesAnyID: the client asks for an instance in the query
// form, so an id with slashes, empty, "." or ".." segments, spaces or a
// percent sign reaches the daemon as it is (no path form can carry the
// former: the server refuses non-canonical paths).
func TestClientNamesAnyID(t *testing.T) {
	h, s, _ := newTestHandler(t)
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := NewClient(srv.URL, "")
	for _, id := range []string{"eu/7 a%", "a//b", "..", "./x", "x/", "/x", "%2F", "a&id=b"} {
		if _, err := c.Instance(context.Background(), apitype.Ref{Workflow: "orders", Instance: id}, 5); err != nil {
			t.Fatalf("id %q: %v", id, err)
		}
		s.mu.Lock()
		got := s.calls[len(s.calls)-1]
		s.mu.Unlock()
		if want := "instance orders|" + id; got != want {
			t.Fatalf("the daemon was asked %q, want %q", got, want)
		}
	}
}
