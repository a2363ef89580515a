package e2e

// The rolling upgrade: the previous release of the sidecar (built from
// git, prevrelease_test.go) and the one under test run side by side on
// the fault suite's cluster, one node upgraded at a time, and the fault
// suite's checker judges the record.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// TestRollingUpgrade runs a mixed cluster of the previous release and
// this one, on the fault suite's cluster (a 3-member etcd of processes,
// its own PostgreSQL, three sidecars behind proxies, three demo engines
// under load on a workflow with retry policies and a hold):
//
//  1. three nodes of the previous release, on a schema it migrated;
//  2. a standby upgraded (SIGTERM, the new binary, the same
//     configuration) migrates the schema forward while the old master
//     keeps office; interrupted instances are held, retried and decided
//     by the old master, the decision forwarded to it by the new node;
//  3. the old master SIGKILLed: the new node takes office, the old
//     standby runs beside it and its heartbeats land; the new master
//     holds, retries and decides, forwarded by the old node;
//  4. and back: the new master SIGKILLed, the old standby takes office on
//     the new schema and holds, retries and decides, forwarded by the new
//     node, restarted;
//  5. the previous release started on the new schema is refused, saying
//     why, before it touches anything;
//  6. the rollout finished: the old master upgraded hands over to a new
//     node; every node new and Ready, one master, and no violation of the
//     fault suite's invariants over the whole record.
//
// While a node of a release before schema version 17
// (recovery.EventRetriesSchema) runs, a retry at once writes its attempts
// row (such a release counts retries from the rows); once every node runs
// a release of 17 or later, it writes only its event. The previous
// release is the last before a change of the migrations, so its schema
// version says which.
func TestRollingUpgrade(t *testing.T) {
	t.Parallel()
	start := time.Now()
	prev, rel := previousRelease(t)
	ms, err := pgdb.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	newest := ms[len(ms)-1].Version

	r := startFaultRun(t, 1, faultOpts{bin: prev, previous: true, prevAutoSync: rel.autoSync, sidecars: 3})
	oldest := r.schemaVersion()
	t.Logf("previous release %s migrated the schema to version %d; this one knows %d", rel.name, oldest, newest)
	if oldest > newest {
		t.Fatalf("the previous release migrates to version %d, beyond this one's %d", oldest, newest)
	}
	// A retry at once writes its attempts row while the previous release
	// runs, if that release counts retries from the rows.
	mixedRow := oldest < recovery.EventRetriesSchema
	m := r.waitMaster()
	first := r.c.term(t)
	if first.Node != m.name {
		t.Fatalf("term %d recorded by %s, but %s acts", first.Term, first.Node, m.name)
	}
	var standbys []*sidecar
	for _, s := range r.sidecars {
		if s != m {
			standbys = append(standbys, s)
		}
	}
	u, s2 := standbys[0], standbys[1]

	// 2. One standby upgraded: it migrates the schema forward beside the
	// old master, which keeps office and repairs.
	r.upgrade(u)
	if v := r.schemaVersion(); v != newest {
		t.Fatalf("after %s started on the new release, the schema is at version %d, want %d", u.name, v, newest)
	}
	if oldest < newest && !strings.Contains(u.d.stderr.String(), `"msg":"schema migrated"`) {
		t.Fatalf("%s did not log the migration to %d", u.name, newest)
	}
	if cur := r.c.term(t); cur.Term != first.Term {
		t.Fatalf("the old master lost office while a standby upgraded: term %d (%s), was %d (%s)", cur.Term, cur.Node, first.Term, first.Node)
	}
	r.repairsUnder(m.name, first.Term, u, bin, false)
	r.retriedAtOnce(m.name, first.Term, mixedRow)

	// 3. The new node takes office: the old master is killed while the
	// other old standby, whose election key is older than the upgraded
	// node's, is cut from etcd (else it would be next in line); it runs
	// on beside the new master.
	oldM := r.incarnation(m)
	for _, p := range s2.etcd {
		r.check1(p.Blackhole())
	}
	r.note("SIGKILL %s, the old master; %s cut from etcd", m.name, s2.name)
	r.signal(m, syscall.SIGKILL)
	recovered := r.recoveryFrom(time.Now())
	<-m.d.done
	if _, err := r.c.db.Exec(`INSERT INTO faults.kills (name) VALUES ($1)`, m.name); err != nil {
		t.Fatal(err)
	}
	r.count("kill-master")
	second := r.c.waitTerm(t, first.Term, 60*time.Second)
	if second.Node != u.name {
		t.Fatalf("term %d taken by %s, want the upgraded %s", second.Term, second.Node, u.name)
	}
	for _, p := range s2.etcd {
		r.check1(p.Restore())
	}
	r.measure("kill-master", recovered)
	r.note("%s, on the new release, took office in term %d", u.name, second.Term)
	r.heartbeatsLand(s2)
	eventually(t, 30*time.Second, s2.name+" (previous release) names the new master", func() (bool, error) {
		l, err := api.NewClient(s2.listen, "").Leader(context.Background())
		return err == nil && l.Name == u.name && l.Term == second.Term, err
	})
	r.repairsUnder(u.name, second.Term, s2, prev, true)
	r.retriedAtOnce(u.name, second.Term, mixedRow)

	// 4. And back: the new master killed, the old standby (the only
	// other node running) takes office on the new schema; the new node,
	// restarted, forwards to it.
	oldU := r.incarnation(u)
	r.note("SIGKILL %s, the new master", u.name)
	r.signal(u, syscall.SIGKILL)
	recovered = r.recoveryFrom(time.Now())
	<-u.d.done
	if _, err := r.c.db.Exec(`INSERT INTO faults.kills (name) VALUES ($1)`, u.name); err != nil {
		t.Fatal(err)
	}
	r.count("kill-master")
	third := r.c.waitTerm(t, second.Term, 60*time.Second)
	if third.Node != s2.name {
		t.Fatalf("term %d taken by %s, want %s of the previous release", third.Term, third.Node, s2.name)
	}
	r.measure("kill-master", recovered)
	r.note("%s, on the previous release, took office in term %d", s2.name, third.Term)
	r.note("restart %s on the new release", u.name)
	r.startSidecar(u)
	r.ack(u, oldU)
	r.heartbeatsLand(u)
	r.repairsUnder(s2.name, third.Term, u, bin, false)
	r.retriedAtOnce(s2.name, third.Term, mixedRow)

	// 5. The previous release on the new schema: refused.
	if oldest < newest {
		r.previousRefused(m, prev, oldM, oldest, newest)
	} else {
		t.Logf("the previous release knows every migration of this one: no refusal to see")
	}

	// 6. The rollout finished: the old master upgraded (SIGTERM: it
	// resigns) hands over to a node of the new release.
	m.mu.Lock()
	m.bin = bin
	m.mu.Unlock()
	r.note("restart %s on the new release", m.name)
	r.startSidecar(m)
	r.ack(m, oldM)
	r.upgrade(s2)
	last := r.c.waitTerm(t, third.Term, 60*time.Second)
	if last.Node == s2.name {
		t.Fatalf("term %d taken by %s, which resigned to upgrade", last.Term, last.Node)
	}
	r.retriedAtOnce(last.Node, last.Term, false)
	r.healAll()
	r.finalPass()
	if cur := r.c.term(t); cur.Term != last.Term {
		t.Fatalf("the master changed after the rollout finished: term %d (%s), was %d (%s)", cur.Term, cur.Node, last.Term, last.Node)
	}
	var masters []string
	if err := r.c.db.Select(&masters, `SELECT name FROM enginehealth.nodes WHERE is_master ORDER BY name`); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(masters, []string{last.Node}) {
		t.Fatalf("nodes flagged master at the end: %v, want [%s]", masters, last.Node)
	}
	close(r.stop)
	<-r.stopped
	r.probe.finish()
	r.acting = r.probe.report(time.Time{}, time.Now())
	for _, two := range r.acting.twoActing {
		r.violation("two nodes acted as master at once: %s", two)
	}
	r.verdict(time.Since(start))
}

// schemaVersion is the newest migration applied to the sidecar schema.
func (r *faultRun) schemaVersion() int {
	r.t.Helper()
	var v int
	if err := r.c.db.Get(&v, `SELECT max(version) FROM enginehealth.schema_migrations`); err != nil {
		r.t.Fatal(err)
	}
	return v
}

// count counts a step of kind, for the summary.
func (r *faultRun) count(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.injected[kind]++
}

// upgrade stops sidecar s with SIGTERM (exit 0 required), starts it
// again on the release under test with the same configuration, and waits
// until it is Ready.
func (r *faultRun) upgrade(s *sidecar) {
	r.t.Helper()
	old := r.incarnation(s)
	r.note("upgrade %s: SIGTERM, then the new release", s.name)
	r.signal(s, syscall.SIGTERM)
	recovered := r.recoveryFrom(time.Now())
	if code := s.d.wait(r.t, 30*time.Second); code != 0 {
		r.t.Fatalf("%s exited %d on SIGTERM:\n%s", s.name, code, s.d.stderr.String())
	}
	s.mu.Lock()
	s.bin = bin
	s.mu.Unlock()
	r.startSidecar(s)
	eventually(r.t, 60*time.Second, s.name+" registered on the new release", func() (bool, error) {
		n, err := r.c.node(s.name)
		return err == nil && n.Incarnation != "" && n.Incarnation != old, nil
	})
	if n, _ := r.c.node(s.name); n.Status == nodes.StatusUnexpectedShutdown {
		r.t.Fatalf("%s came back in %s after a SIGTERM", s.name, n.Status)
	}
	waitNodeStatus(r.t, r.c, s.name, nodes.StatusReady)
	r.count("upgrade (SIGTERM, new release)")
	r.measure("upgrade (SIGTERM, new release)", recovered)
}

// heartbeatsLand waits until s is Ready and its heartbeat moved its
// last_active on twice.
func (r *faultRun) heartbeatsLand(s *sidecar) {
	r.t.Helper()
	waitNodeStatus(r.t, r.c, s.name, nodes.StatusReady)
	n, err := r.c.node(s.name)
	if err != nil {
		r.t.Fatal(err)
	}
	for i := range 2 {
		last := n.LastActive
		eventually(r.t, 30*time.Second, fmt.Sprintf("heartbeat %d of %s lands", i+1, s.name), func() (bool, error) {
			n, err = r.c.node(s.name)
			return err == nil && n.LastActive.After(last) && n.Status == nodes.StatusReady, err
		})
	}
}

// repairsUnder interrupts instances of the tasks that hold and retry
// (an engine killed while it holds them), and requires master, in term,
// to hold and to retry them; then an operator retries the hold through
// node via, with the CLI of program (the release via runs), and via
// forwards the decision to the master. newMaster: the master runs this
// release, which records the node that forwarded (events.via).
func (r *faultRun) repairsUnder(master string, term int64, via *sidecar, program string, newMaster bool) {
	r.t.Helper()
	after := r.lastEvent()
	held := r.interrupt("Delivering")
	retried := r.interrupt("Shipping")
	for _, e := range []struct{ kind, instance string }{
		{"instance_held", held}, {"retry_scheduled", retried}, {"instance_retried", retried},
	} {
		ev := r.waitEvent(e.kind, e.instance, after)
		if ev.Actor != master || ev.Term != term {
			r.t.Fatalf("%s of orders/%s by %s in term %d, want %s in term %d", e.kind, e.instance, ev.Actor, ev.Term, master, term)
		}
	}
	out, errOut, code := cliOf(r.t, program, r.c.operatorEnv(), "holds", "retry", "orders/"+held, "--reason", "rollout", "--api", via.api)
	if code != 0 || !strings.Contains(out, "1 held instance sent back to begin") {
		r.t.Fatalf("holds retry orders/%s through %s: exit %d\n%s%s", held, via.name, code, out, errOut)
	}
	ev := r.waitEvent("hold_decided", held, after)
	if ev.Term != term || !strings.HasSuffix(ev.Actor, "(operator)") {
		r.t.Fatalf("hold_decided of orders/%s by %s in term %d, want an operator in term %d", held, ev.Actor, ev.Term, term)
	}
	if newMaster && ev.Via != via.name {
		r.t.Fatalf("hold_decided of orders/%s recorded via %q, want %s, the node that forwarded it", held, ev.Via, via.name)
	}
	r.note("under %s (term %d): orders/%s held and decided through %s, orders/%s retried", master, term, held, via.name, retried)
}

// retriedAtOnce interrupts an instance of the atomic task (reserve: its
// default policy retries it at once) and checks that master repaired it
// in term, and whether that repair's transaction wrote the instance's
// attempts row (the recorder's attempt_rows): it must while a node of the
// previous release runs, and must not once every node runs this release.
func (r *faultRun) retriedAtOnce(master string, term int64, wantRow bool) {
	r.t.Helper()
	after := r.lastEvent()
	// One without an attempts row in the task (a row it has is kept up
	// to date by every release), and never repaired in it: a first
	// interruption (an instance interrupted again and again, as the
	// killed engines' oldest claims are, exhausts its retries at once
	// and fails).
	id := r.interruptWhere("Reserving", `NOT EXISTS (SELECT 1 FROM enginehealth.attempts a
		WHERE a.workflow = 'orders' AND a.instance = o.id::text AND a.task = 'reserve')
		AND NOT EXISTS (SELECT 1 FROM enginehealth.events e WHERE e.instance = o.id::text AND e.workflow = 'orders'
		AND e.task = 'reserve' AND e.kind = 'instance_repaired')`)
	var ev struct {
		Actor string `db:"actor"`
		Term  int64  `db:"term"`
		Row   bool   `db:"row"`
	}
	eventually(r.t, 60*time.Second, "the retry at once of orders/"+id, func() (bool, error) {
		var es []struct {
			Actor string `db:"actor"`
			Term  int64  `db:"term"`
			Row   bool   `db:"row"`
		}
		err := r.c.db.Select(&es, `SELECT l.actor, l.term, EXISTS (SELECT 1 FROM faults.event_tx x JOIN faults.attempt_rows a ON a.tx = x.tx
				WHERE x.event_id = l.id AND a.instance = l.instance AND a.task = 'reserve') AS row
			FROM enginehealth.event_log l
			WHERE l.id > $1 AND l.kind = 'instance_repaired' AND l.workflow = 'orders' AND l.instance = $2 AND l.to_state = 'Created'
			ORDER BY l.id LIMIT 1`, after, id)
		if err != nil || len(es) == 0 {
			return false, err
		}
		ev = es[0]
		return true, nil
	})
	if ev.Actor != master || ev.Term != term {
		r.t.Fatalf("the retry at once of orders/%s by %s in term %d, want %s in term %d", id, ev.Actor, ev.Term, master, term)
	}
	if ev.Row != wantRow {
		r.t.Fatalf("the retry at once of orders/%s by %s wrote its attempts row: %v, want %v", id, master, ev.Row, wantRow)
	}
	r.note("under %s (term %d): orders/%s retried at once, its attempts row written: %v", master, term, id, ev.Row)
}

// lastEvent is the id of the newest event.
func (r *faultRun) lastEvent() int64 {
	r.t.Helper()
	var id int64
	if err := r.c.db.Get(&id, `SELECT coalesce(max(id), 0) FROM enginehealth.events`); err != nil {
		r.t.Fatal(err)
	}
	return id
}

// interrupt kills the engine that holds a live claim on an instance in
// state (the interim state of a task) and returns that instance, once
// the kill left it there under the dead engine's claim; the engine is
// started again at once.
func (r *faultRun) interrupt(state string) string {
	r.t.Helper()
	return r.interruptWhere(state, "true")
}

// interruptWhere is interrupt, of an instance o (demo.orders) for which
// the SQL condition cond holds.
func (r *faultRun) interruptWhere(state, cond string) string {
	r.t.Helper()
	var id string
	eventually(r.t, 60*time.Second, "an engine killed holding an instance in "+state, func() (bool, error) {
		var claims []struct {
			Node string `db:"node"`
			ID   string `db:"id"`
		}
		// The newest claim: the most of its task left to run.
		if err := r.c.db.Select(&claims, `SELECT c.node, c.instance_id::text AS id FROM demo.orders_claim c
			JOIN demo.orders o ON o.id = c.instance_id WHERE o.status = $1 AND c.expires_at > now() AND `+cond+`
			ORDER BY c.claimed_at DESC LIMIT 1`, state); err != nil || len(claims) == 0 {
			return false, err
		}
		c := claims[0]
		i := slices.IndexFunc(r.engines, func(e *engine) bool { return e.name == c.Node })
		if i < 0 {
			return false, fmt.Errorf("a claim of %s, no engine of the run", c.Node)
		}
		e := r.engines[i]
		e.mu.Lock()
		e.down = true
		_ = e.d.cmd.Process.Signal(syscall.SIGKILL)
		d := e.d
		e.mu.Unlock()
		<-d.done
		r.startEngine(e)
		var left int
		err := r.c.db.Get(&left, `SELECT count(*) FROM demo.orders o JOIN demo.orders_claim c ON c.instance_id = o.id
			WHERE o.id::text = $1 AND o.status = $2 AND c.node = $3`, c.ID, state, c.Node)
		id = c.ID
		return left == 1, err
	})
	r.count("kill an engine in " + state)
	return id
}

// loggedEvent is what waitEvent reads of an event.
type loggedEvent struct {
	// Actor and Term: a run's event's are its run's master and term.
	Actor string `db:"actor"`
	Term  int64  `db:"term"`
	Via   string `db:"via"`
}

// waitEvent waits for the first event of kind about orders/instance
// after event id after, and returns it.
func (r *faultRun) waitEvent(kind, instance string, after int64) loggedEvent {
	r.t.Helper()
	var ev loggedEvent
	eventually(r.t, 60*time.Second, kind+" of orders/"+instance, func() (bool, error) {
		var es []loggedEvent
		err := r.c.db.Select(&es, `SELECT actor, term, coalesce(via, '') AS via FROM enginehealth.event_log
			WHERE id > $1 AND kind = $2 AND workflow = 'orders' AND instance = $3 ORDER BY id LIMIT 1`, after, kind, instance)
		if err != nil || len(es) == 0 {
			return false, err
		}
		ev = es[0]
		return true, nil
	})
	return ev
}

// previousRefused starts the previous release (program) as the killed
// node s, with its configuration, on the schema the new release
// migrated: it must say why it refuses and touch nothing, and exit
// non-zero if it exits (the releases before the one that made this
// refusal exit 2 retried it, logging it each time). Its migrate command
// exits non-zero, saying the same.
func (r *faultRun) previousRefused(s *sidecar, program, incarnation string, oldest, newest int) {
	t := r.t
	t.Helper()
	want := fmt.Sprintf("the database is at schema version %d but this binary knows only up to %d: upgrade enginehealth", newest, oldest)
	var migrations int
	if err := r.c.db.Get(&migrations, `SELECT count(*) FROM enginehealth.schema_migrations`); err != nil {
		t.Fatal(err)
	}
	lastEvent := r.lastEvent()
	cfg, err := os.ReadFile(filepath.Join(r.cfgDir, s.name+".cfg"))
	if err != nil {
		t.Fatal(err)
	}
	r.note("start %s on the previous release, on schema version %d", s.name, newest)
	d := r.c.startProcess(s.name+"-previous", string(cfg), []string{"EH_TOKEN=tok", "ENGINEHEALTH_DSN=" + r.sidecarDSN(s)}, program, "run")
	eventually(t, 60*time.Second, "the previous release refuses the new schema", func() (bool, error) {
		return !d.running() || strings.Count(d.stderr.String(), want) >= 2, nil
	})
	if d.running() {
		t.Logf("the previous release retries its refused migration (it logged %q twice); this release exits 2 instead", want)
		d.signal(t, syscall.SIGTERM)
		d.wait(t, 30*time.Second)
	} else if code := d.cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(d.stderr.String(), want) {
		t.Fatalf("the previous release on the new schema exited %d without saying %q:\n%s", code, want, d.stderr.String())
	}
	n, err := r.c.node(s.name)
	if err != nil || n.Incarnation != incarnation {
		t.Fatalf("the refused binary changed %s's record: %+v %v", s.name, n, err)
	}
	var after int
	if err := r.c.db.Get(&after, `SELECT count(*) FROM enginehealth.schema_migrations`); err != nil || after != migrations {
		t.Fatalf("the refused binary changed the migrations: %d rows, were %d (%v)", after, migrations, err)
	}
	var own int
	if err := r.c.db.Get(&own, `SELECT count(*) FROM enginehealth.events WHERE id > $1 AND (actor = $2 OR kind = 'node_registered' AND node = $2)`,
		lastEvent, s.name); err != nil || own != 0 {
		t.Fatalf("the refused binary wrote %d events (%v)", own, err)
	}
	path := filepath.Join(r.cfgDir, s.name+"-previous.yaml")
	_, errOut, code := cliOf(t, program, []string{"EH_TOKEN=tok", "ENGINEHEALTH_DSN=" + r.sidecarDSN(s)}, "migrate", "--config", path)
	if code == 0 || !strings.Contains(errOut, want) {
		t.Fatalf("the previous release's migrate on the new schema: exit %d, want non-zero saying %q:\n%s", code, want, errOut)
	}
	r.count("previous release on the new schema (refused)")
}

// verdict runs the fault suite's checker over the record and fails the
// test on any violation, its own or the run's.
func (r *faultRun) verdict(took time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "rolling upgrade in %s, %d sidecars, 3 etcd members\n", took.Round(time.Second), len(r.sidecars))
	for _, k := range slices.Sorted(maps.Keys(r.injected)) {
		fmt.Fprintf(&b, "%-45s %3d  to master %s, to repair %s\n", k, r.injected[k], percentiles(r.toMaster[k]), percentiles(r.toRepair[k]))
	}
	fmt.Fprintf(&b, "acting master asked %d times (every 50 ms, all nodes at once): two acted at once %d times; terms that acted: %d\n",
		r.acting.samples, len(r.acting.twoActing), len(r.acting.terms))
	violations, count := slices.Clone(r.violations), len(r.violations)
	for _, c := range r.check() {
		fmt.Fprintf(&b, "check %-40s %s\n", c.name, c.summary())
		violations = append(violations, c.violations...)
		count += c.found
	}
	for _, v := range violations {
		fmt.Fprintf(&b, "VIOLATION %s\n", v)
	}
	fmt.Fprintf(&b, "violations: %d\n", count)
	r.t.Log("\n" + b.String())
	if dir := r.t.ArtifactDir(); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "upgrade-report.txt"), []byte(b.String()), 0o644)
	}
	if count > 0 {
		r.t.Errorf("%d violations", count)
	}
}

// TestNewerSchemaRefused: on a database a newer release migrated (a
// migration this binary does not know is recorded), the daemon says why
// and exits 2 (which the unit does not restart) before it registers or
// writes anything; migrate says the same and exits non-zero. The
// releases before this one retried the refused migration for good
// (TestRollingUpgrade starts one so).
func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	cfg := c.config("node-a", "")
	path := filepath.Join(c.dir, "migrate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"ENGINEHEALTH_DSN=" + c.dsn}
	if out, errOut, code := cli(t, env, "migrate", "--config", path); code != 0 {
		t.Fatalf("migrate: exit %d: %s%s", code, out, errOut)
	}
	ms, err := pgdb.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	newest := ms[len(ms)-1].Version
	c.db.MustExec(`INSERT INTO enginehealth.schema_migrations (version, name) VALUES ($1, $2)`,
		newest+1, fmt.Sprintf("%04d_of_a_newer_release.sql", newest+1))
	want := fmt.Sprintf("the database is at schema version %d but this binary knows only up to %d: upgrade enginehealth", newest+1, newest)

	d := c.start("node-a", cfg)
	if code := d.wait(t, 60*time.Second); code != 2 || !strings.Contains(d.stderr.String(), want) {
		t.Fatalf("run on a newer schema: exit %d, want 2 saying %q:\n%s", code, want, d.stderr.String())
	}
	if strings.Contains(d.stderr.String(), "migrate failed, retrying") {
		t.Fatalf("the refused migration was retried:\n%s", d.stderr.String())
	}
	if _, err := c.node("node-a"); err == nil {
		t.Fatal("the refused daemon registered")
	}
	var events int
	if err := c.db.Get(&events, `SELECT count(*) FROM enginehealth.events`); err != nil || events != 0 {
		t.Fatalf("the refused daemon wrote %d events (%v)", events, err)
	}
	_, errOut, code := cli(t, env, "migrate", "--config", path)
	if code == 0 || !strings.Contains(errOut, want) {
		t.Fatalf("migrate on a newer schema: exit %d, want non-zero saying %q: %s", code, want, errOut)
	}
}
