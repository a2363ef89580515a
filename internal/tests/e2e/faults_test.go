package e2e

// The fault-injection suite: a real cluster on one machine (a 3-member
// etcd cluster of separate processes, its own PostgreSQL primary and streaming standby, five
// `enginehealth run` processes behind TCP proxies, five demo engines under
// load with retry policies of every delay kind, holds and poison
// instances), faults injected on a seeded random schedule, and a checker of
// the invariants over what the database recorded (checker_test.go).
//
// go test ./internal/tests/e2e -run TestFaults            the short run (in make test)
// EH_FAULTS=300 EH_FAULT_SEED=7 go test … -run TestFaults  make faults
// EH_FAULT_STARVE=busy                                      CPU starvation (off, pauses, busy)
// EH_FAULT_UNSAFE=confirm                                   a faultinject build with mechanisms off
// EH_FAULT_TLS=1                                            the TLS-everywhere cluster (newTLSCluster)
// EH_FAULT_SIDECARS=3                                       how many sidecars (default 5)
// EH_FAULT_KINDS=pg-failover,kill-master                    only these kinds, drawn evenly
// EH_FAULT_DURATION=2h                                      a soak: faults until then (make soak)
// EH_FAULT_SPARE=1                                          the last k sidecars spared from process
//                                                           faults (default 0; make soak: 1), their
//                                                           footprint reported (footprintReport)

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/testkit/etcdtest"
	"github.com/enginehealth/enginehealth/internal/testkit/faultproxy"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
	"github.com/enginehealth/enginehealth/nodes"
)

// faultTasks are the fault run's workflow: four tasks on demo.orders
// with every delay kind, holds and on_failure retries.
const faultTasks = `workflows:
  - name: orders
    table: demo.orders
    id_column: id
    status_column: status
    error_column: last_error
    updated_column: updated_at
    claimable: true
    claims: {table: demo.orders_claim}
    tasks:
      - name: reserve
        begin: Created
        interim: Reserving
        end: Reserved
        failed: ReserveFailed
        atomic_internal: true
        claim_timeout: 2s
      - name: ship
        begin: Reserved
        interim: Shipping
        end: Shipped
        failed: ShipFailed
        claim_timeout: 2s
        on_interrupt: {strategy: retry, max_attempts: 3, backoff: {kind: exponential, base: 500ms, max_delay: 5s}}
        on_failure: {strategy: retry, max_attempts: 2, backoff: {kind: fibonacci, base: 500ms}}
      - name: bill
        begin: Shipped
        interim: Billing
        end: Billed
        failed: BillFailed
        claim_timeout: 2s
        on_interrupt: {strategy: retry, max_attempts: 3, backoff: {kind: linear, base: 300ms}}
        on_failure: {strategy: retry, max_attempts: 2, backoff: {kind: randomized_exponential, base: 300ms}}
      - name: deliver
        begin: Billed
        interim: Delivering
        end: Delivered
        failed: DeliverFailed
        claim_timeout: 2s
        on_interrupt: {strategy: hold}
        on_failure: {strategy: retry, backoff: {kind: schedule, schedule: [500ms, 1s]}}
`

// faultTask is what the checker knows of a task.
type faultTask struct {
	name, begin, interim, failed string
	ends                         []string
	// maxAttempts: the most retries either policy allows.
	maxAttempts int
}

var faultTaskList = []faultTask{
	{"reserve", "Created", "Reserving", "ReserveFailed", []string{"Reserved"}, 10},
	{"ship", "Reserved", "Shipping", "ShipFailed", []string{"Shipped"}, 3},
	{"bill", "Shipped", "Billing", "BillFailed", []string{"Billed"}, 3},
	{"deliver", "Billed", "Delivering", "DeliverFailed", []string{"Delivered"}, 2},
}

// poisonIDs crash every engine that claims them.
const poisonIDs = "7,8"

// noAutoSync is the etcd line of a fault run's sidecars.
const noAutoSync = "  auto_sync_interval: 0s\n"

// defaultSidecars is how many sidecars a fault run has unless its
// options or EH_FAULT_SIDECARS say otherwise.
const defaultSidecars = 5

// sidecar is one enginehealth node of the fault run: its process (the
// current incarnation) and the proxies between it and etcd and
// PostgreSQL.
type sidecar struct {
	name   string
	listen string // its API address, kept across restarts
	api    string // the CLI's --api for it: https:// under TLS
	etcd   []*faultproxy.Proxy
	db     *faultproxy.Proxy
	// bin: the binary its next start runs (default the run's): the
	// rolling-upgrade test moves each sidecar from the previous release's
	// to the one under test.
	bin string

	mu sync.Mutex
	d  *daemon
	// signalled: the test signalled or stopped this incarnation, so its
	// exit is expected; frozen: SIGSTOPped.
	signalled, frozen bool
	// spared: no fault signals or freezes its process (faultOpts.spare).
	spared bool
}

// engine is one demo-engine process, restarted whenever it exits (as a
// supervisor would): a database fault ends it.
type engine struct {
	name     string
	mu       sync.Mutex
	d        *daemon
	down     bool // killed or stopped by the test, not to be restarted yet
	restarts int
}

// faultRun is one run of the suite.
type faultRun struct {
	t *testing.T
	c *cluster
	// pg is the PostgreSQL primary (a failover fault replaces it with its
	// standby), standby its streaming replica (asynchronous). vip is the
	// address of the primary everyone uses (the suite, the engines, the
	// sidecars through their proxies), moved to the new primary as a
	// failover manager moves a virtual IP; the standby replicates through
	// repl (cut to make it lag) to the primary's address replFrom.
	pg, standby   *pgtest.Server
	vip, replFrom *faultproxy.Switch
	repl          *faultproxy.Proxy
	etcd          *etcdtest.Cluster
	// members: the address of each etcd member (by index in
	// etcd.Members), moved to the new member when one is replaced, as a
	// DNS name of a member host would be; the sidecars' proxies to etcd
	// go to them.
	members []*faultproxy.Switch
	// membersMu: held while etcd.Members changes (the pauser reads it).
	membersMu sync.Mutex
	// The seed fixes the schedule: kinds draws the kinds, and each fault
	// draws its targets (rnd) and hold times (holds) from generators of
	// its own (beginFault), so that how one fault went (who was master,
	// how many acks it took) changes nothing of the next ones.
	kinds, rnd, holds *rand.Rand
	seed              uint64
	cfgDir            string

	sidecars []*sidecar
	engines  []*engine

	mu         sync.Mutex
	violations []string
	// injected counts faults by kind; recovery: per kind, the times to
	// an acting master and to repair.
	injected map[string]int
	toMaster map[string][]time.Duration
	toRepair map[string][]time.Duration
	opCodes  map[string]int // operator request → exit code counts
	// starveMode of the run, and the pauses it made, per process.
	starveMode string
	pauses     map[string]int
	stop       chan struct{}
	stopped    chan struct{}
	opts       faultOpts
	probe      *actingProbe
	// leases watches the election keys; incarnations: every sidecar
	// process the run started, for their logs.
	leases       *leaseWatch
	incarnations []*daemon
	acting       report // the probe's, once the run stopped
	// toHeartbeat: per failover kind, the time from the new primary
	// accepting writes to every node's heartbeat landing on it; lost:
	// lagging promotions whose standby was behind the primary it
	// replaced (bytes of WAL it had not received).
	toHeartbeat map[string][]time.Duration
	lost        []int64
	faultStart  time.Time // when the current fault began
	// footprints: each sidecar incarnation's first and last samples of
	// its resident memory and goroutines (sampleFootprints).
	footprints map[*daemon]*footprint
	// substituted: per kind, faults on a spared master's process that
	// hit the next master after moveOffice; skipped: those that found
	// none.
	substituted, skipped map[string]int
	// masterKills counts the kill-master faults; releaseLogs holds what
	// release-lease logged after those it followed.
	masterKills int
	releaseLogs []string
}

// killMasterReleased is how the report names a kill-master fault followed
// by release-lease (half of them): its times beside kill-master's.
const killMasterReleased = "kill-master+release"

// note logs what the run does, with the wall-clock time to the
// millisecond, so that the schedule can be read beside the daemons' and
// the etcd members' logs.
func (r *faultRun) note(format string, args ...any) {
	r.t.Helper()
	r.t.Logf("%s "+format, append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

func (r *faultRun) violation(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

// TestFaults injects faults on a seeded schedule into a real cluster
// under load, then checks every invariant over the record (checker).
func TestFaults(t *testing.T) {
	t.Parallel()
	n := 40
	if v := os.Getenv("EH_FAULTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("EH_FAULTS=%q: want a positive number of faults", v)
		}
	}
	seed := uint64(1)
	if v := os.Getenv("EH_FAULT_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("EH_FAULT_SEED=%q: %v", v, err)
		}
	}
	starve := cmp.Or(os.Getenv("EH_FAULT_STARVE"), starvePauses)
	if !slices.Contains([]string{starveOff, starvePauses, starveBusy}, starve) {
		t.Fatalf("EH_FAULT_STARVE=%q: want %s, %s or %s", starve, starveOff, starvePauses, starveBusy)
	}
	var opts faultOpts
	if v := os.Getenv("EH_FAULT_UNSAFE"); v != "" {
		// An investigation: the run with mechanisms turned off (the
		// faultinject build), e.g. to see what one prevents.
		opts = faultOpts{bin: unsafeBinary(t), unsafe: v}
	}
	switch v := os.Getenv("EH_FAULT_TLS"); v {
	case "", "0":
	case "1":
		opts.tls = true
	default:
		t.Fatalf("EH_FAULT_TLS=%q: want 1 (TLS everywhere) or 0", v)
	}
	// Sidecars spared from process faults (bounded in startFaultRun,
	// which knows how many sidecars there are).
	if v := os.Getenv("EH_FAULT_SPARE"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 0 {
			t.Fatalf("EH_FAULT_SPARE=%q: want a number of sidecars to spare from process faults (0 or more)", v)
		}
		opts.spare = k
	}
	// A soak (make soak): faults until the duration has passed, at most
	// EH_FAULTS of them when set.
	var soak time.Duration
	if v := os.Getenv("EH_FAULT_DURATION"); v != "" {
		var err error
		if soak, err = time.ParseDuration(v); err != nil || soak <= 0 {
			t.Fatalf("EH_FAULT_DURATION=%q: want a positive duration such as 2h", v)
		}
		if os.Getenv("EH_FAULTS") == "" {
			n = math.MaxInt
		}
	}
	var only []string
	if v := os.Getenv("EH_FAULT_KINDS"); v != "" {
		for _, k := range strings.Split(v, ",") {
			if !slices.ContainsFunc(faultKinds, func(f faultKind) bool { return f.name == k }) {
				t.Fatalf("EH_FAULT_KINDS=%q: no fault kind %q", v, k)
			}
			only = append(only, k)
		}
	}
	r := startFaultRun(t, seed, opts)
	stopSampling := r.sampleFootprints(cmp.Or(soak/120, 10*time.Second))
	calm := r.starve(starve)
	start := time.Now()
	order := r.kinds.Perm(len(faultKinds))
	total := strconv.Itoa(n)
	if soak > 0 {
		total = "until " + start.Add(soak).Format("15:04:05")
	}
	for i := 0; i < n && (soak == 0 || time.Since(start) < soak); i++ {
		// Every kind once first (in a seeded order), so that the short
		// run covers them all; then by weight.
		kind := r.pick()
		switch {
		case only != nil:
			kind = only[r.kinds.IntN(len(only))]
		case i < len(order):
			kind = faultKinds[order[i]].name
		}
		r.beginFault(i)
		r.note("fault %d/%s: %s", i+1, total, kind)
		r.inject(kind)
	}
	injecting := time.Since(start)
	calm()
	r.healAll()
	r.finalPass()
	close(r.stop)
	<-r.stopped
	r.probe.finish()
	acting := r.probe.report(time.Time{}, time.Now())
	for _, two := range acting.twoActing {
		r.violation("two nodes acted as master at once: %s", two)
	}
	r.acting = acting
	stopSampling()
	r.readOnlyNotAnError()
	checks := r.check()
	r.report(injecting, checks)
}

// Starvation modes of a fault run (EH_FAULT_STARVE; the short run in
// make test: pauses). A busy host is late for every deadline: a process
// that gets no CPU for a while looks, to the others, like a frozen one,
// and then acts on what it knew before.
const (
	starveOff = "off"
	// starvePauses: while faults run, a sidecar or an etcd member, drawn
	// at random, is paused (SIGSTOP) for 100–500 ms every 0.5–2 s.
	starvePauses = "pauses"
	// starveBusy: the pauses, and busy loops that keep every core busy
	// (one more loop than cores), as on a host busy with other work.
	starveBusy = "busy"
)

// starve starts the starvation of mode and returns the function that ends
// it (before the faults are healed and the record checked).
func (r *faultRun) starve(mode string) (calm func()) {
	r.starveMode = mode
	if mode == starveOff {
		return func() {}
	}
	var loops []*exec.Cmd
	if mode == starveBusy {
		for range runtime.NumCPU() + 1 {
			cmd := exec.Command("sh", "-c", "while :; do :; done")
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := cmd.Start(); err != nil {
				r.t.Fatalf("busy loop: %v", err)
			}
			loops = append(loops, cmd)
		}
		r.note("starvation: %d busy loops on %d cores", len(loops), runtime.NumCPU())
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go r.pauser(stop, done)
	return func() {
		close(stop)
		<-done
		for _, cmd := range loops {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
}

// pauser pauses a sidecar or an etcd member, drawn at random, for
// 100–500 ms every 0.5–2 s, until stop is closed. A process that a fault
// froze, killed or signalled is left alone, and a spared sidecar is never
// drawn.
func (r *faultRun) pauser(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	rnd := rand.New(rand.NewPCG(r.seed, 0x5747e))
	sidecars := slices.DeleteFunc(slices.Clone(r.sidecars), func(s *sidecar) bool { return s.spared })
	for {
		wait := 500*time.Millisecond + time.Duration(rnd.Int64N(int64(1500*time.Millisecond)))
		select {
		case <-stop:
			return
		case <-time.After(wait):
		}
		d := 100*time.Millisecond + time.Duration(rnd.Int64N(int64(400*time.Millisecond)))
		r.membersMu.Lock()
		members := slices.Clone(r.etcd.Members)
		r.membersMu.Unlock()
		i := rnd.IntN(len(sidecars) + len(members))
		if i < len(sidecars) {
			if s := sidecars[i]; r.pause(s, d) {
				r.countPause("sidecar " + s.name)
			}
		} else if m := members[i-len(sidecars)]; m.Pause(d) {
			r.countPause("etcd member " + m.Name)
		}
	}
}

// pause stops sidecar s for d (SIGSTOP, then SIGCONT), unless a fault
// has it frozen, killed or signalled, or it is spared; it reports whether
// it did.
func (r *faultRun) pause(s *sidecar, d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen || s.signalled || s.spared || !s.d.running() {
		return false
	}
	if s.d.cmd.Process.Signal(syscall.SIGSTOP) != nil {
		return false
	}
	<-time.After(d)
	_ = s.d.cmd.Process.Signal(syscall.SIGCONT)
	return true
}

func (r *faultRun) countPause(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pauses[what]++
}

// faultOpts vary a fault run: the biting tests run an unsafe build with
// a mechanism turned off, and choose when passes run.
type faultOpts struct {
	// bin: the sidecar binary (default the one under test); unsafe: its
	// EH_UNSAFE.
	bin, unsafe string
	// schedule of the check (default @every 1s).
	schedule string
	// sidecars: how many (default EH_FAULT_SIDECARS, else
	// defaultSidecars), each with its demo engine.
	sidecars int
	// previous: bin is a previous release, which may not know this
	// one's configuration keys; prevAutoSync: it knows
	// etcd.auto_sync_interval.
	previous, prevAutoSync bool
	// tls: the cluster runs with TLS everywhere (newTLSCluster): etcd
	// with client certificates and auth, PostgreSQL with verify-full,
	// the API with client_auth require and named operators.
	tls bool
	// spare: how many sidecars, the last ones, no fault signals or
	// freezes (EH_FAULT_SPARE): their one process lives the whole run,
	// for its footprint (footprintReport). Network, etcd and PostgreSQL
	// faults still hit them.
	spare int
}

func startFaultRun(t *testing.T, seed uint64, opts ...faultOpts) *faultRun {
	var o faultOpts
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.sidecars == 0 {
		o.sidecars = defaultSidecars
		if v := os.Getenv("EH_FAULT_SIDECARS"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 3 || n > 26 {
				t.Fatalf("EH_FAULT_SIDECARS=%q: want 3 to 26 sidecars", v)
			}
			o.sidecars = n
		}
	}
	// At least three sidecars take process faults: a fault on "another"
	// sidecar than the master needs two, and a spared master hands its
	// office to one of them (moveOffice).
	if o.spare < 0 || o.spare > o.sidecars-3 {
		t.Fatalf("EH_FAULT_SPARE=%d: want 0 to %d spared sidecars of %d (at least 3 take process faults)", o.spare, max(o.sidecars-3, 0), o.sidecars)
	}
	var c *cluster
	var pgs *pgtest.Server
	var ec *etcdtest.Cluster
	if o.tls {
		c = newTLSCluster(t)
		pgs, ec = c.tls.pg, c.tls.etcd
	} else {
		var err error
		if pgs, err = pgtest.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pgs.Close)
		c = newClusterOn(t, pgs.NewDatabase(t))
		ec = startEtcdCluster(t)
	}
	c.logDir = t.ArtifactDir()
	// Everyone reaches PostgreSQL through an address a failover moves.
	vip, replFrom := faultproxy.NewSwitch(t, pgs.Addr()), faultproxy.NewSwitch(t, pgs.Addr())
	c.useDSN(t, withPort(t, c.dsn, vip.Addr))
	r := &faultRun{t: t, c: c, pg: pgs, vip: vip, replFrom: replFrom, repl: faultproxy.New(t, replFrom.Addr), etcd: ec, toHeartbeat: map[string][]time.Duration{}, seed: seed, kinds: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		cfgDir: c.dir, injected: map[string]int{}, toMaster: map[string][]time.Duration{}, toRepair: map[string][]time.Duration{},
		opCodes: map[string]int{}, pauses: map[string]int{}, substituted: map[string]int{}, skipped: map[string]int{}, starveMode: starveOff, stop: make(chan struct{}), stopped: make(chan struct{}), opts: o}
	r.beginFault(0)

	// The sidecars reach etcd through proxies, which the faults cut: they
	// keep their endpoints (no auto-sync to the members' own addresses;
	// a previous release from before auto-sync has no key for it:
	// startSidecar adds it for this one).
	etcdLines := noAutoSync
	if o.previous && !o.prevAutoSync {
		etcdLines = ""
	}
	base := func(name string, eps []string, listen string) string {
		return c.configWith(name, cfgOpts{Endpoints: eps, Schedule: cmp.Or(o.schedule, "@every 1s"), TokenEnv: "EH_TOKEN", Listen: listen,
			Heartbeat: 300 * time.Millisecond, Extra: faultTasks, Etcd: etcdLines})
	}
	r.leases = startLeaseWatch(t, r.etcd.ClientConfig(), electionPrefix(t))
	c.seed(base("seed", r.etcd.Endpoints(), ""), 100, "EH_TOKEN=tok")
	migrate := filepath.Join(c.dir, "migrate.yaml")
	// The migration is the harness's, not under test: the harness's
	// connect timeout, not the daemons' 1 s.
	migrateCfg := strings.Replace(base("migrate", r.etcd.Endpoints(), ""), "connect_timeout: 1s", "connect_timeout: "+harnessConnectTimeout.String(), 1)
	if err := os.WriteFile(migrate, []byte(migrateCfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// Migrated by the sidecars' own binary (the previous release's, in
	// the rolling-upgrade test).
	if out, errOut, code := cliOf(t, cmp.Or(o.bin, bin), []string{"ENGINEHEALTH_DSN=" + c.dsn, "EH_TOKEN=tok"}, "migrate", "--config", migrate); code != 0 {
		t.Fatalf("migrate: exit %d: %s%s", code, out, errOut)
	}
	installRecorder(t, c)
	r.startStandby()

	// configure gives s an API port (free when asked) and writes its
	// configuration.
	configure := func(s *sidecar, eps []string) {
		port, err := pgtest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		s.listen = fmt.Sprintf("127.0.0.1:%d", port)
		s.api = c.apiURL(s.listen)
		if err := os.WriteFile(filepath.Join(c.dir, s.name+".cfg"), []byte(base(s.name, eps, s.listen)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	etcdEps := map[*sidecar][]string{}
	for i := range o.sidecars {
		s := &sidecar{name: fmt.Sprintf("node-%c", 'a'+i), spared: i >= o.sidecars-o.spare}
		for _, m := range r.etcd.Members {
			p := faultproxy.New(t, r.memberAddr(m).Addr)
			s.etcd = append(s.etcd, p)
			etcdEps[s] = append(etcdEps[s], p.Addr)
		}
		s.db = faultproxy.New(t, r.vip.Addr)
		configure(s, etcdEps[s])
		r.sidecars = append(r.sidecars, s)
		r.startSidecar(s)
	}
	addrs := map[string]string{}
	for _, s := range r.sidecars {
		// The port was free when asked; another process may have taken
		// it since (a busy host starts many): then another one.
		for range 3 {
			eventually(t, 60*time.Second, s.name+" registered or exited", func() (bool, error) {
				_, err := c.node(s.name)
				return err == nil || !s.d.running(), nil
			})
			if s.d.running() || !strings.Contains(s.d.stderr.String(), "address already in use") {
				break
			}
			t.Logf("%s: its API port %s was taken meanwhile: another", s.name, s.listen)
			configure(s, etcdEps[s])
			r.startSidecar(s)
		}
		waitNodeStatus(t, c, s.name, nodes.StatusReady)
		addrs[s.name] = s.listen
	}
	if o.spare > 0 {
		var spared []string
		for _, s := range r.sidecars {
			if s.spared {
				spared = append(spared, s.name)
			}
		}
		r.note("spared from process faults (EH_FAULT_SPARE=%d): %s", o.spare, strings.Join(spared, ", "))
	}
	// Every 50 ms, which nodes act: never two at once.
	r.probe = c.startActingProbe(t, addrs)
	for _, s := range r.sidecars {
		e := &engine{name: s.name}
		r.engines = append(r.engines, e)
		r.startEngine(e)
	}
	go r.supervise()
	go r.feed()
	return r
}

// feed keeps the engines under load: 5 new orders a second (their
// capacity is about 10), until the run stops.
func (r *faultRun) feed() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
			// Errors are the faults' (PostgreSQL down): the next tick
			// feeds again.
			_, _ = r.c.db.Exec(`INSERT INTO demo.orders (status) SELECT 'Created' FROM generate_series(1, 5)`)
		}
	}
}

// sidecarDSN is the DSN a sidecar uses: through its proxy.
func (r *faultRun) sidecarDSN(s *sidecar) string { return withPort(r.t, r.c.dsn, s.db.Addr) }

// withPort returns dsn (a URL) with the port of addr: the same host
// name, which verify-full checks.
func withPort(t testing.TB, dsn, addr string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	u.Host = net.JoinHostPort(u.Hostname(), port)
	return u.String()
}

func (r *faultRun) startSidecar(s *sidecar) {
	cfg, err := os.ReadFile(filepath.Join(r.cfgDir, s.name+".cfg"))
	if err != nil {
		r.t.Fatal(err)
	}
	s.mu.Lock()
	program := cmp.Or(s.bin, r.opts.bin, bin)
	s.mu.Unlock()
	if r.opts.previous && !r.opts.prevAutoSync && program == bin {
		cfg = []byte(strings.Replace(string(cfg), "\netcd:\n", "\netcd:\n"+noAutoSync, 1))
	}
	d := r.c.startProcess(s.name, string(cfg), []string{"EH_TOKEN=tok", "ENGINEHEALTH_DSN=" + r.sidecarDSN(s), "EH_UNSAFE=" + r.opts.unsafe},
		program, "run")
	s.mu.Lock()
	s.d, s.signalled, s.frozen = d, false, false
	s.mu.Unlock()
	r.mu.Lock()
	r.incarnations = append(r.incarnations, d)
	r.mu.Unlock()
}

func (r *faultRun) startEngine(e *engine) {
	cfg := r.c.configWith(e.name, cfgOpts{Extra: faultTasks})
	dsn := r.c.dsn + "&application_name=engine/" + e.name
	d := r.c.startProcess("engine-"+e.name, cfg, []string{"ENGINEHEALTH_DSN=" + dsn}, engineBin,
		"run", "--node", e.name, "--workers", "2", "--task-duration", "150ms", "--failure-rate", "0.1", "--poison", poisonIDs)
	e.mu.Lock()
	e.d, e.down = d, false
	e.mu.Unlock()
}

// supervise restarts engines that exited (a database fault ends them),
// and records a sidecar that exited without being signalled.
func (r *faultRun) supervise() {
	defer close(r.stopped)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
		for _, e := range r.engines {
			e.mu.Lock()
			exited := !e.down && !e.d.running()
			if exited {
				e.restarts++
				r.t.Logf("engine %s exited (%v): %s", e.name, e.d.err, lastLine(e.d.stderr.String()))
				if out := e.d.stderr.String(); strings.Contains(out, "left the interim state under a live claim") {
					r.violation("engine %s: an instance left its interim state under the engine's live claim: %s", e.name, lastLine(out))
				}
			}
			e.mu.Unlock()
			if exited {
				r.startEngine(e)
			}
		}
		for _, s := range r.sidecars {
			s.mu.Lock()
			exited := !s.signalled && !s.d.running()
			s.mu.Unlock()
			if exited {
				r.violation("sidecar %s exited on its own (%v): %s", s.name, s.d.err, lastLine(s.d.stderr.String()))
				r.startSidecar(s)
			}
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// faultKind: a kind of fault and its weight in the schedule.
type faultKind struct {
	name   string
	weight int
}

// faultKinds, with their weights in the schedule.
var faultKinds = []faultKind{
	{"kill-master", 3}, {"kill-sidecar", 2}, {"term-master", 2}, {"term-sidecar", 1}, {"stop-master", 2}, {"stop-sidecar", 1},
	{"kill-engine", 3}, {"stop-engine", 2},
	{"etcd-stop-leader", 2}, {"etcd-stop-follower", 1}, {"etcd-kill-leader", 1}, {"etcd-kill-follower", 1}, {"etcd-quorum-loss", 1},
	{"etcd-stop-masters-member", 2}, {"etcd-kill-masters-member", 1},
	{"cut-master-etcd", 2}, {"cut-sidecar-etcd", 1}, {"cut-master-db", 2}, {"cut-sidecar-db", 1}, {"cut-most-db", 1},
	{"pg-restart", 1}, {"pg-stop", 1},
	{"pg-failover", 1}, {"pg-failover-early", 1}, {"pg-failover-lagging", 1},
	{"etcd-replace-member", 1},
	{"operator-storm", 3},
}

// beginFault gives fault i its own generators, from the seed.
func (r *faultRun) beginFault(i int) {
	if i < 0 {
		panic("beginFault: a negative fault number")
	}
	r.rnd = rand.New(rand.NewPCG(r.seed, uint64(2*i+1)))
	r.holds = rand.New(rand.NewPCG(r.seed, uint64(2*i+2)))
}

// pick draws the next fault kind from the seeded schedule.
func (r *faultRun) pick() string {
	total := 0
	for _, k := range faultKinds {
		total += k.weight
	}
	n := r.kinds.IntN(total)
	for _, k := range faultKinds {
		if n < k.weight {
			return k.name
		}
		n -= k.weight
	}
	panic("unreachable")
}

// hold is how long a fault lasts: between lo and hi, from the schedule.
func (r *faultRun) hold(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.holds.Int64N(int64(hi-lo)+1))
}

// pause waits d (a fault's duration, not a condition).
func pause(d time.Duration) { <-time.After(d) }

// master returns the sidecar acting as master in the acting probe's latest
// sample (nil when none acts).
func (r *faultRun) master() *sidecar {
	name, _, ok := r.probe.acting()
	if !ok {
		return nil
	}
	return r.sidecar(name)
}

// sidecar returns the sidecar named name.
func (r *faultRun) sidecar(name string) *sidecar {
	return r.sidecars[slices.IndexFunc(r.sidecars, func(s *sidecar) bool { return s.name == name })]
}

// target is the sidecar a fault of kind hits: the master m for a
// "-master" kind (inject has moved the office off a spared master before
// a fault on its process), else another one; never a spared one for a
// fault on the process (kill, SIGTERM, SIGSTOP).
func (r *faultRun) target(kind string, m *sidecar) *sidecar {
	if strings.Contains(kind, "master") {
		return m
	}
	if onProcess(kind) {
		return r.otherUnspared(m)
	}
	return r.other(m)
}

// onProcess: a fault of kind signals or freezes the process of the
// sidecar it targets (a spared sidecar's is never).
func onProcess(kind string) bool {
	return strings.HasPrefix(kind, "kill-") || strings.HasPrefix(kind, "term-") || strings.HasPrefix(kind, "stop-") ||
		kind == "pg-failover-lagging" // the SIGTERM of the master
}

// other returns a sidecar other than s, from the schedule.
func (r *faultRun) other(s *sidecar) *sidecar {
	for {
		o := r.sidecars[r.rnd.IntN(len(r.sidecars))]
		if o != s {
			return o
		}
	}
}

// otherUnspared returns a sidecar other than s and not spared, from the
// schedule (the same draws as other's when none is spared).
func (r *faultRun) otherUnspared(s *sidecar) *sidecar {
	for {
		o := r.sidecars[r.rnd.IntN(len(r.sidecars))]
		if o != s && !o.spared {
			return o
		}
	}
}

// moveOffice moves the office off the spared master m without touching
// its process, so that a fault on the master's process (kind) can hit the
// next one: every spared sidecar is cut from etcd, as cut-master-etcd
// cuts the master, until one that is not spared acts as master (60 s at
// most), then restored; the spared ones' new candidacies queue behind it.
// It returns the new master, nil when none acted (the fault is skipped).
func (r *faultRun) moveOffice(kind string, m *sidecar) *sidecar {
	var spared []*sidecar
	for _, s := range r.sidecars {
		if s.spared {
			spared = append(spared, s)
			for _, p := range s.etcd {
				r.check1(p.Blackhole())
			}
		}
	}
	r.note("  %s is master and spared: cut the spared sidecars from etcd until another acts, then %s on it", m.name, kind)
	start := time.Now()
	var to *sidecar
	for deadline := start.Add(60 * time.Second); to == nil && time.Now().Before(deadline); pause(50 * time.Millisecond) {
		if name, ok := r.probe.actingAfter(start); ok && !r.sidecar(name).spared {
			to = r.sidecar(name)
		}
	}
	for _, s := range spared {
		for _, p := range s.etcd {
			r.check1(p.Restore())
		}
	}
	if to == nil {
		r.note("  no other master acted within 60 s: restored them to etcd, %s on the master skipped", kind)
		r.mu.Lock()
		r.skipped[kind]++
		r.mu.Unlock()
		return nil
	}
	r.note("  %s acts after %s: restored the spared sidecars to etcd", to.name, time.Since(start).Round(time.Millisecond))
	r.mu.Lock()
	r.substituted[kind]++
	r.mu.Unlock()
	return to
}

// inject applies one fault, holds it, heals it, and measures the time to
// an acting master and to repair.
func (r *faultRun) inject(kind string) {
	t := r.t
	r.faultStart = time.Now()
	m := r.master()
	acting := m != nil
	if m == nil {
		m = r.sidecars[r.rnd.IntN(len(r.sidecars))]
	}
	if m.spared && onProcess(kind) && strings.HasSuffix(kind, "-master") {
		// A spared master's process is not to be touched: the office
		// moves off it first, and the fault hits the next master; with
		// none acting, another sidecar stands for it, as m did.
		if !acting {
			m = r.otherUnspared(m)
		} else if m = r.moveOffice(kind, m); m == nil {
			return
		}
	}
	// healed: when the fault ended; recovery times are measured from it,
	// or, for a kill or a SIGTERM, from the signal, while the node is
	// restarted, and for another fault on the master, from its start
	// (recovered).
	healed := time.Now()
	var recovered func() (time.Duration, time.Duration)
	if strings.Contains(kind, "-master") && !strings.HasPrefix(kind, "kill-") && !strings.HasPrefix(kind, "term-") {
		// A fault on the master (or its etcd member) may fail it over
		// while it lasts: timed from its start.
		recovered = r.recoveryFrom(time.Now())
	}
	switch kind {
	case "kill-master", "kill-sidecar":
		s := r.target(kind, m)
		old := r.incarnation(s)
		// Every other kill of the master (the first, the third…) is
		// followed by what systemd runs once the process is gone, the
		// unit's ExecStopPost= (release-lease), and reported apart
		// (killMasterReleased); the others wait for the lease's TTL.
		release := false
		if kind == "kill-master" {
			r.masterKills++
			release = r.masterKills%2 == 1
		}
		r.note("  SIGKILL %s", s.name)
		r.signal(s, syscall.SIGKILL)
		recovered = r.recoveryFrom(time.Now())
		<-s.d.done
		if release {
			kind = killMasterReleased
			_, errOut, code := runReleaseLease(r.t, s.d)
			r.note("  release-lease for %s: exit %d", s.name, code)
			r.mu.Lock()
			r.releaseLogs = append(r.releaseLogs, errOut)
			r.mu.Unlock()
			if code != 0 {
				r.violation("release-lease for %s after its SIGKILL: exit %d: %s", s.name, code, lastLine(errOut))
			}
		}
		// For the checker: it must come back in Unexpected shutdown.
		if _, err := r.c.db.Exec(`INSERT INTO faults.kills (name) VALUES ($1)`, s.name); err != nil {
			r.t.Fatal(err)
		}
		pause(r.hold(200*time.Millisecond, 2*time.Second))
		r.note("  restart %s", s.name)
		r.startSidecar(s)
		r.ack(s, old)
	case "term-master", "term-sidecar":
		s := r.target(kind, m)
		old := r.incarnation(s)
		r.note("  SIGTERM %s", s.name)
		r.signal(s, syscall.SIGTERM)
		recovered = r.recoveryFrom(time.Now())
		select {
		case <-s.d.done:
			if code := s.d.cmd.ProcessState.ExitCode(); code != 0 {
				r.violation("%s exited %d on SIGTERM: %s", s.name, code, lastLine(s.d.stderr.String()))
			}
		case <-time.After(30 * time.Second):
			r.violation("%s still running 30s after SIGTERM", s.name)
			r.signal(s, syscall.SIGKILL)
			<-s.d.done
		}
		r.startSidecar(s)
		r.ack(s, old)
	case "stop-master", "stop-sidecar":
		s := r.target(kind, m)
		r.note("  SIGSTOP %s", s.name)
		r.freeze(s, true)
		pause(r.hold(500*time.Millisecond, 5*time.Second))
		r.freeze(s, false)
		r.note("  SIGCONT %s", s.name)
		healed = time.Now()
	case "kill-engine", "stop-engine":
		e := r.engines[r.rnd.IntN(len(r.engines))]
		e.mu.Lock()
		e.down = true
		sig := syscall.SIGKILL
		if kind == "stop-engine" {
			sig = syscall.SIGSTOP
		}
		_ = e.d.cmd.Process.Signal(sig)
		e.mu.Unlock()
		// A stopped engine is held past its claims' timeout (2 s) and
		// not_responding_after (1.5 s); a killed one restarts after 1–4 s.
		if kind == "stop-engine" {
			pause(r.hold(2500*time.Millisecond, 5*time.Second))
		} else {
			pause(r.hold(time.Second, 4*time.Second))
		}
		if kind == "stop-engine" {
			e.mu.Lock()
			_ = e.d.cmd.Process.Signal(syscall.SIGCONT)
			e.down = false
			e.mu.Unlock()
		} else {
			<-e.d.done
			r.startEngine(e)
		}
		healed = time.Now()
	case "etcd-stop-leader", "etcd-stop-follower", "etcd-kill-leader", "etcd-kill-follower", "etcd-stop-masters-member", "etcd-kill-masters-member":
		var mem *etcdtest.Member
		if strings.HasSuffix(kind, "masters-member") {
			mem = r.mastersMember(r.master())
		} else {
			mem = r.etcdMember(strings.HasSuffix(kind, "leader"))
		}
		if strings.Contains(kind, "stop") {
			r.note("  SIGSTOP etcd member %s", mem.Name)
			r.check1(mem.Freeze())
			pause(r.hold(500*time.Millisecond, 4*time.Second))
			r.check1(mem.Thaw())
			r.note("  SIGCONT etcd member %s", mem.Name)
		} else {
			r.note("  SIGKILL etcd member %s", mem.Name)
			r.check1(mem.Kill())
			pause(r.hold(500*time.Millisecond, 3*time.Second))
			r.check1(mem.Restart())
			r.note("  restarted etcd member %s", mem.Name)
		}
		healed = time.Now()
	case "etcd-quorum-loss":
		a := r.etcdMember(true)
		b := r.etcdMember(false)
		for b == a {
			b = r.etcd.Members[r.rnd.IntN(len(r.etcd.Members))]
		}
		r.note("  SIGSTOP etcd members %s and %s", a.Name, b.Name)
		r.check1(a.Freeze())
		r.check1(b.Freeze())
		pause(r.hold(time.Second, 4*time.Second))
		r.check1(a.Thaw())
		r.check1(b.Thaw())
		r.note("  SIGCONT etcd members %s and %s", a.Name, b.Name)
		healed = time.Now()
	case "cut-master-etcd", "cut-sidecar-etcd":
		s := r.target(kind, m)
		r.note("  cut %s from etcd", s.name)
		for _, p := range s.etcd {
			r.check1(p.Blackhole())
		}
		pause(r.hold(500*time.Millisecond, 5*time.Second))
		for _, p := range s.etcd {
			r.check1(p.Restore())
		}
		r.note("  restored %s to etcd", s.name)
		healed = time.Now()
	case "cut-master-db", "cut-sidecar-db":
		s := r.target(kind, m)
		r.note("  cut %s from PostgreSQL", s.name)
		r.check1(s.db.Blackhole())
		pause(r.hold(500*time.Millisecond, 4*time.Second))
		r.check1(s.db.Restore())
		r.note("  restored %s to PostgreSQL", s.name)
		healed = time.Now()
	case "cut-most-db":
		// Every node but the master stops heartbeating at once: the
		// disruption guard must hold (checked per run).
		var cut []*sidecar
		for _, s := range r.sidecars {
			if s != m {
				r.check1(s.db.Blackhole())
				cut = append(cut, s)
			}
		}
		r.note("  cut every node but %s from PostgreSQL", m.name)
		pause(r.hold(2*time.Second, 4*time.Second))
		for _, s := range cut {
			r.check1(s.db.Restore())
		}
		r.note("  restored them")
		healed = time.Now()
	case "pg-restart":
		r.note("  stop PostgreSQL")
		r.pg.Stop()
		pause(r.hold(200*time.Millisecond, 2*time.Second))
		r.check1(r.pg.Resume())
		r.note("  PostgreSQL started")
		healed = time.Now()
	case "pg-stop":
		r.note("  SIGSTOP PostgreSQL")
		r.check1(r.pg.Freeze())
		pause(r.hold(500*time.Millisecond, 3*time.Second))
		r.check1(r.pg.Thaw())
		r.note("  SIGCONT PostgreSQL")
		healed = time.Now()
	case "pg-failover":
		// The primary's host dies; the failover manager notices,
		// promotes the standby and moves the addresses to it.
		old := r.pg
		r.note("  SIGKILL the PostgreSQL primary (port %d)", old.Port)
		old.Kill()
		pause(r.hold(200*time.Millisecond, 1500*time.Millisecond))
		r.check1(r.standby.Promote())
		r.moveAddresses(r.standby)
		r.note("  promoted the standby (port %d) and moved the addresses to it", r.standby.Port)
		healed = time.Now()
		r.afterFailover(kind, old, healed)
	case "pg-failover-early":
		// The nasty order: the primary hangs, the addresses move to the
		// standby before it is promoted (its sessions are read-only),
		// then it is promoted and the old primary fenced off for good.
		old := r.pg
		r.note("  SIGSTOP the PostgreSQL primary (port %d); the addresses move to the standby (port %d), not promoted yet", old.Port, r.standby.Port)
		r.check1(old.Freeze())
		r.moveAddresses(r.standby)
		pause(r.hold(time.Second, 3*time.Second))
		old.Kill()
		r.check1(r.standby.Promote())
		r.note("  promoted the standby; the old primary killed")
		healed = time.Now()
		r.afterFailover(kind, old, healed)
	case "pg-failover-lagging":
		// Replication is cut, the primary goes on taking writes, then
		// dies: the promoted standby lacks the last transactions, as an
		// asynchronous failover can. The invariants of the probe and
		// the record must hold all the same.
		old := r.pg
		r.note("  cut replication: the standby falls behind")
		r.check1(r.repl.Blackhole())
		// The master resigns meanwhile: its successor's term is recorded
		// on the primary alone, and lost with it.
		var termed *sidecar
		var termedInc string
		m := r.master()
		if m != nil && m.spared {
			// Its successor's term is written to the primary only all
			// the same; then the next one's too, as it resigns.
			m = r.moveOffice(kind, m)
		}
		if m != nil {
			termed, termedInc = m, r.incarnation(m)
			r.note("  SIGTERM %s (master): its successor's term is written to the primary only", m.name)
			r.signal(m, syscall.SIGTERM)
			<-m.d.done
			eventually(r.t, 30*time.Second, "another master acting", func() (bool, error) {
				n, _, ok := r.probe.acting()
				return ok && n != m.name, nil
			})
		}
		pause(r.hold(time.Second, 3*time.Second))
		primaryAt := walPosition(r.t, old, `pg_current_wal_insert_lsn()`)
		r.note("  SIGKILL the PostgreSQL primary (port %d)", old.Port)
		old.Kill()
		standbyAt := walPosition(r.t, r.standby, `pg_last_wal_receive_lsn()`)
		r.check1(r.standby.Promote())
		r.moveAddresses(r.standby)
		r.check1(r.repl.Restore())
		behind := lsnDiff(r.t, primaryAt, standbyAt)
		r.mu.Lock()
		r.lost = append(r.lost, behind)
		r.mu.Unlock()
		r.note("  promoted the standby %d bytes of WAL behind the primary, and moved the addresses to it", behind)
		healed = time.Now()
		var gone []*sidecar
		if termed != nil {
			gone = append(gone, termed)
		}
		r.afterFailover(kind, old, healed, gone...)
		if termed != nil {
			// Its deregistration was lost too: it may come back in
			// Unexpected shutdown, acked as after a kill.
			r.startSidecar(termed)
			r.ack(termed, termedInc)
		}
	case "etcd-replace-member":
		// A member's host is replaced: member remove, a new process
		// with new ports and data, member add; the member's address
		// moves to it.
		mem := r.etcd.Members[r.rnd.IntN(len(r.etcd.Members))]
		r.note("  replace etcd member %s", mem.Name)
		n := r.replaceMember(mem)
		r.note("  etcd member %s replaced by %s", mem.Name, n.Name)
		healed = time.Now()
	case "operator-storm":
		r.operatorStorm()
		healed = time.Now()
	default:
		t.Fatalf("unknown fault %q", kind)
	}
	r.mu.Lock()
	r.injected[kind]++
	r.mu.Unlock()
	if recovered == nil {
		recovered = r.recoveryFrom(healed)
	}
	r.measure(kind, recovered)
}

// startStandby makes a streaming replica of the primary (through repl).
func (r *faultRun) startStandby() {
	s, err := r.pg.StartStandby(r.repl.Addr)
	r.check1(err)
	r.t.Cleanup(s.Close)
	r.standby = s
}

// memberAddr returns the address of etcd member m (made on first use).
func (r *faultRun) memberAddr(m *etcdtest.Member) *faultproxy.Switch {
	i := slices.Index(r.etcd.Members, m)
	for len(r.members) <= i {
		r.members = append(r.members, faultproxy.NewSwitch(r.t, r.etcd.Members[len(r.members)].Endpoint()))
	}
	return r.members[i]
}

// replaceMember replaces etcd member m by a new one (member remove, a new
// process, member add) in m's place in etcd.Members, and moves m's
// address to it.
func (r *faultRun) replaceMember(m *etcdtest.Member) *etcdtest.Member {
	i := slices.Index(r.etcd.Members, m)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r.membersMu.Lock()
	defer r.membersMu.Unlock()
	n, err := r.etcd.Replace(ctx, m)
	r.check1(err)
	// Replace appends the new member: put it where m was.
	ms := slices.DeleteFunc(slices.Clone(r.etcd.Members), func(o *etcdtest.Member) bool { return o == n })
	r.etcd.Members = slices.Insert(ms, i, n)
	r.members[i].SetTarget(n.Endpoint())
	return n
}

// names returns the sidecars' names.
func (r *faultRun) names() []string {
	var ns []string
	for _, s := range r.sidecars {
		ns = append(ns, s.name)
	}
	return ns
}

// moveAddresses moves the primary's address to to.
func (r *faultRun) moveAddresses(to *pgtest.Server) { r.vip.SetTarget(to.Addr()) }

// afterFailover makes the standby the primary and old gone for good,
// checks what the failover must not do to the nodes, and makes a new
// standby of the new primary.
func (r *faultRun) afterFailover(kind string, old *pgtest.Server, writable time.Time, gone ...*sidecar) {
	r.pg, r.standby = r.standby, nil
	old.Close()
	// Heartbeats resume within connect_timeout + one interval of the
	// new primary accepting writes (slack: a paused sidecar, a starved
	// host).
	const bound = 5*time.Second + 300*time.Millisecond + 2*time.Second
	names := slices.DeleteFunc(r.names(), func(n string) bool {
		return slices.ContainsFunc(gone, func(s *sidecar) bool { return s.name == n })
	})
	// Watched through a pool of its own, opened now: the harness's pool
	// may hold a connection the failover left hanging (a run saw every
	// node log its heartbeat back 2.1 s after the promotion, and this
	// watch see it 7.6 s after: the watch's stall, not the nodes').
	obs, err := pgdb.Open(pgdb.Config{DSN: r.c.dsn, ConnectTimeout: harnessConnectTimeout})
	if err != nil {
		r.t.Fatal(err)
	}
	defer func() { _ = obs.Close() }()
	var took time.Duration
	for deadline := writable.Add(60 * time.Second); ; pause(20 * time.Millisecond) {
		var n int
		asked := time.Now()
		err := obs.Get(&n, `SELECT count(*) FROM enginehealth.nodes WHERE name = ANY($1) AND last_active >= $2`, pq.Array(names), writable)
		if d := time.Since(asked); d > time.Second {
			// Told apart from the nodes' own lateness: two fresh-clone
			// runs exceeded the bound while every node logged its
			// heartbeat back within 2.1 s of the promotion.
			r.note("  the watch's read took %s (%d of %d nodes; %v)", d.Round(time.Millisecond), n, len(names), err)
		}
		if err == nil && n == len(names) {
			took = time.Since(writable)
			break
		}
		if time.Now().After(deadline) {
			r.violation("%s: not every node heartbeat on the new primary within 60 s (%d of %d; %v)", kind, n, len(names), err)
			break
		}
	}
	if took > 0 {
		r.note("  every node's heartbeat landed on the new primary %s after it took writes", took.Round(time.Millisecond))
		if took > bound {
			r.violation("%s: heartbeats resumed %s after the new primary took writes, beyond connect_timeout + one interval (+2 s slack)", kind, took.Round(time.Millisecond))
		}
		r.mu.Lock()
		r.toHeartbeat[kind] = append(r.toHeartbeat[kind], took)
		r.mu.Unlock()
	}
	// A pass that began after it judged the nodes: none marked Not
	// responding since the fault began.
	after := time.Now()
	eventually(r.t, 60*time.Second, "a check pass after the failover", func() (bool, error) {
		var n int
		err := r.c.db.Get(&n, `SELECT count(*) FROM enginehealth.runs WHERE kind = 'check' AND status = 'finished' AND started_at > $1`, after)
		return n > 0, err
	})
	var marked []string
	r.check1(r.c.db.Select(&marked, `SELECT DISTINCT node FROM enginehealth.events WHERE kind = 'node_status' AND to_state = $1 AND at >= $2 AND node <> ALL ($3)`,
		nodes.StatusNotResponding, r.faultStart, pq.Array(slices.DeleteFunc(r.names(), func(n string) bool { return slices.Contains(names, n) }))))
	if len(marked) > 0 {
		r.violation("%s: nodes marked Not responding for the database's own failover: %s", kind, strings.Join(marked, ", "))
	}
	r.replFrom.SetTarget(r.pg.Addr())
	r.startStandby()
}

// walPosition reads a WAL position of server s (SQL expr), "" when s
// does not answer.
func walPosition(t *testing.T, s *pgtest.Server, expr string) string {
	db, err := sqlx.Open("postgres", s.URL("postgres")+"&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var lsn string
	if err := db.Get(&lsn, `SELECT coalesce(`+expr+`::text, '')`); err != nil {
		t.Logf("WAL position of port %d: %v", s.Port, err)
	}
	return lsn
}

// lsnDiff returns a - b in bytes (0 when either is unknown).
func lsnDiff(t *testing.T, a, b string) int64 {
	parse := func(l string) (int64, bool) {
		hi, lo, ok := strings.Cut(l, "/")
		h, err1 := strconv.ParseInt(hi, 16, 64)
		w, err2 := strconv.ParseInt(lo, 16, 64)
		return h<<32 | w, ok && err1 == nil && err2 == nil
	}
	x, ok1 := parse(a)
	y, ok2 := parse(b)
	if !ok1 || !ok2 {
		t.Logf("WAL positions %q, %q: cannot compare", a, b)
		return 0
	}
	return x - y
}

func (r *faultRun) check1(err error) {
	r.t.Helper()
	if err != nil {
		r.t.Fatal(err)
	}
}

func (r *faultRun) signal(s *sidecar, sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spared {
		r.t.Fatalf("the suite was to send %v to %s, spared (EH_FAULT_SPARE): not sent", sig, s.name)
	}
	s.signalled = true
	_ = s.d.cmd.Process.Signal(sig)
}

func (r *faultRun) freeze(s *sidecar, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sig := syscall.SIGCONT
	if on {
		sig = syscall.SIGSTOP
	}
	if on && s.spared {
		r.t.Fatalf("the suite was to freeze %s, spared (EH_FAULT_SPARE): not frozen", s.name)
	}
	s.frozen = on
	_ = s.d.cmd.Process.Signal(sig)
}

// etcdMember returns the raft leader, or a follower, from the schedule.
func (r *faultRun) etcdMember(leader bool) *etcdtest.Member {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := r.etcd.Leader(ctx)
	if err != nil {
		// No leader right now: any member.
		return r.etcd.Members[r.rnd.IntN(len(r.etcd.Members))]
	}
	if leader {
		return l
	}
	var fs []*etcdtest.Member
	for _, m := range r.etcd.Members {
		if m != l {
			fs = append(fs, m)
		}
	}
	return fs[r.rnd.IntN(len(fs))]
}

// mastersMember returns the etcd member the master m is talking to: the
// one its latest request went to (seen on m's proxy to it), so that the
// fault lands on a request in flight. The sidecar has no fixed member:
// its client spreads requests over all of them (round robin; the lease is
// kept alive by single requests, not a stream), so this is the member it
// talks to at the moment of the fault. Any member when there is no
// master, or when m sends nothing for 3 s.
func (r *faultRun) mastersMember(m *sidecar) *etcdtest.Member {
	if m == nil {
		return r.etcd.Members[r.rnd.IntN(len(r.etcd.Members))]
	}
	before := make([]int64, len(m.etcd))
	for i, p := range m.etcd {
		before[i] = p.Sent()
	}
	var mem *etcdtest.Member
	for deadline := time.Now().Add(3 * time.Second); mem == nil && time.Now().Before(deadline); {
		for i, p := range m.etcd {
			if p.Sent() != before[i] {
				mem = r.etcd.Members[i] // the proxies are in member order
				break
			}
		}
		pause(2 * time.Millisecond)
	}
	if mem == nil {
		r.t.Logf("%s sent nothing to etcd for 3 s: any member", m.name)
		return r.etcd.Members[r.rnd.IntN(len(r.etcd.Members))]
	}
	r.t.Logf("%s is talking to %s", m.name, mem.Name)
	return mem
}

// ack acknowledges a restarted sidecar's unexpected shutdown (a SIGTERM
// leaves none), sending the same ack to two nodes at once: one does it,
// the other is refused (or finds nothing to do).
func (r *faultRun) ack(s *sidecar, old string) {
	eventually(r.t, 60*time.Second, s.name+" registered again", func() (bool, error) {
		n, err := r.c.node(s.name)
		return err == nil && n.Incarnation != old, nil
	})
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		n, err := r.c.node(s.name)
		if err == nil && n.Status != nodes.StatusUnexpectedShutdown {
			return
		}
		if err == nil {
			var wg sync.WaitGroup
			for _, to := range []*sidecar{s, r.other(s)} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r.op("node ack", "node", "ack", s.name, "--reason", "fault run", "--api", to.api)
				}()
			}
			wg.Wait()
		}
		pause(200 * time.Millisecond)
	}
	r.violation("%s still in %s 60s after its restart and acks", s.name, nodes.StatusUnexpectedShutdown)
}

// incarnation returns the sidecar's recorded incarnation ("" when none).
func (r *faultRun) incarnation(s *sidecar) string {
	n, err := r.c.node(s.name)
	if err != nil {
		return ""
	}
	return n.Incarnation
}

// op runs one operator command and counts its exit code.
func (r *faultRun) op(what string, args ...string) int {
	_, _, code := cli(r.t, r.c.operatorEnv(), args...)
	r.mu.Lock()
	r.opCodes[fmt.Sprintf("%s → %d", what, code)]++
	r.mu.Unlock()
	return code
}

// operatorStorm sends duplicated operator requests to different nodes at
// once: recover, holds retry, a manual retry of a failed instance, pause
// then resume.
func (r *faultRun) operatorStorm() {
	var failed []string
	_ = r.c.db.Select(&failed, `SELECT id::text FROM demo.orders WHERE status IN ('ShipFailed', 'BillFailed') ORDER BY random() LIMIT 1`)
	a := r.sidecars[r.rnd.IntN(len(r.sidecars))]
	b := r.other(a)
	var wg sync.WaitGroup
	run := func(what string, args ...string) {
		wg.Add(1)
		go func() { defer wg.Done(); r.op(what, args...) }()
	}
	for _, s := range []*sidecar{a, b} {
		run("recover", "recover", "--api", s.api)
		run("holds retry", "holds", "retry", "--all", "--reason", "storm", "--api", s.api)
		if len(failed) == 1 {
			run("retry", "retry", "orders", failed[0], "--reason", "storm", "--api", s.api)
		}
		run("pause", "pause", "--reason", "storm", "--api", s.api)
	}
	wg.Wait()
	for _, s := range []*sidecar{a, b} {
		run("resume", "resume", "--reason", "storm over", "--api", s.api)
	}
	wg.Wait()
	// Both resumes may be refused (the master's office suspended at that
	// moment, on a starved host): an operator tries again until repair
	// runs, or the cluster would stay paused into the next faults.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var paused bool
		if err := r.c.db.Get(&paused, `SELECT paused FROM enginehealth.pause`); err == nil && !paused {
			return
		}
		if time.Now().After(deadline) {
			r.violation("the cluster stayed paused: every resume refused for 60 s after an operator storm")
			return
		}
		pause(200 * time.Millisecond)
		r.op("resume (again)", "resume", "--reason", "storm over", "--api", r.sidecars[r.rnd.IntN(len(r.sidecars))].api)
	}
}

// stuck counts the instances interim and unclaimed (or under an expired
// claim) that no policy parked: what the master should repair.
func (r *faultRun) stuck() (int, error) {
	var n int
	err := r.c.db.Get(&n, `SELECT count(*) `+stuckOrders)
	return n, err
}

// recoveryFrom times, from start, how long until a master acts and
// until nothing is left to repair, polling every 50 ms for up to 60 s
// (also while the fault is still being healed). Nothing left to repair
// counts from 2 s on, the claims' timeout: before it, a claim of an
// interrupted engine still looks live. The function returned waits for
// both (0: not within 60 s).
func (r *faultRun) recoveryFrom(start time.Time) func() (master, repaired time.Duration) {
	done := make(chan struct{})
	var master, repaired time.Duration
	go func() {
		defer close(done)
		for deadline := start.Add(60 * time.Second); time.Now().Before(deadline) && (master == 0 || repaired == 0); pause(50 * time.Millisecond) {
			if _, ok := r.probe.actingAfter(start); master == 0 && ok {
				master = max(time.Since(start), time.Millisecond)
			}
			if repaired == 0 && time.Since(start) >= 2*time.Second {
				if n, err := r.stuck(); err == nil && n == 0 {
					repaired = time.Since(start)
				}
			}
		}
	}()
	return func() (time.Duration, time.Duration) { <-done; return master, repaired }
}

// measure records a fault's recovery times (recoveryFrom).
func (r *faultRun) measure(kind string, recovered func() (time.Duration, time.Duration)) {
	master, repaired := recovered()
	r.mu.Lock()
	defer r.mu.Unlock()
	if master == 0 {
		r.violations = append(r.violations, fmt.Sprintf("after %s: no acting master within 60 s", kind))
	} else {
		r.toMaster[kind] = append(r.toMaster[kind], master)
	}
	if repaired == 0 {
		r.violations = append(r.violations, fmt.Sprintf("after %s: instances left to repair 60 s on", kind))
	} else {
		r.toRepair[kind] = append(r.toRepair[kind], repaired)
	}
}

// healAll ends every fault and makes every node Ready.
func (r *faultRun) healAll() {
	for _, s := range r.sidecars {
		for _, p := range s.etcd {
			_ = p.Restore()
		}
		_ = s.db.Restore()
		if s.frozen {
			r.freeze(s, false)
		}
	}
	for _, s := range r.sidecars {
		waitNodeStatus(r.t, r.c, s.name, nodes.StatusReady)
	}
	if _, errOut, code := cli(r.t, r.c.operatorEnv(), "resume", "--reason", "faults over", "--api", r.sidecars[0].api); code != 0 && code != 4 {
		r.t.Fatalf("resume: exit %d: %s", code, errOut)
	}
}

// finalPass waits until a check pass that began after the faults ended
// has finished and nothing is left to repair.
func (r *faultRun) finalPass() {
	after := time.Now()
	eventually(r.t, 60*time.Second, "a check pass after the faults", func() (bool, error) {
		var n int
		err := r.c.db.Get(&n, `SELECT count(*) FROM enginehealth.runs WHERE kind = 'check' AND status = 'finished' AND started_at > $1`, after)
		return n > 0, err
	})
	eventually(r.t, 60*time.Second, "nothing left to repair", func() (bool, error) {
		n, err := r.stuck()
		return n == 0, err
	})
}

// report prints what was injected, checked and violated, and the times
// to recover per fault kind, ending with the two plain lines; it fails
// the test on any violation.
func (r *faultRun) report(took time.Duration, checks []checkResult) {
	var b strings.Builder
	security := "plain"
	if r.opts.tls {
		security = "TLS everywhere (etcd with client certificates and auth, PostgreSQL verify-full, API client_auth require)"
	}
	injected := 0 // what was injected: the planned count is a bound in a soak (EH_FAULT_DURATION)
	for _, k := range r.injected {
		injected += k
	}
	fmt.Fprintf(&b, "fault run: seed %d, %d faults in %s, %d sidecars, 3 etcd members, starvation %s, %s\n", r.seed, injected, took.Round(time.Second), len(r.sidecars), r.starveMode, security)
	if len(r.pauses) > 0 {
		var ps []string
		for _, k := range slices.Sorted(maps.Keys(r.pauses)) {
			ps = append(ps, fmt.Sprintf("%s %d", k, r.pauses[k]))
		}
		fmt.Fprintf(&b, "pauses of 100-500 ms while faults ran: %s\n", strings.Join(ps, ", "))
	}
	kinds := slices.Sorted(maps.Keys(r.injected))
	fmt.Fprintf(&b, "recovery times to an acting master and to nothing left to repair (counted from 2 s on, the claim timeout), from the end of each fault; from the signal of a kill or SIGTERM, and from the start of another fault on the master:\n")
	fmt.Fprintf(&b, "%-20s %6s %22s %22s\n", "fault", "count", "to master p50/p99", "to repair p50/p99")
	for _, k := range kinds {
		fmt.Fprintf(&b, "%-20s %6d %22s %22s\n", k, r.injected[k], percentiles(r.toMaster[k]), percentiles(r.toRepair[k]))
	}
	r.footprintReport(&b, took)
	restarts := 0
	for _, e := range r.engines {
		restarts += e.restarts
	}
	fmt.Fprintf(&b, "acting master asked %d times (every 50 ms, all nodes at once; %d rounds too slow to compare): two acted at once %d times; terms that acted: %d\n",
		r.acting.samples, r.acting.slow, len(r.acting.twoActing), len(r.acting.terms))
	fmt.Fprintf(&b, "longest overlap of two acting masters: %s (%d consecutive rounds)\n", r.acting.longestOverlap.Round(time.Millisecond), r.acting.overlapRounds)
	fmt.Fprintf(&b, "%s\n", r.leaseReport())
	for _, k := range slices.Sorted(maps.Keys(r.toHeartbeat)) {
		fmt.Fprintf(&b, "%s: every node's heartbeat on the new primary after it took writes, p50/p99: %s\n", k, percentiles(r.toHeartbeat[k]))
	}
	if len(r.lost) > 0 {
		lostTerms := 0
		for _, d := range r.incarnations {
			lostTerms += strings.Count(d.stderr.String(), "the database lost our term")
		}
		fmt.Fprintf(&b, "lagging promotions: the standby was behind the primary it replaced by %v bytes of WAL; offices that found their term lost and ended: %d\n", r.lost, lostTerms)
	}
	fmt.Fprintf(&b, "engine restarts (an engine exits when PostgreSQL fails, and is restarted every 200 ms, also while it is down): %d\n", restarts)
	ops := slices.Sorted(maps.Keys(r.opCodes))
	for _, o := range ops {
		fmt.Fprintf(&b, "operator %s: %d\n", o, r.opCodes[o])
	}
	// Every violation counts; each check lists its first 20.
	violations, count := slices.Clone(r.violations), len(r.violations)
	for _, c := range checks {
		fmt.Fprintf(&b, "check %-40s %s\n", c.name, cmp.Or(c.summary(), "ok"))
		violations = append(violations, c.violations...)
		count += c.found
	}
	for _, v := range violations {
		fmt.Fprintf(&b, "VIOLATION %s\n", v)
	}
	total := 0
	for _, k := range r.injected {
		total += k
	}
	fmt.Fprintf(&b, "faults injected: %d\nviolations: %d\n", total, count)
	r.t.Log("\n" + b.String())
	if dir := r.t.ArtifactDir(); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "faults-report.txt"), []byte(b.String()), 0o644)
	}
	if count > 0 {
		r.dumpRecord()
		r.t.Errorf("%d violations (seed %d replays the schedule: EH_FAULT_SEED=%d)", count, r.seed, r.seed)
	}
}

// dumpRecord writes, for a post-mortem of a violation, the record's
// small tables (kills, the node records' changes, the nodes, the node
// events) to the artifacts as tab-separated files: the run drops its
// database when it ends.
func (r *faultRun) dumpRecord() {
	dir := r.t.ArtifactDir()
	if dir == "" {
		return
	}
	for name, q := range map[string]string{
		"kills.tsv":       `SELECT seq, name FROM faults.kills ORDER BY seq`,
		"node_moves.tsv":  `SELECT seq, tx, app, name, coalesce(from_status, ''), coalesce(to_status, '') FROM faults.node_moves ORDER BY seq`,
		"nodes.tsv":       `SELECT name, incarnation::text, coalesce(previous_incarnation::text, ''), status, active_since::text, last_active::text FROM enginehealth.nodes ORDER BY name`,
		"node_events.tsv": `SELECT id, at::text, kind, coalesce(actor, ''), coalesce(node, ''), coalesce(from_state, ''), coalesce(to_state, ''), reason FROM enginehealth.events WHERE kind LIKE 'node%' ORDER BY id`,
	} {
		rows, err := r.c.db.Query(q)
		if err != nil {
			r.t.Logf("dump %s: %v", name, err)
			continue
		}
		var b strings.Builder
		cols, _ := rows.Columns()
		b.WriteString(strings.Join(cols, "\t") + "\n")
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				r.t.Logf("dump %s: %v", name, err)
				break
			}
			for i, v := range vals {
				if i > 0 {
					b.WriteByte('\t')
				}
				b.WriteString(v.String)
			}
			b.WriteByte('\n')
		}
		rows.Close()
		_ = os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644)
	}
}

// readOnlyNotAnError: a server that takes no writes (a standby the
// address moved to before its promotion) is the database being
// unavailable, logged as a warning and retried: no sidecar logged it as
// an error.
func (r *faultRun) readOnlyNotAnError() {
	for _, d := range r.incarnations {
		for _, l := range strings.Split(d.stderr.String(), "\n") {
			if strings.Contains(l, `"level":"ERROR"`) && (strings.Contains(l, "takes no writes") || strings.Contains(l, "read-only") || strings.Contains(l, "25006")) {
				r.violation("a sidecar logged a read-only server as an error: %s", l)
			}
		}
	}
}

// footprint is what a sidecar process held, first and last sampled.
type footprint struct {
	name                string
	pid                 int
	first, last         time.Time
	rss0, rss1, rssMax  int64 // bytes
	goroutines0, gorNow int
	samples             int
	// series: every sample, kept for a spared sidecar's process.
	spared bool
	series []footSample
}

// footSample is one sample of a process's footprint.
type footSample struct {
	at         time.Time
	rss        int64
	goroutines int
}

// sampleFootprints samples every sidecar process's resident memory
// (/proc) and goroutines (go_goroutines of its /metrics) every period,
// until the function returned is called (which takes a last sample).
func (r *faultRun) sampleFootprints(period time.Duration) (stop func()) {
	r.footprints = map[*daemon]*footprint{}
	hc := r.c.httpClient(2 * time.Second)
	sample := func() {
		for _, s := range r.sidecars {
			s.mu.Lock()
			d, ok, spared := s.d, !s.frozen && !s.signalled && s.d.running(), s.spared
			s.mu.Unlock()
			if !ok {
				continue
			}
			rss, err := residentBytes(d.cmd.Process.Pid)
			if err != nil {
				continue
			}
			g, err := goroutines(r.c, hc, s.listen)
			if err != nil {
				continue
			}
			r.mu.Lock()
			f := r.footprints[d]
			if f == nil {
				f = &footprint{name: s.name, pid: d.cmd.Process.Pid, first: time.Now(), rss0: rss, goroutines0: g, spared: spared}
				r.footprints[d] = f
			}
			f.last, f.rss1, f.rssMax, f.gorNow = time.Now(), rss, max(f.rssMax, rss), g
			f.samples++
			if f.spared {
				f.series = append(f.series, footSample{f.last, rss, g})
			}
			r.mu.Unlock()
		}
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			sample()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		sample()
	}
}

// residentBytes reads a process's resident set size from /proc.
func residentBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// goroutines reads go_goroutines from a sidecar's /metrics.
func goroutines(c *cluster, hc *http.Client, addr string) (int, error) {
	resp, err := c.get(hc, addr, "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "go_goroutines "); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("no go_goroutines in %s/metrics (HTTP %d)", addr, resp.StatusCode)
}

// footprintReport gives each spared sidecar's process (EH_FAULT_SPARE)
// its resident memory and goroutines after a warm-up (the first 5 % of
// its sampled life) and at the end, its largest, and the growth between;
// then lists the other sidecar processes that lived longest (at least
// 10 % of the run), with their memory and goroutines first and last
// sampled. Figures only: a shared, noisy host sets no threshold.
func (r *faultRun) footprintReport(b *strings.Builder, took time.Duration) {
	fs := slices.Collect(maps.Values(r.footprints))
	slices.SortFunc(fs, func(a, b *footprint) int { return cmp.Compare(b.last.Sub(b.first), a.last.Sub(a.first)) })
	mb := func(n int64) float64 { return float64(n) / (1 << 20) }
	if r.opts.spare > 0 {
		fmt.Fprintf(b, "spared sidecars (EH_FAULT_SPARE=%d: no fault signalled or froze their process; network, etcd and PostgreSQL faults hit them as the others), resident memory and goroutines after a warm-up (the first 5%% of the process's sampled life) and at the end:\n", r.opts.spare)
		for _, s := range r.sidecars {
			if !s.spared {
				continue
			}
			var mine []*footprint
			for _, f := range fs {
				if f.name == s.name {
					mine = append(mine, f)
				}
			}
			slices.SortFunc(mine, func(a, b *footprint) int { return a.first.Compare(b.first) })
			if len(mine) != 1 {
				fmt.Fprintf(b, "  %s: %d processes sampled, not one (a process that exited on its own is a violation, below)\n", s.name, len(mine))
			}
			for _, f := range mine {
				warm := f.series[0]
				for _, x := range f.series {
					if x.at.Sub(f.first) >= f.last.Sub(f.first)/20 {
						warm = x
						break
					}
				}
				end := f.series[len(f.series)-1]
				gMax := 0
				for _, x := range f.series {
					gMax = max(gMax, x.goroutines)
				}
				growth := end.rss - warm.rss
				fmt.Fprintf(b, "  %s pid %d, %s, %d samples: RSS %.1f MB after warm-up (+%s) → %.1f MB at end, growth %+.1f MB (%+.1f%%), max %.1f MB; goroutines %d → %d (%+d), max %d; first sampled: RSS %.1f MB, %d goroutines\n",
					f.name, f.pid, f.last.Sub(f.first).Round(time.Second), f.samples, mb(warm.rss), warm.at.Sub(f.first).Round(time.Second), mb(end.rss),
					mb(growth), 100*float64(growth)/float64(max(warm.rss, 1)), mb(f.rssMax), warm.goroutines, end.goroutines, end.goroutines-warm.goroutines, gMax,
					mb(f.rss0), f.goroutines0)
			}
		}
		count := func(m map[string]int) string {
			n, parts := 0, []string{}
			for _, k := range slices.Sorted(maps.Keys(m)) {
				n += m[k]
				parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
			}
			if n == 0 {
				return "0"
			}
			return fmt.Sprintf("%d (%s)", n, strings.Join(parts, ", "))
		}
		fmt.Fprintf(b, "faults on the process of a spared master: %s hit the next master once the office moved off it (the spared sidecars cut from etcd until another acted), %s skipped (no other master within 60 s)\n",
			count(r.substituted), count(r.skipped))
		fmt.Fprintf(b, "other sidecar processes that lived through at least 10%% of the run (resident memory and goroutines, first and last sampled):\n")
	} else {
		fmt.Fprintf(b, "sidecar processes that lived through at least 10%% of the run (resident memory and goroutines, first and last sampled):\n")
	}
	for _, f := range fs {
		if f.spared || f.samples < 2 || f.last.Sub(f.first) < took/10 {
			continue
		}
		fmt.Fprintf(b, "  %s pid %d, %s: RSS %.1f → %.1f MB (max %.1f), goroutines %d → %d\n", f.name, f.pid, f.last.Sub(f.first).Round(time.Second),
			mb(f.rss0), mb(f.rss1), mb(f.rssMax), f.goroutines0, f.gorNow)
	}
}

func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "—"
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	p := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return fmt.Sprintf("%s / %s", p(0.5).Round(10*time.Millisecond), p(0.99).Round(10*time.Millisecond))
}
