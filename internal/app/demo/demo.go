// Package demo tells enginehealth's story on embedded defaults: a temporary
// PostgreSQL cluster and an in-process etcd, three real `enginehealth run`
// processes and three demo engines; then one engine node is killed, and
// then the master, and the timeline is read back from the database.
// Meanwhile a poison order crashes every engine worker that claims it until
// its retry policy is exhausted, and the shipments the killed nodes left
// are held until the operator releases them with `holds retry`.
//
// Everything it starts is stopped, and everything it creates is removed,
// when Run returns, also after a cancelled context (Ctrl-C).
package demo

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/internal/app/demoengine"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/testkit/etcdtest"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
)

// Options of a demo run.
type Options struct {
	// BinDir holds the enginehealth and demo-engine binaries.
	BinDir string
	Out    io.Writer
	// Keep leaves the cluster running after the story until ctx is done.
	Keep bool
	// Instances of each demo workflow; default 3000.
	Instances int
	// Inspect, when set, is called with the database and the timeline
	// before anything is torn down (for tests).
	Inspect func(db *sqlx.DB, tl *Timeline) error
}

// Timings of the demo cluster: short, so the story fits in a minute.
const (
	heartbeat          = 500 * time.Millisecond
	notRespondingAfter = 3 * time.Second
	leaseTTL           = 3 * time.Second
	claimTimeout       = 3 * time.Second
	checkEvery         = time.Second
	taskDuration       = 400 * time.Millisecond
)

var nodeNames = []string{"node-1", "node-2", "node-3"}

// The demo's retry policies: reserve (atomic) retries at once, at most 3
// times; ship (not atomic) holds an interrupted instance for an operator.
const (
	reservePolicy = "{strategy: retry, max_attempts: 3, backoff: {kind: fixed, base: 0s}}"
	shipPolicy    = "{strategy: hold}"
	// poisonID is the first order the engines claim; it crashes each of them.
	poisonID = 51
	// tokenEnv holds the demo's API token (operator commands).
	tokenEnv = "EH_DEMO_TOKEN" //nolint:gosec // G101: the name of the variable, not a token
)

// proc is a child process.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *proc) stop(sig syscall.Signal, timeout time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

type run struct {
	opt   Options
	token string
	out   io.Writer
	dir   string
	dsn   string
	db    *sqlx.DB
	etcd  *etcdtest.Etcd
	start time.Time
	procs []*proc
	tl    Timeline
}

// Run tells the story and returns its timeline.
func Run(ctx context.Context, opt Options) (*Timeline, error) {
	r := &run{opt: opt, out: cmp.Or[io.Writer](opt.Out, io.Discard), start: time.Now(), token: "demo-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	if r.opt.Instances == 0 {
		r.opt.Instances = 3000
	}
	if r.opt.Instances <= poisonID {
		return nil, fmt.Errorf("demo: at least %d instances, got %d", poisonID+1, r.opt.Instances)
	}
	r.tl.Start = r.start
	for _, b := range []string{"enginehealth", "demo-engine"} {
		if _, err := os.Stat(filepath.Join(opt.BinDir, b)); err != nil {
			return nil, fmt.Errorf("demo: %s binary: %w (build it first: make build)", b, err)
		}
	}
	defer r.stopAll()

	r.say("starting a temporary PostgreSQL cluster and an in-process etcd")
	srv, err := pgtest.Start()
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	if r.etcd, err = etcdtest.Start(); err != nil {
		return nil, err
	}
	defer r.etcd.Close()
	if r.dir, err = os.MkdirTemp("", "ehdemo-"); err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(r.dir) }() // Timeline.Dirs lets the tests check it is gone
	r.dsn = srv.URL("postgres")
	r.tl.PostgresPort, r.tl.EtcdEndpoint = srv.Port, r.etcd.Endpoint
	r.tl.Dirs = []string{srv.Dir(), r.etcd.Dir(), r.dir}
	if r.db, err = pgdb.Open(pgdb.Config{DSN: r.dsn}); err != nil {
		return nil, err
	}
	defer func() { _ = r.db.Close() }() // closing a pool after use: nothing to act on

	if err := r.seed(ctx); err != nil {
		return nil, err
	}
	if err := r.story(ctx); err != nil {
		return &r.tl, err
	}
	if err := r.timeline(ctx); err != nil {
		return &r.tl, err
	}
	r.print()
	if opt.Inspect != nil {
		if err := opt.Inspect(r.db, &r.tl); err != nil {
			return &r.tl, err
		}
	}
	if opt.Keep {
		r.say("--keep: the surviving node stays up; its API: http://%s/v1/nodes — Ctrl-C to stop", r.tl.Addresses[r.tl.Survivor])
		<-ctx.Done()
	}
	return &r.tl, nil
}

func (r *run) say(format string, args ...any) {
	fmt.Fprintf(r.out, "[%5.1fs] %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

// seed creates the demo schema and instances, with leftovers of a crash
// before the cluster started: orders mid-reserve without claims, reports
// mid-render.
func (r *run) seed(ctx context.Context) error {
	if err := demoengine.Seed(ctx, r.db.DB, r.opt.Instances); err != nil {
		return err
	}
	r.db.MustExecContext(ctx, `UPDATE demo.orders SET status = 'Reserving' WHERE id <= 50`)
	r.db.MustExecContext(ctx, `UPDATE demo.reports SET state = 'Rendering' WHERE id <= 30`)
	r.say("created demo.orders (claimable: reserve is atomic, ship is not) and demo.reports (not claimable), %d each;", r.opt.Instances)
	r.say("  a crash before the cluster started left 50 orders in Reserving and 30 reports in Rendering")
	r.say("  order %d is poison: every engine worker that claims it crashes, leaving its claim behind", poisonID)
	r.say("  policies: reserve on_interrupt %s; ship on_interrupt %s", reservePolicy, shipPolicy)
	return nil
}

func (r *run) config(name string) string {
	return fmt.Sprintf(`node:
  name: %s
  heartbeat_interval: %s
  shutdown_timeout: 5s
database:
  dsn_env: ENGINEHEALTH_DSN
etcd:
  endpoints: ["%s"]
  lease_ttl: %s
health:
  schedule: "@every %s"
  not_responding_after: %s
api:
  listen: 127.0.0.1:0
  token_env: %s
log:
  format: json
%s`, name, heartbeat, r.etcd.Endpoint, leaseTTL, checkEvery, notRespondingAfter, tokenEnv, workflowsYAML())
}

// workflowsYAML is the demo engine's workflows with the demo's policies.
func workflowsYAML() string {
	y := demoengine.WorkflowsYAML(claimTimeout)
	y = strings.Replace(y, "        atomic_internal: true\n", "        atomic_internal: true\n        on_interrupt: "+reservePolicy+"\n", 1)
	return strings.Replace(y, "        failed: ShipFailed\n", "        failed: ShipFailed\n        on_interrupt: "+shipPolicy+"\n", 1)
}

// cli runs the enginehealth CLI against the node at addr and returns its
// output.
func (r *run) cli(ctx context.Context, addr string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(r.opt.BinDir, "enginehealth"), append(args, "--api", addr)...)
	cmd.Env = append(os.Environ(), "ENGINEHEALTH_TOKEN="+r.token)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("demo: enginehealth %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// show prints a command and its output, indented.
func (r *run) show(ctx context.Context, addr string, args ...string) error {
	out, err := r.cli(ctx, addr, args...)
	if err != nil {
		return err
	}
	r.say("$ enginehealth %s", strings.Join(args, " "))
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		fmt.Fprintf(r.out, "          %s\n", l)
	}
	return nil
}

func (r *run) spawn(name string, args ...string) (*proc, error) {
	cfg := filepath.Join(r.dir, strings.SplitN(name, "/", 2)[0]+".yaml")
	if _, err := os.Stat(cfg); err != nil {
		if err := os.WriteFile(cfg, []byte(r.config(strings.SplitN(name, "/", 2)[0])), 0o600); err != nil {
			return nil, err
		}
	}
	logf, err := os.Create(filepath.Join(r.dir, strings.ReplaceAll(name, "/", "-")+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], append(args[1:], "--config", cfg)...)
	cmd.Env = append(os.Environ(), "ENGINEHEALTH_DSN="+r.dsn, tokenEnv+"="+r.token)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	r.tl.PIDs = append(r.tl.PIDs, cmd.Process.Pid)
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(p.done) }()
	r.procs = append(r.procs, p)
	return p, nil
}

func (r *run) stopAll() {
	for _, p := range r.procs {
		p.stop(syscall.SIGTERM, 10*time.Second)
	}
}

// host is one engine node: a sidecar and its engine.
type host struct {
	name    string
	sidecar *proc
	engine  *proc
}

func (r *run) story(ctx context.Context) error {
	hosts := map[string]*host{}
	for _, n := range nodeNames {
		p, err := r.spawn(n+"/sidecar", filepath.Join(r.opt.BinDir, "enginehealth"), "run")
		if err != nil {
			return err
		}
		hosts[n] = &host{name: n, sidecar: p}
	}
	r.say("started three enginehealth nodes; waiting for a master and for readiness")
	if err := r.until(ctx, 60*time.Second, "every node Ready", func() (bool, error) {
		var ready int
		err := r.db.GetContext(ctx, &ready, `SELECT count(*) FROM enginehealth.nodes WHERE status = 'Ready'`)
		return ready == len(nodeNames), err
	}); err != nil {
		return err
	}
	r.tl.Addresses = map[string]string{}
	rows, err := r.db.QueryxContext(ctx, `SELECT name, api_address FROM enginehealth.nodes ORDER BY name`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var n, a string
		if err := rows.Scan(&n, &a); err != nil {
			_ = rows.Close()
			return err
		}
		r.tl.Addresses[n] = a
		r.say("  %s ready, status API at http://%s/v1/nodes", n, a)
	}
	_ = rows.Close()
	master, err := r.master(ctx)
	if err != nil {
		return err
	}
	r.say("  %s is the master (term %d)", master.Node, master.Term)

	for _, n := range nodeNames {
		p, err := r.spawn(n+"/engine", filepath.Join(r.opt.BinDir, "demo-engine"), "run", "--node", n,
			"--workers", "3", "--task-duration", taskDuration.String(), "--failure-rate", "0.05", "--poison", strconv.Itoa(poisonID))
		if err != nil {
			return err
		}
		hosts[n].engine = p
	}
	r.say("started a demo engine on each node (3 workers each, %s per task)", taskDuration)
	r.say("  each engine fails 5%% of its tasks on purpose, as engines do: ReserveFailed and ShipFailed below are those")
	r.say("  failures, the engine's own (no on_failure policy here retries them), not the sidecar's repairs")
	if err := r.progress(ctx, 5); err != nil {
		return err
	}

	// Kill an engine node that is not the master: sidecar and engine.
	var victim string
	for _, n := range nodeNames {
		if n != master.Node {
			victim = n
			break
		}
	}
	if err := r.kill(ctx, hosts[victim], false, master.Term); err != nil {
		return err
	}
	if err := r.progress(ctx, 2); err != nil {
		return err
	}
	// Then the master's host.
	if err := r.kill(ctx, hosts[master.Node], true, master.Term); err != nil {
		return err
	}
	for _, n := range nodeNames {
		if n != victim && n != master.Node {
			r.tl.Survivor = n
		}
	}
	if err := r.progress(ctx, 3); err != nil {
		return err
	}
	if err := r.policies(ctx); err != nil {
		return err
	}
	if !r.opt.Keep {
		r.say("stopping the surviving node cleanly (SIGTERM)")
		h := hosts[r.tl.Survivor]
		h.engine.stop(syscall.SIGTERM, 10*time.Second)
		h.sidecar.stop(syscall.SIGTERM, 10*time.Second)
	}
	return nil
}

// kill SIGKILLs a host and waits for the master to repair what it left.
func (r *run) kill(ctx context.Context, h *host, isMaster bool, term int64) error {
	what := "engine node"
	if isMaster {
		what = "master node"
	}
	// Kill it while it ships: its shipment is then held (ship's policy).
	_ = r.until(ctx, 10*time.Second, h.name+" shipping", func() (bool, error) {
		var n int
		err := r.db.GetContext(ctx, &n, `SELECT count(*) FROM demo.orders_claim c JOIN demo.orders o ON o.id = c.instance_id
			WHERE c.node = $1 AND o.status = 'Shipping' AND c.expires_at > now()`, h.name)
		return n > 0, err
	})
	h.engine.stop(syscall.SIGKILL, time.Second)
	h.sidecar.stop(syscall.SIGKILL, time.Second)
	killed := time.Now()
	// The claims it left are those left once the server is done with its
	// connections: a commit it sent just before it died (a task
	// finished, its claim deleted) may still be applied.
	if err := r.until(ctx, 10*time.Second, h.name+"'s engine connections gone", func() (bool, error) {
		var n int
		err := r.db.GetContext(ctx, &n, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, "engine/"+h.name)
		return n == 0, err
	}); err != nil {
		return err
	}
	var held []string
	if err := r.db.SelectContext(ctx, &held, `SELECT instance_id::text FROM demo.orders_claim WHERE node = $1`, h.name); err != nil {
		return err
	}
	r.say("SIGKILL %s %s (sidecar and engine): it held %s", what, h.name, count(len(held), "claim"))
	k := Kill{Node: h.name, Master: isMaster, At: killed, Claims: len(held)}
	if isMaster {
		if err := r.until(ctx, 60*time.Second, "a new master", func() (bool, error) {
			var t int64
			err := r.db.GetContext(ctx, &t, `SELECT term FROM enginehealth.leader_term`)
			return t > term, err
		}); err != nil {
			return err
		}
		k.Failover = time.Since(killed)
		m, err := r.master(ctx)
		if err != nil {
			return err
		}
		r.say("  %s took office (term %d) %d ms after the kill", m.Node, m.Term, k.Failover.Milliseconds())
	}
	// Repaired: moved on, or held for an operator.
	if err := r.until(ctx, 60*time.Second, h.name+"'s work repaired", func() (bool, error) {
		var left int
		err := r.db.GetContext(ctx, &left, `SELECT count(*) FROM demo.orders o WHERE id::text = ANY($1) AND status IN ('Reserving', 'Shipping')
			AND NOT EXISTS (SELECT 1 FROM demo.orders_claim c WHERE c.instance_id = o.id AND c.node <> $2)
			AND NOT EXISTS (SELECT 1 FROM enginehealth.attempts a WHERE a.workflow = 'orders' AND a.instance = o.id::text AND a.state = 'held')`,
			pq.Array(held), h.name)
		return left == 0, err
	}); err != nil {
		return err
	}
	k.Repaired = time.Since(killed)
	var parked int
	if err := r.db.GetContext(ctx, &parked, `SELECT count(*) FROM enginehealth.attempts WHERE workflow = 'orders'
		AND instance = ANY($1) AND state = 'held'`, pq.Array(held)); err != nil {
		return err
	}
	r.say("  its %s repaired %d ms after the kill (%s held for an operator)", count(len(held), "interrupted instance"), k.Repaired.Milliseconds(), count(parked, "shipment"))
	if err := r.until(ctx, 60*time.Second, h.name+" Not responding", func() (bool, error) {
		var s string
		err := r.db.GetContext(ctx, &s, `SELECT status FROM enginehealth.nodes WHERE name = $1`, h.name)
		return s == "Not responding", err
	}); err != nil {
		return err
	}
	r.say("  %s is Not responding", h.name)
	r.tl.Kills = append(r.tl.Kills, k)
	return nil
}

// policies waits for the poison order to be failed for good, releases the
// held shipments as an operator would, and prints the attempts of both.
func (r *run) policies(ctx context.Context) error {
	addr := r.tl.Addresses[r.tl.Survivor]
	r.say("waiting for poison order %d to exhaust its retries", poisonID)
	if err := r.until(ctx, 90*time.Second, "the poison order failed", func() (bool, error) {
		var s string
		err := r.db.GetContext(ctx, &s, `SELECT status FROM demo.orders WHERE id = $1`, poisonID)
		return s == "ReserveFailed", err
	}); err != nil {
		return err
	}
	r.say("  order %d is ReserveFailed: exhausted", poisonID)
	if err := r.show(ctx, addr, "events", "--instance", fmt.Sprintf("orders/%d", poisonID)); err != nil {
		return err
	}
	var held []string
	if err := r.db.SelectContext(ctx, &held, `SELECT instance FROM enginehealth.attempts WHERE workflow = 'orders' AND state = 'held' ORDER BY instance`); err != nil {
		return err
	}
	r.tl.Released = held
	if len(held) == 0 {
		r.say("no shipment is held")
		return nil
	}
	if err := r.show(ctx, addr, "holds"); err != nil {
		return err
	}
	if err := r.show(ctx, addr, "holds", "retry", "--all", "--reason", "their nodes are gone: ship them again"); err != nil {
		return err
	}
	if err := r.until(ctx, 60*time.Second, "the released shipments shipped", func() (bool, error) {
		var left int
		err := r.db.GetContext(ctx, &left, `SELECT count(*) FROM demo.orders WHERE id::text = ANY($1) AND status NOT IN ('Shipped', 'ShipFailed')`, pq.Array(held))
		return left == 0, err
	}); err != nil {
		return err
	}
	verb := "are"
	if len(held) == 1 {
		verb = "is"
	}
	r.say("  the %s %s done", count(len(held), "released shipment"), verb)
	return r.show(ctx, addr, "events", "--instance", "orders/"+held[0])
}

func (r *run) master(ctx context.Context) (Master, error) {
	var m Master
	err := r.db.GetContext(ctx, &m, `SELECT node, term, since FROM enginehealth.leader_term`)
	return m, err
}

// progress prints instance counts once a second for n seconds.
func (r *run) progress(ctx context.Context, n int) error {
	for range n {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		var counts []struct {
			Status string `db:"status"`
			N      int    `db:"n"`
		}
		if err := r.db.SelectContext(ctx, &counts, `SELECT status, count(*) AS n FROM demo.orders GROUP BY 1 ORDER BY 1`); err != nil {
			return err
		}
		parts := make([]string, 0, len(counts))
		for _, c := range counts {
			parts = append(parts, fmt.Sprintf("%s %d", c.Status, c.N))
		}
		r.say("orders: %s", strings.Join(parts, ", "))
	}
	return nil
}

// until polls cond until it holds.
func (r *run) until(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: %s: not after %s (last error: %v; logs in %s)", what, timeout, err, r.dir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Master is a term of office.
type Master struct {
	Node  string    `db:"node"`
	Term  int64     `db:"term"`
	Since time.Time `db:"since"`
}

// Kill is one killed node, measured by the demo.
type Kill struct {
	Node     string
	Master   bool
	At       time.Time
	Claims   int
	Failover time.Duration // master only: kill → new master in office
	Repaired time.Duration // kill → its interrupted instances repaired
}

// Entry is one line of the timeline, read from the events table.
type Entry struct {
	At   time.Time
	Text string
}

// Timeline is what happened, from the database.
type Timeline struct {
	Start        time.Time
	PostgresPort int
	EtcdEndpoint string
	// Dirs and PIDs the demo created (all gone when Run returns).
	Dirs      []string
	PIDs      []int
	Addresses map[string]string
	Survivor  string
	Kills     []Kill
	// Released lists the held shipments the operator sent back with holds retry.
	Released []string
	// From the events table:
	Masters       []Master
	NotResponding []string
	// ClaimsExpired counts expired claims by the node that held them (the
	// timeline has a line per node and pass).
	ClaimsExpired map[string]int
	// Repaired counts repairs by "trigger: from → to".
	Repaired map[string]int
	// Poison lists the repair events of the poison order, oldest first.
	Poison []string
	// Grades lists the failover grade changes, oldest first.
	Grades  []string
	Entries []Entry
}

func (r *run) timeline(ctx context.Context) error {
	tl := &r.tl
	if err := r.db.SelectContext(ctx, &tl.Masters, `SELECT node, term, at AS since FROM enginehealth.events
		WHERE kind = 'master_elected' ORDER BY id`); err != nil {
		return err
	}
	for _, m := range tl.Masters {
		tl.Entries = append(tl.Entries, Entry{m.Since, fmt.Sprintf("%s took office as master (term %d)", m.Node, m.Term)})
	}
	var nr []struct {
		Node string    `db:"node"`
		At   time.Time `db:"at"`
	}
	if err := r.db.SelectContext(ctx, &nr, `SELECT node, at FROM enginehealth.events
		WHERE kind = 'node_status' AND to_state = 'Not responding' ORDER BY id`); err != nil {
		return err
	}
	for _, e := range nr {
		tl.NotResponding = append(tl.NotResponding, e.Node)
		tl.Entries = append(tl.Entries, Entry{e.At, e.Node + " went Not responding"})
	}
	var ce []struct {
		Node  string    `db:"node"`
		N     int       `db:"n"`
		First time.Time `db:"first"`
	}
	if err := r.db.SelectContext(ctx, &ce, `SELECT node, count(*) AS n, min(at) AS first FROM enginehealth.events
		WHERE kind = 'claim_expired' GROUP BY node, run_id ORDER BY 3`); err != nil {
		return err
	}
	tl.ClaimsExpired = map[string]int{}
	for _, e := range ce {
		tl.ClaimsExpired[e.Node] += e.N
		tl.Entries = append(tl.Entries, Entry{e.First, fmt.Sprintf("%s of %s expired", count(e.N, "claim"), e.Node)})
	}
	var rep []struct {
		Trigger string         `db:"trigger"`
		From    string         `db:"from_state"`
		To      string         `db:"to_state"`
		Node    sql.NullString `db:"node"`
		N       int            `db:"n"`
		First   time.Time      `db:"first"`
	}
	if err := r.db.SelectContext(ctx, &rep, `SELECT r.trigger, e.from_state, e.to_state, e.node, count(*) AS n, min(e.at) AS first
		FROM enginehealth.events e JOIN enginehealth.runs r ON r.id = e.run_id
		WHERE e.kind = 'instance_repaired' AND e.instance IS DISTINCT FROM $1 GROUP BY 1, 2, 3, 4 ORDER BY 6`, strconv.Itoa(poisonID)); err != nil {
		return err
	}
	tl.Repaired = map[string]int{}
	for _, e := range rep {
		key := fmt.Sprintf("%s: %s → %s", e.Trigger, e.From, e.To)
		tl.Repaired[key] += e.N
		verb := "reverted"
		if strings.HasSuffix(e.To, "Failed") {
			verb = "failed"
		}
		whose := "left from before the start"
		if e.Node.Valid {
			whose = "interrupted on " + e.Node.String
		}
		tl.Entries = append(tl.Entries, Entry{e.First, fmt.Sprintf("%s recovery %s %s %s → %s (%s)", e.Trigger, verb, count(e.N, "instance"), e.From, e.To, whose)})
	}
	var rest []struct {
		At     time.Time      `db:"at"`
		Kind   string         `db:"kind"`
		Node   sql.NullString `db:"node"`
		From   sql.NullString `db:"from_state"`
		To     sql.NullString `db:"to_state"`
		Reason string         `db:"reason"`
		Sig    sql.NullString `db:"sig"`
		N      int            `db:"n"`
		ID     int64          `db:"id"`
	}
	// The poison order's repairs one by one; holds, hold decisions and
	// grade changes.
	if err := r.db.SelectContext(ctx, &rest, `SELECT min(e.at) AS at, e.kind, e.node, e.from_state, e.to_state,
			CASE WHEN e.kind IN ('instance_held', 'hold_decided') THEN '' ELSE e.reason END AS reason,
			CASE WHEN e.kind = 'node_grade' THEN e.workflow || '/' || e.task || '/' || e.instance END AS sig, count(*) AS n,
			min(e.id) AS id
		FROM enginehealth.events e
		WHERE (e.kind = 'instance_repaired' AND e.instance = $1) OR e.kind IN ('instance_held', 'hold_decided', 'node_grade')
		GROUP BY e.kind, e.node, e.from_state, e.to_state, 6, 7, CASE WHEN e.kind IN ('instance_held', 'hold_decided') THEN 0 ELSE e.id END
		ORDER BY 1, id`, strconv.Itoa(poisonID)); err != nil {
		return err
	}
	for _, e := range rest {
		var text string
		switch e.Kind {
		case "instance_repaired":
			key := fmt.Sprintf("periodic: %s → %s", e.From.String, e.To.String)
			tl.Repaired[key]++
			text = fmt.Sprintf("poison order %d interrupted on %s: %s → %s: %s", poisonID, cmp.Or(e.Node.String, "?"), e.From.String, e.To.String, e.Reason)
			tl.Poison = append(tl.Poison, text)
		case "instance_held":
			text = fmt.Sprintf("%s interrupted on %s held for an operator (ship: on_interrupt hold)", count(e.N, "shipment"), cmp.Or(e.Node.String, "?"))
		case "hold_decided":
			text = fmt.Sprintf("the operator released %s (holds retry)", count(e.N, "held shipment"))
		case "node_grade":
			text = fmt.Sprintf("%s failover grade %s → %s: %s", e.Node.String, e.From.String, e.To.String, e.Reason)
			if e.From.String == e.To.String {
				// A change the cap held back: the grade stays.
				text = fmt.Sprintf("%s stays at failover grade %s: %s", e.Node.String, e.To.String, e.Reason)
			}
			tl.Grades = append(tl.Grades, text)
		}
		tl.Entries = append(tl.Entries, Entry{e.At, text})
	}
	for _, k := range tl.Kills {
		tl.Entries = append(tl.Entries, Entry{k.At, "SIGKILL " + k.Node})
	}
	sort.SliceStable(tl.Entries, func(i, j int) bool { return tl.Entries[i].At.Before(tl.Entries[j].At) })
	return nil
}

func (r *run) print() {
	fmt.Fprintln(r.out)
	fmt.Fprintln(r.out, "Timeline (from the events table; seconds since the demo started)")
	for _, e := range r.tl.Entries {
		fmt.Fprintf(r.out, "  %6.2fs  %s\n", e.At.Sub(r.start).Seconds(), e.Text)
	}
	fmt.Fprintln(r.out)
	tw := tabwriter.NewWriter(r.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Measured\t\ttarget")
	for _, k := range r.tl.Kills {
		if k.Master {
			fmt.Fprintf(tw, "  failover after SIGKILL of the master %s\t%d ms\t≤ lease TTL + 1 s = %d ms\n", k.Node, k.Failover.Milliseconds(), (leaseTTL + time.Second).Milliseconds())
		}
		fmt.Fprintf(tw, "  crash to repair, %s (%d claims)\t%d ms\t≤ claim timeout + check interval + 1 s = %d ms\n", k.Node, k.Claims,
			k.Repaired.Milliseconds(), (claimTimeout + checkEvery + time.Second).Milliseconds())
	}
	_ = tw.Flush() // to the terminal, as every line before it
}

// Ports reports whether anything still listens on the demo's PostgreSQL
// port or etcd endpoint (for tests of the cleanup).
func (tl *Timeline) Ports() []string {
	var open []string
	for _, a := range []string{fmt.Sprintf("127.0.0.1:%d", tl.PostgresPort), tl.EtcdEndpoint} {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			_ = c.Close()
			open = append(open, a)
		}
	}
	return open
}

// count says n things: "1 claim", "3 claims".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
