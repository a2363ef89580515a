package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/app/demoengine"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/jsonx"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// hostile is stored text the status surfaces must show escaped.
const hostile = `<script>document.title="owned"</script><img src="http://198.51.100.7/x.png"> & "quotes"`

// reorder is stored text that would clear a terminal and reorder or
// forge what a page shows, if shown raw.
const reorder = "\x1b[2J\u202eX\nFAKE ROW"

// statusCluster is one daemon on a paused cold cluster (so it stays
// Recovering) beside node records in every other status, one of them
// ERROR, with a hold and a retry waiting (whose stored reason is
// hostile), after a check the disruption guard stopped.
type statusCluster struct {
	c      *cluster
	addr   string
	recRun int64
}

func newStatusCluster(t *testing.T) statusCluster {
	t.Helper()
	c := newCluster(t)
	cfg := c.configWith("node-a", cfgOpts{Schedule: "@every 1h", TokenEnv: "EH_TOKEN", Extra: demoengine.WorkflowsYAML(time.Minute)})
	cfg = replaceOnce(t, cfg, "failed: ShipFailed\n", "failed: ShipFailed\n        on_interrupt: {strategy: hold}\n")
	cfg = replaceOnce(t, cfg, "atomic_internal: true\n",
		"atomic_internal: true\n        on_interrupt: {strategy: retry, max_attempts: 3, backoff: {kind: fixed, base: 1h, jitter: 0}}\n")
	env := []string{"EH_TOKEN=tok", "ENGINEHEALTH_DSN=" + c.dsn}
	c.seed(cfg, 10, env...)
	path := filepath.Join(c.dir, "migrate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := cli(t, env, "migrate", "--config", path); code != 0 {
		t.Fatalf("migrate: exit %d: %s%s", code, out, errOut)
	}
	c.db.MustExec(`UPDATE enginehealth.pause SET paused = true, actor = 'ops', reason = $1`, hostile)
	node := func(name, status string, age time.Duration, by, reason string) {
		c.db.MustExec(`INSERT INTO enginehealth.nodes (name, incarnation, hostname, status, last_active, status_changed_by, status_reason, api_address)
			VALUES ($1, gen_random_uuid(), $1, $2, now() - make_interval(secs => $3), $4, $5, '127.0.0.1:1')`,
			name, status, age.Seconds(), by, reason)
	}
	node("ready-1", string(nodes.StatusReady), 2*time.Minute, "node-a", "recovery done by master") // stale too: the cluster is cold
	for i := 1; i <= 4; i++ {
		node(fmt.Sprintf("stale-%d", i), string(nodes.StatusReady), time.Minute, "node-a", "recovery done by master")
	}
	node("dead", string(nodes.StatusNotResponding), 62*time.Second, "node-a", "no heartbeat for more than 30s; marked by node-a in term 1")
	node("crashed", string(nodes.StatusUnexpectedShutdown), 10*time.Minute, "crashed", "previous incarnation did not stop cleanly "+hostile+reorder)
	c.db.MustExec(`INSERT INTO enginehealth.node_grades (node, grade, reason) VALUES ('dead', 'ERROR', $1)`, "interrupted twice "+hostile)

	d := c.startEnv("node-a", cfg, "EH_TOKEN=tok")
	n := c.waitRegistered(d, 30*time.Second)
	c.waitTerm(t, 0, 30*time.Second)
	tok := []string{"ENGINEHEALTH_TOKEN=tok"}
	// A shipment left mid-task is held by a manual recover (which works
	// while paused); a reservation left mid-task waits an hour for its
	// first retry.
	c.db.MustExec(`UPDATE demo.orders SET status = 'Shipping' WHERE id = 7`)
	c.db.MustExec(`UPDATE demo.orders SET status = 'Reserving' WHERE id = 8`)
	out, errOut, code := cli(t, tok, "recover", "-o", "json", "--api", n.APIAddress)
	var rec apitype.RecoveryAnswer
	if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec.Result == nil {
		t.Fatalf("recover: exit %d: %s%s", code, out, errOut)
	}
	// 5 of 7 nodes stale (Unexpected shutdown does not count): the guard holds.
	out, _, code = cli(t, tok, "check", "--api", n.APIAddress)
	if code != 4 || !strings.Contains(out, "disruption guard holds") {
		t.Fatalf("check: exit %d:\n%s", code, out)
	}
	if r := c.db.MustExec(`UPDATE enginehealth.attempts SET last_reason = last_reason || ' ' || $1
		WHERE workflow = 'orders' AND instance = '8' AND state = 'waiting'`, hostile+reorder); must(r.RowsAffected())(t) != 1 {
		t.Fatal("no retry of orders/8 waits")
	}
	return statusCluster{c: c, addr: n.APIAddress, recRun: rec.Result.RunID}
}

// TestStatusEndpoints: GET /v1/status answers what an operator asks
// first, `status` prints it on one screen, GET /v1/runs/{id} what a run
// did, and GET /v1/events filters.
func TestStatusEndpoints(t *testing.T) {
	t.Parallel()
	sc := newStatusCluster(t)
	cl := api.NewClient(sc.addr, "")
	ctx := context.Background()
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Node.Name != "node-a" || st.Node.Ready.Ready || st.Node.Status != string(nodes.StatusRecovering) {
		t.Fatalf("node %+v, want node-a Recovering and not ready", st.Node)
	}
	if st.Master == nil || st.Master.Name != "node-a" || !st.Paused.Paused || st.Paused.Reason != hostile {
		t.Fatalf("master %+v, paused %+v", st.Master, st.Paused)
	}
	if !strings.Contains(st.Disruption, "of 7 nodes look unresponsive") {
		t.Fatalf("disruption %q", st.Disruption)
	}
	if st.Nodes[string(nodes.StatusReady)] != 5 || st.Nodes[string(nodes.StatusNotResponding)] != 1 || st.Nodes[string(nodes.StatusUnexpectedShutdown)] != 1 || st.Nodes[string(nodes.StatusRecovering)] != 1 {
		t.Fatalf("node counts %v", st.Nodes)
	}
	why := map[string]apitype.NodeState{}
	for _, n := range st.NotReady {
		why[n.Name] = n
	}
	if d := why["dead"]; d.Grade != nodes.GradeError || !strings.HasPrefix(d.Why, "no heartbeat for ") ||
		!strings.Contains(d.Why, " s > 30s; marked by node-a in term 1; failover grade ERROR: interrupted twice") {
		t.Fatalf("dead: %+v", d)
	}
	if cr := why["crashed"]; !strings.Contains(cr.Why, "enginehealth node ack crashed") {
		t.Fatalf("crashed: %+v", cr)
	}
	if _, ok := why["node-a"]; !ok || len(st.NotReady) != 3 {
		t.Fatalf("not ready %+v, want node-a, dead and crashed", st.NotReady)
	}
	if st.Holds.Open != 1 || st.LastRun == nil || st.LastRun.Kind != recovery.KindCheck || st.Checks.LastSuccess.IsZero() {
		t.Fatalf("holds %+v, last run %+v, checks %+v", st.Holds, st.LastRun, st.Checks)
	}

	out, errOut, code := cli(t, nil, "status", "--api", sc.addr)
	for _, want := range []string{"node     Recovering, grade NORMAL: not ready", "master   node-a at ", "paused   paused by ops at ",
		"guard    HOLDS: ", "nodes    5 Ready, 1 Recovering, 1 Not responding, 1 Unexpected shutdown", "  dead ", "holds    1 waiting",
		"last run "} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q", want)
		}
	}
	if code != 1 || t.Failed() {
		t.Fatalf("status: exit %d, want 1 (not ready)\n%s%s", code, out, errOut)
	}

	d, err := cl.Run(ctx, sc.recRun)
	if err != nil || d.Kind != recovery.KindRecovery || d.Status != "finished" || len(d.Counts) != 2 ||
		!slices.Contains(d.Counts, apitype.EventCount{Workflow: "orders", Task: "ship", Kind: audit.KindHeld, Count: 1}) ||
		!slices.Contains(d.Counts, apitype.EventCount{Workflow: "orders", Task: "reserve", Kind: audit.KindRetryScheduled, Count: 1}) {
		t.Fatalf("run %d: %+v %v", sc.recRun, d, err)
	}
	if _, err := cl.Run(ctx, 999999); !isCode(err, 404) {
		t.Fatalf("unknown run: %v, want 404", err)
	}
	out, _, code = cli(t, nil, "runs", fmt.Sprint(sc.recRun), "--api", sc.addr)
	if code != 0 || !strings.Contains(out, "instance_held") || !strings.Contains(out, "recovery (manual) by node-a") {
		t.Fatalf("runs %d: exit %d\n%s", sc.recRun, code, out)
	}

	at := func(t time.Time) *time.Time { return &t }
	year1 := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC) // Go's zero time: still a bound
	for _, f := range []struct {
		p    audit.ListParams
		want int
	}{
		{audit.ListParams{Kind: audit.KindHeld, Workflow: "orders"}, 1},
		{audit.ListParams{Instance: "7", Workflow: "orders"}, 1},
		{audit.ListParams{RunID: sc.recRun}, 2},
		{audit.ListParams{Kind: audit.KindDisruption}, 1},
		{audit.ListParams{Kind: audit.KindHeld, Since: at(time.Now().Add(time.Hour))}, 0},
		{audit.ListParams{Kind: audit.KindHeld, Until: at(time.Now().Add(-time.Hour))}, 0},
		{audit.ListParams{Kind: audit.KindHeld, Since: at(time.Now().Add(-time.Hour)), Until: at(time.Now().Add(time.Hour))}, 1},
		{audit.ListParams{Kind: audit.KindHeld, Since: at(time.Now().Add(-time.Hour).In(time.FixedZone("", -(23*3600 + 59*60))))}, 1},
		{audit.ListParams{Until: &year1}, 0},
	} {
		es, err := cl.Events(ctx, f.p)
		if err != nil || len(es) != f.want {
			t.Errorf("events %+v: %d, %v; want %d", f.p, len(es), err, f.want)
		}
	}
	out, _, code = cli(t, nil, "events", "--kind", "instance_held", "--since", "1h", "--api", sc.addr)
	if code != 0 || strings.Count(out, "instance_held") != 1 {
		t.Fatalf("events --kind --since: exit %d\n%s", code, out)
	}

	// On the same cluster (one daemon less on a busy machine): the JSON
	// rule, then the sweeps, which resume the cluster.
	t.Run("every JSON field", func(t *testing.T) { statusJSONHasEveryField(t, sc) })
	t.Run("sweeps", func(t *testing.T) { statusShowsSweeps(t, sc) })
}

// statusJSONHasEveryField: every answer of a real daemon, and the
// CLI's -o json, carries every field of its type, null when it has no
// value: a script can tell "none" from "not supported" (outside review:
// status -o json left out node.reason, checks.last_error, master.stuck;
// nodes -o json the grade fields of a node never graded).
func statusJSONHasEveryField(t *testing.T, sc statusCluster) {
	get := func(path string) []byte {
		t.Helper()
		return getBody(t, "http://"+sc.addr+path)
	}
	check := func(what string, typ reflect.Type, body []byte) map[string]any {
		t.Helper()
		missing, err := jsonx.Missing(typ, body)
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, body)
		}
		if len(missing) > 0 {
			t.Errorf("%s leaves out %s:\n%s", what, strings.Join(missing, ", "), body)
		}
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		return m
	}
	st := check("GET /v1/status", reflect.TypeFor[apitype.Status](), get("/v1/status"))
	check("GET /v1/leader", reflect.TypeFor[apitype.Leader](), get("/v1/leader"))
	check("GET /readyz", reflect.TypeFor[apitype.Ready](), get("/readyz"))
	check("GET /healthz", reflect.TypeFor[apitype.Health](), get("/healthz"))
	check("GET /v1/nodes", reflect.TypeFor[[]apitype.Node](), get("/v1/nodes"))
	check("GET /v1/nodes/ready-1", reflect.TypeFor[apitype.Node](), get("/v1/nodes/ready-1"))
	check("GET /v1/runs", reflect.TypeFor[[]apitype.Run](), get("/v1/runs"))
	check("GET /v1/runs/ID", reflect.TypeFor[apitype.RunDetail](), get(fmt.Sprintf("/v1/runs/%d", sc.recRun)))
	check("GET /v1/events", reflect.TypeFor[[]apitype.Event](), get("/v1/events"))
	check("GET /v1/holds", reflect.TypeFor[[]apitype.Hold](), get("/v1/holds"))
	check("GET /v1/instances", reflect.TypeFor[apitype.InstanceView](), get("/v1/instances?workflow=orders&id=8"))
	check("GET /v1/retries/stats", reflect.TypeFor[[]apitype.RetryStats](), get("/v1/retries/stats"))
	check("an error", reflect.TypeFor[apitype.ErrorBody](), get("/v1/nodes/nobody"))
	// The fields the review named, each with its null: the master is
	// not stuck and its passes did not fail.
	master, _ := st["master"].(map[string]any)
	checks, _ := st["checks"].(map[string]any)
	if v, ok := master["stuck"]; !ok || v != nil {
		t.Errorf("master.stuck %v (present %v), want null", v, ok)
	}
	if v, ok := checks["last_error"]; !ok || v != nil {
		t.Errorf("checks.last_error %v (present %v), want null", v, ok)
	}

	// The CLI prints the same, wrapped.
	type report struct {
		Health      apitype.Health  `json:"health"`
		Status      *apitype.Status `json:"status"`
		Ready       *apitype.Ready  `json:"ready"`
		StatusError string          `json:"status_error"`
	}
	out, errOut, code := cli(t, nil, "status", "-o", "json", "--api", sc.addr)
	if code != 1 { // node-a is Recovering: not ready
		t.Fatalf("status -o json: exit %d: %s", code, errOut)
	}
	rep := check("status -o json", reflect.TypeFor[report](), []byte(out))
	if s, _ := rep["status"].(map[string]any); s == nil || rep["ready"] != nil || rep["status_error"] != nil {
		t.Errorf("status -o json: status %v, ready %v, status_error %v; want the status and two nulls", s != nil, rep["ready"], rep["status_error"])
	}
	out, errOut, code = cli(t, nil, "nodes", "-o", "json", "--api", sc.addr)
	if code != 0 {
		t.Fatalf("nodes -o json: exit %d: %s", code, errOut)
	}
	check("nodes -o json", reflect.TypeFor[[]apitype.Node](), []byte(out))
	var ns []map[string]any
	if err := json.Unmarshal([]byte(out), &ns); err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if n["name"] != "ready-1" {
			continue
		}
		for _, k := range []string{"grade_changed_at", "grade_signature", "grade_reason"} {
			if v, ok := n[k]; !ok || v != nil {
				t.Errorf("nodes -o json: ready-1 (never graded) %s = %v (present %v), want null", k, v, ok)
			}
		}
	}
}

// statusShowsSweeps: status (text and -o json, from GET /v1/status)
// says when the master's last sweep began and when the next is
// expected: none while paused; after a resume and a pass that swept, its
// time and the next about health.sweep_interval later (here one period
// of the hourly schedule, its default then).
func statusShowsSweeps(t *testing.T, sc statusCluster) {
	out, _, _ := cli(t, nil, "status", "--api", sc.addr)
	if !strings.Contains(out, "\nsweep    none yet in this office; none while paused\n") {
		t.Fatalf("status while paused, before any sweep:\n%s", out)
	}
	tok := []string{"ENGINEHEALTH_TOKEN=tok"}
	if out, errOut, code := cli(t, tok, "resume", "--reason", "sweep test", "--api", sc.addr); code != 0 {
		t.Fatalf("resume: exit %d: %s%s", code, out, errOut)
	}
	before := time.Now()
	// A manual pass always sweeps; --force: the guard still holds.
	if out, errOut, code := cli(t, tok, "check", "--force", "--reason", "sweep test", "--api", sc.addr); code != 0 {
		t.Fatalf("check --force: exit %d: %s%s", code, out, errOut)
	}
	st, err := api.NewClient(sc.addr, "").Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	last, next := st.Checks.LastSweep, st.Checks.NextSweep
	if last.Before(before.Add(-time.Second)) || last.After(time.Now()) || !next.After(time.Now()) || next.After(last.Add(time.Hour+time.Second)) {
		t.Fatalf("after a sweep at about %v: last sweep %v, next %v; want it, and the next within the hour", before, last, next)
	}
	out, _, _ = cli(t, nil, "status", "-o", "json", "--api", sc.addr)
	var rep struct{ Status *apitype.Status }
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Status == nil ||
		!rep.Status.Checks.LastSweep.Equal(last) || !rep.Status.Checks.NextSweep.Equal(next) {
		t.Fatalf("status -o json: %v; want checks.last_sweep %v, next_sweep %v:\n%s", err, last, next, out)
	}
	out, _, _ = cli(t, nil, "status", "--api", sc.addr)
	want := "\nsweep    last " + last.UTC().Format(time.RFC3339) + " ("
	if !strings.Contains(out, want) || !strings.Contains(out, "; next about "+next.UTC().Format(time.RFC3339)+" (in ") {
		t.Fatalf("status after a sweep: want %q and the next:\n%s", want, out)
	}
}

// TestStatusPage: GET / is one self-contained HTML page: every node row
// with its status, grade and why, the paused and disruption banners, the
// holds, runs and events, stored text escaped; loaded in a real headless
// Chromium, which fetches nothing but the page, and screenshotted.
func TestStatusPage(t *testing.T) {
	t.Parallel()
	sc := newStatusCluster(t)
	resp, err := http.Get("http://" + sc.addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("GET /: %d %v", resp.StatusCode, resp.Header)
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "<img") || !strings.Contains(page, "&lt;script&gt;") {
		t.Fatal("stored text is not escaped on the page")
	}
	if strings.ContainsAny(page, "\x1b\u202e") || !strings.Contains(page, `\x1b[2J\u202eX\nFAKE ROW`) {
		t.Fatal("control and reordering characters of stored text are not shown escaped on the page")
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		// Only the escaped hostile text may name an address.
		if strings.Count(page, "http://198.51.100.7") != strings.Count(page, "&lt;img") {
			t.Fatal("the page names an external address outside escaped text")
		}
	}

	browser := chromium(t)
	ctx, cancel := context.WithTimeout(browser, 60*time.Second)
	defer cancel()
	var (
		mu        sync.Mutex
		foreign   []string
		requested int
	)
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			defer mu.Unlock()
			requested++
			if u, err := url.Parse(e.Request.URL); err != nil || u.Host != sc.addr {
				foreign = append(foreign, e.Request.URL)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(ctx,
		chromedp.EmulateViewport(412, 915, chromedp.EmulateScale(2), chromedp.EmulateMobile), // a phone
		chromedp.Navigate("http://"+sc.addr+"/"),
		chromedp.WaitVisible(chromedp.CSS("#nodes")),
	)
	if err != nil {
		t.Fatal(err)
	}
	title := must(chromedp.Run(ctx, chromedp.Title()))(t)
	paused := must(chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#banner-paused"))))(t)
	disruption := must(chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#banner-disruption"))))(t)
	rows := must(chromedp.Run(ctx, chromedp.Evaluate[[]map[string]string](`[...document.querySelectorAll('#nodes tbody tr[data-node]')].map(r => ({
			name: r.dataset.node, status: r.cells[1].innerText, grade: r.cells[2].innerText, why: r.querySelector('.why')?.innerText ?? ''}))`)))(t)
	count := func(table string) int {
		return must(chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#`+table+` tbody tr:not(:has(.none))').length`)))(t)
	}
	holds, runs, events, waiting := count("holds"), count("runs"), count("events"), count("waiting")
	retry := must(chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(r => r && ({key: r.dataset.waiting, task: r.cells[1].innerText,
			retry: r.cells[2].innerText, due: r.cells[3].innerText, reason: r.cells[4].innerText}))(document.querySelector('#waiting tbody tr[data-waiting]'))`)))(t)
	// Wider than the phone's screen? Then the page scrolls sideways as a
	// whole, and a phone is not served.
	overflow := must(chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)))(t)
	png := must(chromedp.Run(ctx, chromedp.FullScreenshot(100)))(t)
	shot := filepath.Join(t.ArtifactDir(), "status-page.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shot)
	if title == "owned" || !strings.HasPrefix(title, "⚠ enginehealth") {
		t.Fatalf("title %q", title)
	}
	if !strings.Contains(paused, "by ops") || !strings.Contains(paused, `<script>document.title="owned"</script>`) {
		t.Fatalf("paused banner %q: want the reason shown as text", paused)
	}
	if !strings.Contains(disruption, "of 7 nodes look unresponsive") {
		t.Fatalf("disruption banner %q", disruption)
	}
	got := map[string]map[string]string{}
	for _, r := range rows {
		got[r["name"]] = r
	}
	for name, want := range map[string][2]string{
		"node-a": {string(nodes.StatusRecovering), nodes.GradeNormal}, "ready-1": {string(nodes.StatusReady), nodes.GradeNormal},
		"stale-3": {string(nodes.StatusReady), nodes.GradeNormal}, "dead": {string(nodes.StatusNotResponding), nodes.GradeError},
		"crashed": {string(nodes.StatusUnexpectedShutdown), nodes.GradeNormal},
	} {
		if r := got[name]; r["status"] != want[0] || r["grade"] != want[1] {
			t.Errorf("row %s: %v, want %v", name, r, want)
		}
	}
	if len(rows) != 8 || !strings.Contains(got["dead"]["why"], "marked by node-a in term 1") || !strings.Contains(got["crashed"]["why"], "<b>") && !strings.Contains(got["crashed"]["why"], "<script>") {
		t.Errorf("%d rows; dead: %v; crashed: %v", len(rows), got["dead"], got["crashed"])
	}
	if holds != 1 || runs < 2 || events < 3 {
		t.Errorf("holds %d, runs %d, events %d rows", holds, runs, events)
	}
	// The retry waiting for its time, marked as such; its stored reason
	// shown as text, control and reordering characters as escapes.
	if waiting != 1 || retry["key"] != "orders/8" || retry["task"] != "reserve" || retry["retry"] != "waiting retry 1 of 3" ||
		!strings.HasPrefix(retry["due"], "in ") || !strings.HasSuffix(retry["due"], " min") ||
		!strings.Contains(retry["reason"], "interrupted: retry 1 of 3") || !strings.Contains(retry["reason"], `<script>document.title="owned"</script>`) ||
		!strings.Contains(retry["reason"], `\x1b[2J\u202eX\nFAKE ROW`) {
		t.Errorf("%d waiting retries; the row: %q", waiting, retry)
	}
	if overflow {
		t.Error("the page is wider than a phone's screen")
	}
	mu.Lock()
	defer mu.Unlock()
	if requested == 0 || len(foreign) > 0 {
		t.Errorf("%d requests, to elsewhere: %v", requested, foreign)
	}
}

// must returns v, failing the test on err.
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// chromium returns a browser context of a headless Debian Chromium, its
// own profile and temporary directory (it leaves an empty
// org.chromium.Chromium.* directory behind in its TMPDIR: the test's,
// removed with it), no network but the page's.
func chromium(t *testing.T) context.Context {
	t.Helper()
	exe := "/usr/bin/chromium"
	if _, err := os.Stat(exe); err != nil {
		t.Fatalf("the browser test needs Debian's chromium (apt-get install chromium; .ci/run installs it): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Env("TMPDIR="+t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-features", "MediaRouter,OptimizationHints,Translate"),
	)
	left := func() []string {
		m, _ := filepath.Glob(filepath.Join(os.TempDir(), "org.chromium.Chromium.*"))
		return m
	}
	before := left()
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		for _, d := range left() {
			if !slices.Contains(before, d) {
				t.Errorf("the browser left %s behind in the system's temporary directory", d)
			}
		}
	})
	return ctx
}
