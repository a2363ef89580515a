package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/enginehealth/enginehealth/internal/app/demoengine"
)

// TestProtocolDoctor: a test engine breaks each rule of the claim
// protocol once; the master's protocol doctor finds each, and the
// console's doctor page and /metrics show them: a claim under a node
// name no sidecar has, a claim on an instance still in its begin state,
// a claim taken by a node marked Not responding, an instance left
// interim without a claim, and an instance moved by the engine while a
// repair was deciding it (the daemon is the faultinject build with the
// repair's race window open: 0.8 s between its read and its write).
func TestProtocolDoctor(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	// Orders 4 and 5, left interim without a claim, are found by a
	// sweep: one every 2 s, not only the office's first pass (which, on a
	// loaded host, ran before they were left there, and the test waited
	// for a repair that never came).
	cfg := c.configWith("node-a", cfgOpts{Schedule: "@every 1s", SweepInterval: 2 * time.Second, Extra: demoengine.WorkflowsYAML(time.Minute)})
	c.seed(cfg, 10)
	d := c.startProcess("node-a", cfg, []string{"EH_UNSAFE=window"}, unsafeBinary(t), "run")
	n := c.waitRegistered(d, 30*time.Second)
	c.waitTerm(t, 0, 30*time.Second)

	c.db.MustExec(`INSERT INTO enginehealth.nodes (name, incarnation, hostname, status, last_active, status_changed_at, status_changed_by, status_reason, api_address)
		VALUES ('dead-engine', gen_random_uuid(), 'dead-engine', 'Not responding', now() - interval '10 minutes', now() - interval '10 minutes',
			'node-a', 'no heartbeat', '127.0.0.1:1')`)
	c.db.MustExec(`UPDATE demo.orders SET status = 'Reserving' WHERE id IN (1, 3);
		INSERT INTO demo.orders_claim VALUES (1, 'ghost', 'tok-1', now(), now() + interval '1 hour'),
			(2, 'node-a', 'tok-2', now(), now() + interval '1 hour'),
			(3, 'dead-engine', 'tok-3', now(), now() + interval '1 hour')`)
	// Orders 4 and 5 are left interim without a claim; while the repair
	// decides them, the engine moves order 5.
	c.db.MustExec(`UPDATE demo.orders SET status = 'Reserving' WHERE id IN (4, 5)`)
	eventually(t, 60*time.Second, "a repair batch in its race window", func() (bool, error) {
		var n int
		err := c.db.Get(&n, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND query LIKE 'WITH s AS MATERIALIZED (%'`)
		return n > 0, err
	})
	c.db.MustExec(`UPDATE demo.orders SET status = 'Reserved' WHERE id = 5`)

	kinds := map[string]string{
		"claim_without_node":      `kind="claim_without_node",node="ghost",workflow="orders"`,
		"claim_not_interim":       `kind="claim_not_interim",node="node-a",workflow="orders"`,
		"claim_by_not_responding": `kind="claim_by_not_responding",node="dead-engine",workflow="orders"`,
		"interim_without_claim":   `kind="interim_without_claim",node="",workflow="orders"`,
		"late_write":              `kind="late_write",node="",workflow="orders"`,
	}
	eventually(t, 60*time.Second, "every kind in /metrics", func() (bool, error) {
		resp, err := http.Get("http://" + n.APIAddress + "/metrics")
		if err != nil {
			return false, err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var missing []string
		for kind, labels := range kinds {
			if !strings.Contains(string(body), "enginehealth_protocol_violations_total{"+labels+"} 1\n") {
				missing = append(missing, kind)
			}
		}
		if len(missing) > 0 {
			// Said when the wait ends: which kinds never came.
			slices.Sort(missing)
			return false, fmt.Errorf("not yet counted: %s", strings.Join(missing, ", "))
		}
		return true, nil
	})

	browser := chromium(t)
	ctx, cancel := context.WithTimeout(browser, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate("http://"+n.APIAddress+"/console/doctor"),
		chromedp.WaitVisible(chromedp.CSS("#doctor-total"))); err != nil {
		t.Fatal(err)
	}
	shown := must(chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`Object.fromEntries([...document.querySelectorAll('section.kind')].map(s =>
		[s.dataset.kind, s.querySelector('h2 .st').innerText + ' | ' + s.querySelector('.counts')?.innerText + ' | ' + s.querySelector('ol')?.innerText]))`)))(t)
	for kind := range kinds {
		if s := shown[kind]; !strings.HasPrefix(s, "1 | ") {
			t.Errorf("%s on the page: %q", kind, s)
		}
	}
	for kind, want := range map[string]string{"claim_without_node": "ghost", "claim_not_interim": "in Created", "claim_by_not_responding": "dead-engine",
		"interim_without_claim": "orders / 4", "late_write": "1 instance of task reserve was changed"} {
		if !strings.Contains(shown[kind], want) {
			t.Errorf("%s: %q does not show %q", kind, shown[kind], want)
		}
	}
	png := must(chromedp.Run(ctx, chromedp.FullScreenshot(100)))(t)
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "console-doctor.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
