package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
)

// exchange sends a raw request and returns the answer, its body, and how
// long the daemon took to answer and close the connection (it must close
// within 7s, asked to or not).
func exchange(addr, request string) (*http.Response, string, time.Duration, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, "", 0, err
	}
	defer c.Close()
	start := time.Now()
	go func() { _, _ = io.WriteString(c, request) }() // the daemon may answer before it has read everything
	_ = c.SetReadDeadline(start.Add(7 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, "", 0, fmt.Errorf("%.60q: no answer after %s: %w", request, time.Since(start), err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", 0, fmt.Errorf("%.60q: read answer: %w", request, err)
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		return nil, "", 0, fmt.Errorf("%.60q: answered %d, then the connection stayed open after %s (%v)", request, resp.StatusCode, time.Since(start), err)
	}
	return resp, string(body), time.Since(start), nil
}

// TestHostileRequests sends, over raw sockets, the requests that used to
// hang the daemon, make it log errors or leak PostgreSQL's text; then
// holds 2,000 idle and slow connections and asks GET /healthz.
func TestHostileRequests(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	cfg := replaceOnce(t, c.config("node-a", ""), "api:\n  listen: 127.0.0.1:0\n", "api:\n  listen: 127.0.0.1:0\n  token_env: EH_TEST_TOKEN\n")
	d := c.startEnv("node-a", cfg, "EH_TEST_TOKEN=tok")
	addr := c.waitRegistered(d, 30*time.Second).APIAddress

	// Well-formed requests ask for the connection to be closed after the
	// answer; the lying ones below do not, and get it closed anyway.
	get := func(target string) string {
		return "GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
	}
	post := func(path, body string) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer tok\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			path, len(body), body)
	}
	// A body shorter than its Content-Length: cut at the read timeout (5s).
	lying := "POST /v1/nodes/node-a/ack HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"reason\":"
	type answer struct {
		resp *http.Response
		took time.Duration
		err  error
	}
	lied := make(chan answer, 1)
	go func() {
		resp, _, took, err := exchange(addr, lying)
		lied <- answer{resp, took, err}
	}()

	cases := []struct {
		name, request string
		code          int
		want          string
	}{
		{"NUL in the node name", get("/v1/nodes/%00x"), 400, "path parameter name"},
		{"invalid UTF-8 in ?node=", get("/v1/events?node=%ff"), 400, "query parameter node"},
		{"NUL in the ack path", post("/v1/nodes/%00x/ack", `{"reason":"x"}`), 400, "path parameter name"},
		{"NUL in the reason", post("/v1/nodes/node-a/ack", `{"reason":"a\u0000"}`), 400, "body.reason"},
		{"escape sequence in the reason", post("/v1/nodes/node-a/ack", `{"reason":"\u001b[2J\nowned"}`), 400, "body.reason"},
		{"invalid UTF-8 in the reason", post("/v1/nodes/node-a/ack", "{\"reason\":\"\xff\"}"), 400, "body: not valid UTF-8"},
		{"oversized body", post("/v1/nodes/node-a/ack", `{"reason":"`+strings.Repeat("a", 100<<10)+`"}`), 413, "body: larger than"},
		{"trailing data", post("/v1/nodes/node-a/ack", `{"reason":"x"}{"reason":"y"}`), 400, "body: unexpected data"},
		{"unknown field", post("/v1/nodes/node-a/ack", `{"reason":"x","force":true}`), 400, `body: unknown field "force"`},
		{"unknown field in a recovery", post("/v1/recovery", `{"dry_run":true,"all":true}`), 400, `body: unknown field "all"`},
		{"no token, lying Content-Length", strings.Replace(lying, "Authorization: Bearer tok\r\n", "", 1), 401, "bearer token"},
	}
	for _, tc := range cases {
		resp, body, took, err := exchange(addr, tc.request)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var eb apitype.ErrorBody
		if err := json.Unmarshal([]byte(body), &eb); err != nil {
			t.Errorf("%s: answer %d is not JSON: %q", tc.name, resp.StatusCode, body)
			continue
		}
		switch {
		case resp.StatusCode != tc.code || !strings.Contains(eb.Error, tc.want):
			t.Errorf("%s: %d %q, want %d naming %q", tc.name, resp.StatusCode, eb.Error, tc.code, tc.want)
		case eb.RequestID == "" || resp.Header.Get("X-Request-Id") != eb.RequestID:
			t.Errorf("%s: request id %q, header %q", tc.name, eb.RequestID, resp.Header.Get("X-Request-Id"))
		case strings.Contains(body, "invalid byte sequence") || strings.Contains(body, "pq:"):
			t.Errorf("%s: PostgreSQL's text reached the client: %s", tc.name, body)
		case took > time.Second:
			t.Errorf("%s: answered and closed after %s", tc.name, took)
		}
	}
	if a := <-lied; a.err != nil {
		t.Errorf("lying Content-Length: %v", a.err)
	} else if a.resp.StatusCode != http.StatusRequestTimeout || a.took > 7*time.Second {
		t.Errorf("lying Content-Length: %d after %s, want 408 within the read timeout (5s)", a.resp.StatusCode, a.took)
	}

	// Stored text with control characters is escaped by the CLI.
	c.db.MustExec(`INSERT INTO enginehealth.events (kind, actor, node, reason) VALUES ('node_ack', 'test', 'node-a', E'\x1b[2J\nowned')`)
	out, errOut, code := cli(t, nil, "events", "--node", "node-a", "--limit", "10000", "--api", addr)
	if code != 0 || strings.ContainsRune(out, 0x1b) || !strings.Contains(out, `\x1b[2J\nowned`) {
		t.Errorf("events: exit %d: %s\n%q", code, errOut, out)
	}
	// A limit the daemon would refuse is a usage error before asking it.
	_, errOut, code = cli(t, nil, "events", "--limit", "10001", "--api", addr)
	if code != 2 || !strings.Contains(errOut, "--limit 10001: want 1 to 10000") {
		t.Errorf("events --limit 10001: exit %d: %s", code, errOut)
	}

	// 2,000 connections, half idle, half sending a header a byte at a
	// time: /healthz answers within a second, descriptors stay bounded.
	pid := d.cmd.Process.Pid
	before := fdCount(t, pid)
	worst, peak := slowClients(t, addr, pid, 2000)
	t.Logf("daemon descriptors: %d before, at most %d with 2000 slow connections; GET /healthz worst %s", before, peak, worst.Round(time.Millisecond))
	if peak > before+512+16 {
		t.Errorf("daemon descriptors went from %d to %d: not bounded by the connection cap (512)", before, peak)
	}

	// Nothing of this made the daemon log an error, or log outside JSON.
	for _, line := range strings.Split(strings.TrimSpace(d.stderr.String()), "\n") {
		var rec struct{ Level string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("log line not JSON: %q", line)
		} else if rec.Level == "ERROR" {
			t.Errorf("the daemon logged an error: %s", line)
		}
	}
	if !strings.Contains(d.stderr.String(), "connection cap reached") {
		t.Error("no warning about the connection cap in the log")
	}
}

// fdCount counts the open file descriptors of process pid.
func fdCount(t *testing.T, pid int) int {
	t.Helper()
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// slowClients holds n connections to addr, every other one sending a
// never-ending header a byte every 50ms, and meanwhile asks GET /healthz
// five times; it returns the slowest answer and the most descriptors
// process pid had open.
func slowClients(t *testing.T, addr string, pid, n int) (worst time.Duration, peak int) {
	t.Helper()
	var conns, slow []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
		if i%2 == 1 {
			slow = append(slow, c)
		}
		if i%100 == 0 {
			peak = max(peak, fdCount(t, pid))
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		const header = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: "
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			b := byte('a')
			if i < len(header) {
				b = header[i]
			}
			for _, c := range slow {
				_ = c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				_, _ = c.Write([]byte{b})
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	cl := api.NewClient(addr, "")
	cl.HTTP.Timeout = 5 * time.Second
	for range 5 {
		start := time.Now()
		h, err := cl.Health(t.Context())
		took := time.Since(start)
		if err != nil || h.Status != "ok" || took >= time.Second {
			t.Fatalf("GET /healthz with %d slow connections: %+v, %v after %s; want ok within 1s", n, h, err, took)
		}
		worst = max(worst, took)
		peak = max(peak, fdCount(t, pid))
	}
	return worst, peak
}
