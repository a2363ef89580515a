package leader

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/faultproxy"
)

// Modes of a deposedMember.
const (
	passThrough int32 = iota
	unanswered        // keep-alives time out (the member is frozen)
	deposed           // keep-alives are answered by a deposed raft leader
)

// deposedMember stands between a client and its etcd lease API and plays
// what the fault suite saw on a busy host: an etcd raft leader frozen
// while the other members elected a new one, thawed, and still answering
// keep-alives for a while in its old raft term (etcd renews leases in the
// leader's memory; a deposed leader that has not yet heard of its
// successor renews its own copy, which nobody reads, and answers "renewed").
// The real lease, on the real leader, is not renewed and expires.
type deposedMember struct {
	clientv3.Lease
	mode atomic.Int32
	// term: the raft term the deposed leader answers in (older than the
	// term reads see).
	term uint64
}

// deposedClient returns a client whose keep-alives go through a
// deposedMember (passing through until its mode changes).
func deposedClient(t *testing.T) (*clientv3.Client, *deposedMember) {
	t.Helper()
	cli := newClient(t)
	resp, err := cli.Get(context.Background(), "term")
	if err != nil {
		t.Fatal(err)
	}
	member := &deposedMember{Lease: cli.Lease, term: resp.Header.RaftTerm - 1}
	cli.Lease = member
	return cli, member
}

func (d *deposedMember) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	switch d.mode.Load() {
	case unanswered:
		<-ctx.Done()
		return nil, ctx.Err()
	case deposed:
		return &clientv3.LeaseKeepAliveResponse{
			ResponseHeader: &etcdserverpb.ResponseHeader{MemberId: 0xdead, RaftTerm: d.term},
			ID:             id, TTL: 3,
		}, nil
	}
	return d.Lease.KeepAliveOnce(ctx, id)
}

// TestDeposedEtcdLeaderCannotExtendTrust replays the violation of the
// fault run (two masters acting at once for 250 ms): the master's
// keep-alives time out for a second, then are answered again, but by a
// deposed etcd leader in its old raft term, so its lease is not renewed
// and expires; another node is elected. The old master must have stopped
// acting before the new one starts: a keep-alive counts only when a
// linearizable read after it sees the same raft term.
func TestDeposedEtcdLeaderCannotExtendTrust(t *testing.T) {
	b := setup(t)
	cli, member := deposedClient(t)
	// The fault run's timings: TTL 3 s, trust margin 1 s.
	a := b.startWith(t, "a", cli, 3*time.Second, time.Second)
	_, oa := waitOffice(t, a)
	c := b.startWith(t, "c", newClient(t), 3*time.Second, time.Second)
	waitRenewal(t, oa)

	// A burst of timed-out keep-alives (1.1 s, as in the run), then answers
	// from the deposed leader.
	member.mode.Store(unanswered)
	pause(1100 * time.Millisecond)
	member.mode.Store(deposed)
	lastReal := oa.TrustedUntil()

	_, oc := waitOffice(t, c)
	started := c.started.Load()
	if started == nil {
		t.Fatal("c's office has no start time")
	}
	// It acts from when its office began, or later if it waits out an
	// earlier holder's window (see TestNewMasterWaitsOutRevokedHolder):
	// once it does, the old one must have stopped, for good.
	acts := later(*started, oc.ActingFrom())
	started = &acts
	testkit.Eventually(t, 10*time.Second, "the new master acting", func() (bool, error) {
		return oc.Trusted() == nil, nil
	})
	if until := oa.TrustedUntil(); !until.Before(*started) {
		t.Fatalf("two masters acting at once: a's trust window runs until %s, c acts from %s (term %d after %d); the deposed etcd leader's answers extended it from %s",
			until.Format("15:04:05.000"), started.Format("15:04:05.000"), oc.Term, oa.Term, lastReal.Format("15:04:05.000"))
	}
	// Nor did they move it at all: what keeps the two apart above is then
	// no race between a noticing its key gone and c's wait (the wait
	// covers windows that a counted before its key went, not after).
	if until := oa.TrustedUntil(); !until.Equal(lastReal) {
		t.Fatalf("two masters acting at once, as soon as a new master acts before %s: the deposed etcd leader's answers moved a's trust window from %s",
			until.Format("15:04:05.000"), lastReal.Format("15:04:05.000"))
	}
	if err := oa.Trusted(); !errors.Is(err, ErrNotTrusted) {
		t.Fatalf("old office trusted after a new one took office: %v", err)
	}
	// Its lease is gone: the office ends (not only suspended).
	select {
	case cause := <-a.lost:
		if !errors.Is(cause, ErrKeyDeleted) && !errors.Is(cause, ErrSessionLost) && !errors.Is(cause, ErrDeposed) {
			t.Fatalf("a's office ended with %v", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a's office did not end after its lease expired")
	}
}

// TestOfficeEndsWhenItLearnsOfNewerTerm: a master that finds a newer term
// recorded (its fenced transaction refused, or a read of the term
// elsewhere in the node) stops acting at once, not when its trust window
// closes.
func TestOfficeEndsWhenItLearnsOfNewerTerm(t *testing.T) {
	for _, how := range []string{"fenced transaction", "term read"} {
		t.Run(how, func(t *testing.T) {
			b := setup(t)
			ctx := context.Background()
			a := b.start(t, "a")
			_, oa := waitOffice(t, a)
			if _, err := b.db.Exec(`UPDATE enginehealth.leader_term SET term = $1, node = 'z'`, oa.Term+1); err != nil {
				t.Fatal(err)
			}
			if err := oa.Trusted(); err != nil {
				t.Fatalf("office not trusted before it learned of the newer term: %v", err)
			}
			switch how {
			case "fenced transaction":
				if err := b.fence.InTx(ctx, oa, func(*Tx) error { return nil }); !errors.Is(err, ErrDeposed) {
					t.Fatalf("fenced transaction under a newer term: %v, want ErrDeposed", err)
				}
			case "term read":
				f := testkit.Must(NewFence(FenceConfig{DB: b.db, Schema: "enginehealth", Events: audit.New("enginehealth"), OnTerm: a.elector.ObserveTerm}))
				if _, err := f.Current(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// At once: no wait for a window or a poll.
			if err := oa.Trusted(); !errors.Is(err, ErrNotTrusted) {
				t.Fatalf("office still trusted after it learned of term %d: %v", oa.Term+1, err)
			}
			select {
			case <-oa.Done():
			default:
				t.Fatal("office not ended")
			}
			if cause := context.Cause(oa.ctx); !errors.Is(cause, ErrDeposed) {
				t.Fatalf("office ended with %v, want ErrDeposed", cause)
			}
			// An older or equal term recorded changes nothing.
			a.elector.ObserveTerm(0)
		})
	}
}

// TestUnconfirmedKeepAlivesSuspendOffice: while every keep-alive answer
// comes from a deposed etcd leader, the office is suspended once its
// window closes (nothing renews it), and acts again, in the same term,
// when real answers return before the lease expired.
func TestUnconfirmedKeepAlivesSuspendOffice(t *testing.T) {
	b := setup(t)
	cli, member := deposedClient(t)
	// A wide margin (suspended 2 s after the last renewal, expired after
	// 4 s) leaves a busy machine time to resume before the lease expires.
	a := b.startWith(t, "a", cli, 4*time.Second, 2*time.Second)
	_, oa := waitOffice(t, a)
	waitRenewal(t, oa)
	member.mode.Store(deposed)
	testkit.Eventually(t, 3*time.Second, "the office suspended", func() (bool, error) {
		return errors.Is(oa.Trusted(), ErrNotTrusted), nil
	})
	member.mode.Store(passThrough)
	testkit.Eventually(t, 3*time.Second, "the office acting again", func() (bool, error) {
		return oa.Trusted() == nil, nil
	})
	select {
	case <-oa.Done():
		t.Fatalf("office ended: %v", context.Cause(oa.ctx))
	default:
	}
}

// pause waits d: how long a fault lasts, not a condition.
func pause(d time.Duration) { <-time.After(d) }

// TestNewMasterWaitsOutRevokedHolder: the other way a busy host broke the
// promise. A deposed etcd leader that has not heard of its successor
// finds, in its stale copy, leases it thinks expired and revokes them; the
// revocation is forwarded to the real leader and applied, so a lease goes
// a second or more before the TTL after keep-alives the real leader did
// renew (seen in make faults STARVE=busy: node-b's confirmed keep-alive
// sent at 22:02:19.768, its lease gone by 19.83, node-a elected at 19.83).
// Here the lease is revoked right after a confirmed keep-alive, as that
// revocation would, while the old master hears nothing from etcd (its
// host starved): it cannot know its lease is gone, so it trusts its window
// to the end. The new master takes office at once (fencing the old one's
// writes) but acts only once that window has closed.
//
// (Were the old master to hear of it, it would end its office and mark
// its lease resigned, and the new one need not wait: see
// TestHolderThatLearnsItsLeaseIsGoneMarksIt. This test once failed under
// load for that reason: the old master noticed the revocation before the
// new one read the markers.)
func TestNewMasterWaitsOutRevokedHolder(t *testing.T) {
	b := setup(t)
	proxy := faultproxy.New(t, etcd.Endpoint)
	a := b.startBehind(t, "a", proxy)
	_, oa := waitOffice(t, a)
	c := b.startWith(t, "c", newClient(t), 3*time.Second, time.Second)
	waitRenewal(t, oa)
	if err := proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	// A few hundred ms in: the old master's window still runs ~1.7 s.
	if _, err := c.cli.Revoke(context.Background(), clientv3.LeaseID(leaseOf(t, c.cli, b.prefix, "a"))); err != nil {
		t.Fatal(err)
	}
	until := oa.TrustedUntil()
	_, oc := waitOffice(t, c)
	if from := oc.ActingFrom(); from.Before(until) {
		t.Fatalf("the new master may act from %s, while the old one trusts its window until %s",
			from.Format("15:04:05.000"), until.Format("15:04:05.000"))
	}
	if err := oc.Trusted(); err == nil && time.Now().Before(until) {
		t.Fatalf("the new master acts at %s, inside the old one's window (until %s)", time.Now().Format("15:04:05.000"), until.Format("15:04:05.000"))
	}
	// It took office at once: the term is recorded, the old master fenced.
	if cur, err := b.fence.Current(context.Background()); err != nil || cur.Term != oc.Term {
		t.Fatalf("recorded term %+v (%v), want %d: the new master did not take office while it waits", cur, err, oc.Term)
	}
	testkit.Eventually(t, 5*time.Second, "the new master acting", func() (bool, error) {
		return oc.Trusted() == nil, nil
	})
	if err := oa.Trusted(); err == nil {
		t.Fatal("the old master still acts after its window closed")
	}
	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
}

// TestHolderThatLearnsItsLeaseIsGoneMarksIt: a master whose lease is
// revoked under it ends its office when it learns of it, and only then
// marks the lease resigned, so that a successor that reads the marker
// need not wait out a window the old master no longer trusts.
func TestHolderThatLearnsItsLeaseIsGoneMarksIt(t *testing.T) {
	b := setup(t)
	a := b.startWith(t, "a", newClient(t), 3*time.Second, time.Second)
	_, oa := waitOffice(t, a)
	lease := leaseOf(t, a.cli, b.prefix, "a")
	marker := fmt.Sprintf("%s%x", ResignedPrefix(b.prefix), lease)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w := a.cli.Watch(ctx, marker)
	if _, err := a.cli.Revoke(ctx, clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-w:
		if err := resp.Err(); err != nil {
			t.Fatal(err)
		}
		// The marker is written: the office must have ended before.
		select {
		case <-oa.Done():
		default:
			t.Fatal("the lease was marked resigned while its office still lasts")
		}
	case <-ctx.Done():
		t.Fatal("no resignation marker for the revoked lease")
	}
	if cause := oa.Err(); !errors.Is(cause, ErrSessionLost) && !errors.Is(cause, ErrKeyDeleted) {
		t.Fatalf("office ended with %v, want the lease lost or the key deleted", cause)
	}
}
