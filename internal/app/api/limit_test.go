package api

import (
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestDatabaseSlots: at most MaxDBRequests requests use the database at
// once; the next is answered 503 busy with Retry-After instead of waiting
// for a connection, while /healthz and /v1/leader?local=true, which need
// no database, answer at once.
func TestDatabaseSlots(t *testing.T) {
	h, s, logs := newTestHandler(t)
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(DefaultMaxDBRequests)
	s.slow = func() {
		entered.Done()
		<-release
	}
	var done sync.WaitGroup
	for range DefaultMaxDBRequests {
		done.Add(1)
		go func() {
			defer done.Done()
			if rec := do(h, "GET", "/v1/nodes", "", ""); rec.Code != http.StatusOK {
				t.Errorf("held request: %d %s", rec.Code, rec.Body)
			}
		}()
	}
	entered.Wait()
	s.slow = nil

	for _, target := range []string{"/v1/nodes", "/v1/events?limit=10000", "/v1/nodes/n1", "/v1/runs"} {
		rec := do(h, "GET", target, "", "")
		eb := errorBody(t, rec)
		if rec.Code != http.StatusServiceUnavailable || eb.Error != "busy: too many requests are using the database or being answered" || rec.Header().Get("Retry-After") != "1" {
			t.Fatalf("%s with every slot taken: %d %+v", target, rec.Code, eb)
		}
	}
	if rec := do(h, "GET", "/healthz", "", ""); rec.Code != http.StatusOK {
		t.Fatalf("/healthz with every slot taken: %d %s", rec.Code, rec.Body)
	}
	if n := strings.Count(logs.String(), "API busy"); n != 1 {
		t.Fatalf("%d busy warnings for 4 refused requests, want 1 (rate-limited)", n)
	}

	close(release)
	done.Wait()
	if rec := do(h, "GET", "/v1/nodes", "", ""); rec.Code != http.StatusOK {
		t.Fatalf("after the slots came free: %d %s", rec.Code, rec.Body)
	}
}
