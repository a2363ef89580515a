package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api"
)

// TestReadFloodSparesTheMaster: anonymous clients that read the largest
// answers as fast as they can, and others that ask and then read slowly,
// cannot starve the heartbeat or the master of database connections, nor
// blow up the daemon's memory: /healthz stays 200, the master keeps its
// term and acts, and the refused readers get 503 busy, not errors.
func TestReadFloodSparesTheMaster(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	d := c.start("node-a", c.configWith("node-a", cfgOpts{Heartbeat: time.Second, Schedule: "@every 1s"}))
	addr := c.waitRegistered(d, 30*time.Second).APIAddress
	first := c.waitTerm(t, 0, 30*time.Second)
	// 30,000 events whose text JSON escapes six-fold ('<' → \u003c): every
	// flood request asks for 10,000 of them, 100 MB of JSON if unbounded.
	c.db.MustExec(`INSERT INTO enginehealth.events (kind, actor, node, workflow, instance, task, from_state, to_state, reason)
		SELECT 'instance_repaired', 'flood', 'node-a', 'orders', repeat('<', 300), 'reserve', repeat('&', 255), repeat('>', 255), repeat('<', 1000)
		FROM generate_series(1, 30000)`)
	cl := api.NewClient(addr, "")
	ctx := context.Background()

	// One answer is bounded by the text it holds, not only by its rows; a
	// client pages on with after= the last id and sees every event once.
	var seen int
	var after int64
	for {
		resp, err := http.Get(fmt.Sprintf("http://%s/v1/events?limit=10000&after=%d", addr, after))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("events page after %d: %d %v", after, resp.StatusCode, err)
		}
		if len(body) > 8<<20 {
			t.Fatalf("one events answer of %d MB", len(body)>>20)
		}
		var page []struct{ ID int64 }
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		seen += len(page)
		after = page[len(page)-1].ID
	}
	var total int
	if err := c.db.Get(&total, `SELECT count(*) FROM enginehealth.events`); err != nil || seen != total {
		t.Fatalf("paging saw %d events of %d (%v)", seen, total, err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok, busy, other atomic.Int64
	var otherText atomic.Value
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for range 48 { // fast readers
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := hc.Get("http://" + addr + "/v1/events?limit=10000")
				if err != nil {
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case resp.StatusCode == 200:
					ok.Add(1)
				case resp.StatusCode == 503 && strings.Contains(string(body), "busy"):
					busy.Add(1)
				default:
					other.Add(1)
					otherText.Store(fmt.Sprintf("%d %.200s", resp.StatusCode, body))
				}
			}
		}()
	}
	for range 32 { // slow readers: ask, then read a byte now and then
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			defer conn.Close()
			fmt.Fprintf(conn, "GET /v1/events?limit=10000 HTTP/1.1\r\nHost: x\r\n\r\n")
			r := bufio.NewReaderSize(conn, 16)
			buf := make([]byte, 16)
			pace := time.NewTicker(200 * time.Millisecond)
			defer pace.Stop()
			for {
				select {
				case <-stop:
					return
				case <-pace.C:
				}
				_ = conn.SetReadDeadline(time.Now().Add(time.Second))
				if _, err := r.Read(buf); err != nil && !os.IsTimeout(err) {
					return
				}
			}
		}()
	}

	// For 10 s: /healthz answers 200 within a second every time, the
	// heartbeat stays fresh in the database.
	end := time.Now().Add(10 * time.Second)
	var worst time.Duration
	probe := time.NewTicker(200 * time.Millisecond)
	defer probe.Stop()
	for ; time.Now().Before(end); <-probe.C {
		start := time.Now()
		h, err := cl.Health(ctx)
		took := time.Since(start)
		worst = max(worst, took)
		if err != nil || h.Status != "ok" || took > time.Second {
			close(stop)
			wg.Wait()
			t.Fatalf("/healthz under the flood: %+v %v after %s", h, err, took)
		}
		if n, err := c.node("node-a"); err != nil || n.SecondsSinceActive > 3 {
			close(stop)
			wg.Wait()
			t.Fatalf("heartbeat under the flood: %+v %v", n, err)
		}
	}
	peak := vmHWM(t, d.cmd.Process.Pid)
	close(stop)
	wg.Wait()
	t.Logf("flood: %d answered, %d busy, %d other; /healthz worst %s; daemon peak RSS %d MB",
		ok.Load(), busy.Load(), other.Load(), worst.Round(time.Millisecond), peak>>20)
	if other.Load() > 0 {
		t.Errorf("%d flood requests got neither an answer nor 503 busy, e.g. %v", other.Load(), otherText.Load())
	}
	if ok.Load() == 0 {
		t.Error("no flood request was answered")
	}
	// 4 answers being built and at most 64 MB being written, plus the
	// daemon itself: far below the 1.3 GB an unbounded daemon reached.
	if peak > 400<<20 {
		t.Errorf("daemon peak RSS %d MB under the flood", peak>>20)
	}
	// The master kept acting in the same term, and its passes go on.
	if l, err := cl.Leader(ctx); err != nil || l.Term != first.Term || l.Name != "node-a" {
		t.Fatalf("master after the flood: %+v %v (term before %d)", l, err, first.Term)
	}
	c.waitCheckPassAfter(t, time.Now())
	for _, line := range strings.Split(strings.TrimSpace(d.stderr.String()), "\n") {
		var rec struct{ Level string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Level == "ERROR" {
			t.Errorf("the daemon logged an error under the flood: %s", line)
		}
	}
}

// vmHWM returns the peak resident memory of process pid, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}
