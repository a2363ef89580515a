package leader

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/etcdtest"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
)

var (
	pg   *pgtest.Server
	etcd *etcdtest.Etcd
)

func TestMain(m *testing.M) {
	testkit.Main(m, func(m *testing.M) int {
		var err error
		if etcd, err = etcdtest.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer etcd.Close()
		return pgtest.Main(m, &pg)
	})
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type bundle struct {
	db     *sqlx.DB
	fence  *Fence
	prefix string
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := pg.MigratedDB(t)
	events := audit.New("enginehealth")
	return bundle{db: db, fence: testkit.Must(NewFence(FenceConfig{DB: db, Schema: "enginehealth", Events: events})), prefix: "/" + t.Name() + "/"}
}

func newClient(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// candidate runs one elector whose leader function takes office and
// publishes the office until it is lost.
type candidate struct {
	name    string
	elector *Elector
	offices chan *Office
	lost    chan error // causes of lost offices
	cancel  context.CancelFunc
	done    chan struct{}
	cli     *clientv3.Client
	gate    atomic.Pointer[error]
	// started: when its latest office began (the leader function was
	// called): from then on it acts.
	started atomic.Pointer[time.Time]
	// leases: each lease its elector was granted (Config.OnLease).
	leases chan clientv3.LeaseID
}

func (b bundle) start(t *testing.T, name string) *candidate {
	t.Helper()
	return b.startWith(t, name, newClient(t), MinLeaseTTL, 500*time.Millisecond)
}

// startWith runs a candidate with its own client, TTL and trust margin.
func (b bundle) startWith(t *testing.T, name string, cli *clientv3.Client, ttl, margin time.Duration) *candidate {
	t.Helper()
	c := &candidate{name: name, offices: make(chan *Office, 10), lost: make(chan error, 10), done: make(chan struct{}), cli: cli,
		leases: make(chan clientv3.LeaseID, 100)}
	inc := uuid.NewString()
	// The node's record, as the registry (which leader knows nothing of)
	// would write it.
	if _, err := b.db.Exec(`INSERT INTO enginehealth.nodes (name, incarnation, hostname, status, status_changed_by, api_address)
		VALUES ($1, $2, $1, 'Ready', 'test', $1 || ':1')
		ON CONFLICT (name) DO UPDATE SET incarnation = EXCLUDED.incarnation`, name, inc); err != nil {
		t.Fatal(err)
	}
	var err error
	c.elector, err = New(Config{
		Client: c.cli, Prefix: b.prefix, TTL: ttl, TrustMargin: margin,
		Candidate: Candidate{Name: name, Incarnation: inc, APIAddress: name + ":1"},
		Gate: func() error {
			if p := c.gate.Load(); p != nil {
				return *p
			}
			return nil
		},
		Log: quiet,
		OnLease: func(id clientv3.LeaseID) {
			select {
			case c.leases <- id:
			default: // a test that reads none
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		_ = c.elector.Run(ctx, func(ctx context.Context, o *Office) error {
			now := time.Now()
			c.started.Store(&now)
			if err := b.fence.TakeOffice(ctx, o, b.setMaster(ctx, o)); err != nil {
				return err
			}
			c.offices <- o
			<-ctx.Done()
			c.lost <- context.Cause(ctx)
			return nil
		})
	}()
	t.Cleanup(c.stop)
	return c
}

// setMaster is the registry's part of taking office (as nodes.SetMaster
// does it).
func (b bundle) setMaster(ctx context.Context, o *Office) func(tx *Tx) error {
	return func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE enginehealth.nodes SET is_master = (name = $1 AND incarnation = $2)
			WHERE is_master OR (name = $1 AND incarnation = $2)`, o.Candidate.Name, o.Candidate.Incarnation)
		return err
	}
}

// addressOf looks a node up as nodes.Store.AddressOf does.
func (b bundle) addressOf(ctx context.Context, name, incarnation string) (string, bool, error) {
	var addr, inc string
	err := b.db.QueryRowContext(ctx, `SELECT api_address, incarnation FROM enginehealth.nodes WHERE name = $1`, name).Scan(&addr, &inc)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return addr, inc == incarnation, err
}

func (c *candidate) stop() {
	c.cancel()
	<-c.done
}

func waitOffice(t *testing.T, cs ...*candidate) (*candidate, *Office) {
	t.Helper()
	var (
		won *candidate
		o   *Office
	)
	testkit.Eventually(t, 15*time.Second, "somebody took office", func() (bool, error) {
		for _, c := range cs {
			select {
			case o = <-c.offices:
				won = c
				return true, nil
			default:
			}
		}
		return false, nil
	})
	return won, o
}

func masters(t *testing.T, b bundle) []string {
	t.Helper()
	var names []string
	if err := b.db.Select(&names, `SELECT name FROM enginehealth.nodes WHERE is_master`); err != nil {
		t.Fatal(err)
	}
	return names
}

func TestOneMasterAndGracefulHandover(t *testing.T) {
	b := setup(t)
	a, c := b.start(t, "a"), b.start(t, "c")
	first, o1 := waitOffice(t, a, c)
	other := c
	if first == c {
		other = a
	}
	// The first master a schema ever had acts at once: nobody before it.
	if err := o1.Trusted(); err != nil {
		t.Fatalf("the first master of a fresh schema does not act at once: %v", err)
	}
	if m := masters(t, b); len(m) != 1 || m[0] != first.name {
		t.Fatalf("master flags %v, want [%s]", m, first.name)
	}
	if got := other.elector.Office(); got != nil {
		t.Fatalf("two offices at once: %s and %s", first.name, other.name)
	}
	h, err := Current(context.Background(), first.cli, b.prefix)
	if err != nil || h.Name != first.name || h.Term != o1.Term {
		t.Fatalf("Current = %+v, %v; want %s at term %d", h, err, first.name, o1.Term)
	}

	// A standby campaigning for less than a trust window waits one out
	// when it becomes first (a holder it never saw may have left just
	// before it stood): let the standby's window pass first, as any
	// standby's has in a cluster that runs.
	pause(other.elector.window())
	first.stop() // resigns at once: its key is gone when Run returns
	if h, err := Current(context.Background(), other.cli, b.prefix); err == nil && h.Name == first.name {
		t.Fatalf("the stopped master's key is still the leader key: it did not resign")
	}
	second, o2 := waitOffice(t, other)
	if o2.Term <= o1.Term {
		t.Fatalf("term did not increase: %d → %d", o1.Term, o2.Term)
	}
	// The first master resigned (its marker says it stopped acting): the
	// second need not wait out its window.
	if err := o2.Trusted(); err != nil {
		t.Fatalf("the master after a graceful handover does not act at once: %v", err)
	}
	if m := masters(t, b); len(m) != 1 || m[0] != second.name {
		t.Fatalf("master flags %v after handover, want [%s]", m, second.name)
	}
	if err := o1.Trusted(); !errors.Is(err, ErrNotTrusted) {
		t.Fatalf("old office still trusted: %v", err)
	}
}

func TestFenceRejectsMasterWhoseLeaseWasRevoked(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	a := b.start(t, "a")
	_, oa := waitOffice(t, a)
	if err := b.fence.InTx(ctx, oa, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE public.guarded (v int); INSERT INTO public.guarded VALUES (1)`)
		return err
	}); err != nil {
		t.Fatalf("fenced write by the master: %v", err)
	}
	c := b.start(t, "c")

	// a loses its lease (as after a partition or a long pause).
	if _, err := a.cli.Revoke(ctx, clientv3.LeaseID(leaseOf(t, a.cli, b.prefix, "a"))); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-a.lost:
		if !errors.Is(cause, ErrSessionLost) && !errors.Is(cause, ErrKeyDeleted) {
			t.Fatalf("office lost with cause %v", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a's leader context was not cancelled after its lease was revoked")
	}
	_, oc := waitOffice(t, c, a)
	if oc.Candidate.Name != "c" && oc.Term <= oa.Term {
		t.Fatalf("unexpected office %+v", oc)
	}

	// a's office refuses to write: not trusted any more.
	err := b.fence.InTx(ctx, oa, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE public.guarded SET v = 2`)
		return err
	})
	if !errors.Is(err, ErrNotTrusted) {
		t.Fatalf("write by a revoked master: %v, want ErrNotTrusted", err)
	}
	// Even a master that has not noticed (paused process: its local checks
	// still pass) is stopped by the term in the database.
	unaware := &Office{Term: oa.Term, Candidate: oa.Candidate, ctx: context.Background(), trusted: func() error { return nil }}
	err = b.fence.InTx(ctx, unaware, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE public.guarded SET v = 3`)
		return err
	})
	if !errors.Is(err, ErrDeposed) {
		t.Fatalf("write by a deposed, unaware master: %v, want ErrDeposed", err)
	}
	var v int
	if err := b.db.Get(&v, `SELECT v FROM public.guarded`); err != nil || v != 1 {
		t.Fatalf("guarded value %d (%v), want 1: a deposed master wrote", v, err)
	}
	if err := b.fence.TakeOffice(ctx, unaware, b.setMaster(ctx, unaware)); !errors.Is(err, ErrDeposed) {
		t.Fatalf("TakeOffice with an old term: %v, want ErrDeposed", err)
	}
}

// leaseOf finds the lease of a candidate's key.
func leaseOf(t *testing.T, cli *clientv3.Client, prefix, name string) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), ElectionPrefix(prefix), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if strings.Contains(string(kv.Value), `"name":"`+name+`"`) {
			return kv.Lease
		}
	}
	t.Fatalf("no election key of %s", name)
	return 0
}

func TestDeletedLeaderKeyEndsOffice(t *testing.T) {
	b := setup(t)
	a := b.start(t, "a")
	waitOffice(t, a)
	resp, err := a.cli.Get(context.Background(), ElectionPrefix(b.prefix), clientv3.WithFirstCreate()...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.cli.Delete(context.Background(), string(resp.Kvs[0].Key)); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-a.lost:
		if !errors.Is(cause, ErrKeyDeleted) {
			t.Fatalf("cause %v, want ErrKeyDeleted", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("office not ended after its key was deleted")
	}
	// It campaigns again and takes a new, higher term.
	_, o := waitOffice(t, a)
	if o.Term <= resp.Kvs[0].CreateRevision {
		t.Fatalf("new term %d not above %d", o.Term, resp.Kvs[0].CreateRevision)
	}
}

func TestGateWithdrawsTrust(t *testing.T) {
	b := setup(t)
	a := b.start(t, "a")
	_, o := waitOffice(t, a)
	if err := o.Trusted(); err != nil {
		t.Fatalf("fresh office not trusted: %v", err)
	}
	sick := errors.New("own heartbeat failing")
	a.gate.Store(&sick)
	err := b.fence.InTx(context.Background(), o, func(*Tx) error { return nil })
	if !errors.Is(err, ErrNotTrusted) {
		t.Fatalf("write with a failing gate: %v, want ErrNotTrusted", err)
	}
	a.gate.Store(nil)
	if err := o.Trusted(); err != nil {
		t.Fatalf("trust not back with a healthy gate: %v", err)
	}

	// AwaitTrusted: an operator's command waits for the gate to pass
	// again, within its bound; past it, it gets the refusal.
	a.gate.Store(&sick)
	if err := o.AwaitTrusted(context.Background(), 50*time.Millisecond); !errors.Is(err, ErrNotTrusted) {
		t.Fatalf("awaiting trust with the gate failing: %v, want ErrNotTrusted", err)
	}
	healed := make(chan struct{})
	go func() {
		defer close(healed)
		<-time.After(200 * time.Millisecond) // the next heartbeat, late
		a.gate.Store(nil)
	}()
	if err := o.AwaitTrusted(context.Background(), 10*time.Second); err != nil {
		t.Fatalf("awaiting trust while the gate heals: %v", err)
	}
	<-healed
}

// TestTakeOfficeWaitsForFencedWrite: a new term cannot be recorded while
// an old-term transaction is open, and that transaction cannot commit
// after.
func TestTakeOfficeWaitsForFencedWrite(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	a := b.start(t, "a")
	_, oa := waitOffice(t, a)
	newer := &Office{Term: oa.Term + 1000, Candidate: Candidate{Name: "z", Incarnation: uuid.NewString()}, ctx: ctx, trusted: func() error { return nil }}

	inside := make(chan int) // the backend pid of the fenced transaction
	release := make(chan struct{})
	writeDone := make(chan error, 1)
	go func() {
		writeDone <- b.fence.InTx(ctx, oa, func(tx *Tx) error {
			var pid int
			if err := tx.GetContext(ctx, &pid, `SELECT pg_backend_pid()`); err != nil {
				return err
			}
			inside <- pid
			<-release
			return nil
		})
	}()
	var holder int
	select {
	case holder = <-inside:
	case err := <-writeDone:
		t.Fatalf("fenced transaction: %v", err)
	}
	taken := make(chan error, 1)
	go func() { taken <- b.fence.TakeOffice(ctx, newer, b.setMaster(ctx, newer)) }()
	// The signal that TakeOffice waits: PostgreSQL shows a backend of this
	// database blocked by the fenced transaction's, and TakeOffice has not
	// returned.
	testkit.Eventually(t, 10*time.Second, "TakeOffice blocked by the open fenced transaction", func() (bool, error) {
		select {
		case err := <-taken:
			t.Fatalf("TakeOffice did not wait for the open fenced transaction: %v", err)
		default:
		}
		var blocked bool
		err := b.db.Get(&blocked, `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE datname = current_database() AND $1 = ANY(pg_blocking_pids(pid)))`, holder)
		return blocked, err
	})
	select {
	case err := <-taken:
		t.Fatalf("TakeOffice returned while blocked: %v", err)
	default:
	}
	close(release)
	if err := <-writeDone; err != nil {
		t.Fatalf("old-term write that started first: %v", err)
	}
	if err := <-taken; err != nil {
		t.Fatal(err)
	}
	cur, err := b.fence.Current(ctx)
	if err != nil || cur.Term != newer.Term || cur.Node != "z" {
		t.Fatalf("recorded term %+v, %v", cur, err)
	}
}

// TestElectionKeyLayout: the candidate key is "<prefix>leader/<lease hex>"
// (etcd's concurrency.Election layout, no double slash), held by the lease.
func TestElectionKeyLayout(t *testing.T) {
	b := setup(t)
	a := b.start(t, "a")
	waitOffice(t, a)
	resp, err := a.cli.Get(context.Background(), b.prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("keys under %s: %d, want 1", b.prefix, len(resp.Kvs))
	}
	kv := resp.Kvs[0]
	if want := fmt.Sprintf("%sleader/%x", b.prefix, kv.Lease); string(kv.Key) != want || strings.Contains(string(kv.Key), "//") {
		t.Fatalf("election key %q, want %q", kv.Key, want)
	}
}

// TestTakeOfficeEndsStalledFencedWrite: the fenced transaction of a master
// whose process stopped mid-way (idle in transaction, holding the term row)
// does not hold the next master off until PostgreSQL's idle timeout: it is
// ended, its old-term write rolled back, and the new term recorded within a
// few seconds.
func TestTakeOfficeEndsStalledFencedWrite(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	a := b.start(t, "a")
	_, oa := waitOffice(t, a)
	newer := &Office{Term: oa.Term + 1000, Candidate: Candidate{Name: "z", Incarnation: uuid.NewString()}, ctx: ctx, trusted: func() error { return nil }}

	inside := make(chan struct{})
	stalled := make(chan struct{}) // never closed while the test waits: the process is "stopped"
	writeDone := make(chan error, 1)
	go func() {
		writeDone <- b.fence.InTx(ctx, oa, func(tx *Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO enginehealth.events (kind, actor, reason) VALUES ('test', 'old-term', 'stalled write')`); err != nil {
				return err
			}
			close(inside)
			<-stalled
			return nil
		})
	}()
	<-inside
	start := time.Now()
	if err := b.fence.TakeOffice(ctx, newer, b.setMaster(ctx, newer)); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	close(stalled)
	if err := <-writeDone; err == nil {
		t.Fatal("the stalled old-term write committed after the new term was recorded")
	}
	var n int
	if err := b.db.Get(&n, `SELECT count(*) FROM enginehealth.events WHERE actor = 'old-term'`); err != nil || n != 0 {
		t.Fatalf("%d old-term events (%v): the stalled write was not rolled back", n, err)
	}
	if took > 10*time.Second {
		t.Fatalf("TakeOffice took %s behind a stalled transaction", took)
	}
	t.Logf("TakeOffice ended the stalled transaction after %s", took.Round(time.Millisecond))
}

// TestLostTermIsTakenAgain: when the database loses the recorded term (it
// failed over to a replica that had not received it), the office's next
// fenced write is refused, the office ends saying why, and the next
// election records a term again, so fenced writes go on under it.
func TestLostTermIsTakenAgain(t *testing.T) {
	b := setup(t)
	c := b.start(t, "a")
	_, o := waitOffice(t, c)
	ctx := context.Background()
	// What the replica had: the term before this office's.
	if _, err := b.db.Exec(`UPDATE enginehealth.leader_term SET term = $1 - 1, node = 'old'`, o.Term); err != nil {
		t.Fatal(err)
	}
	err := b.fence.InTx(ctx, o, func(*Tx) error { return nil })
	if !errors.Is(err, ErrDeposed) || !strings.Contains(err.Error(), "the database lost our term") {
		t.Fatalf("fenced write after the term was lost: %v; want ErrDeposed saying the term was lost", err)
	}
	select {
	case cause := <-c.lost:
		if !strings.Contains(cause.Error(), "lost our term") {
			t.Errorf("office ended with %v", cause)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the office did not end")
	}
	_, o2 := waitOffice(t, c)
	if o2.Term <= o.Term {
		t.Fatalf("new office's term %d, not above the lost one %d", o2.Term, o.Term)
	}
	testkit.Eventually(t, 15*time.Second, "the new office acts", func() (bool, error) { return o2.Trusted() == nil, nil })
	if err := b.fence.InTx(ctx, o2, func(*Tx) error { return nil }); err != nil {
		t.Fatalf("fenced write under the term taken again: %v", err)
	}
	cur, err := b.fence.Current(ctx)
	if err != nil || cur.Term != o2.Term || cur.Node != "a" {
		t.Fatalf("recorded term %+v, %v; want %d of a", cur, err, o2.Term)
	}
}
