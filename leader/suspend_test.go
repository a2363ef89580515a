package leader

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/faultproxy"
)

// startBehind runs candidate name whose etcd client reaches etcd only
// through proxy.
func (b bundle) startBehind(t *testing.T, name string, proxy *faultproxy.Proxy) *candidate {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{proxy.Addr}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return b.startWith(t, name, cli, 3*time.Second, time.Second)
}

// waitRenewal waits until o's trust window moves on (a keep-alive was
// answered) and returns when that happened.
func waitRenewal(t *testing.T, o *Office) time.Time {
	t.Helper()
	before := o.TrustedUntil()
	testkit.Eventually(t, 5*time.Second, "a keep-alive answered", func() (bool, error) {
		return o.TrustedUntil().After(before), nil
	})
	return time.Now()
}

// TestSuspendedOfficeResumesInSameTerm: keep-alives that go unanswered for
// longer than the trust window but shorter than the TTL suspend the office
// (it may not act), and the office acts again, in the same term, when they
// are answered again: the lease never expired, so nobody else could lead.
func TestSuspendedOfficeResumesInSameTerm(t *testing.T) {
	b := setup(t)
	proxy := faultproxy.New(t, etcd.Endpoint)
	a := b.startBehind(t, "a", proxy)
	_, o := waitOffice(t, a)
	renewed := waitRenewal(t, o)
	if err := proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	// Trust window: TTL 3s − margin 1s after the last answered keep-alive.
	testkit.Eventually(t, 3*time.Second, "the office suspended", func() (bool, error) {
		return errors.Is(o.Trusted(), ErrNotTrusted), nil
	})
	if took := time.Since(renewed); took > 2500*time.Millisecond {
		t.Fatalf("suspended only %s after the last keep-alive (trust window 2s)", took)
	}
	select {
	case <-o.Done():
		t.Fatalf("a suspended office ended: %v", context.Cause(o.ctx))
	default:
	}
	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the office acting again", func() (bool, error) {
		return o.Trusted() == nil, o.Trusted()
	})
	if cur := a.elector.Office(); cur != o {
		t.Fatalf("a new office (%+v) instead of the suspended one (term %d)", cur, o.Term)
	}
	select {
	case cause := <-a.lost:
		t.Fatalf("office lost: %v", cause)
	default:
	}
}

// TestOfficeEndsWhenLeaseExpiresBehindPartition: cut off for longer than
// the TTL, the master's lease expires; when the path returns, etcd says so
// and the office ends; the node campaigns again and takes a new term.
func TestOfficeEndsWhenLeaseExpiresBehindPartition(t *testing.T) {
	b := setup(t)
	proxy := faultproxy.New(t, etcd.Endpoint)
	a := b.startBehind(t, "a", proxy)
	_, o := waitOffice(t, a)
	waitRenewal(t, o)
	if err := proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	// Wait until etcd itself expired the lease (no election key left).
	direct := newClient(t)
	testkit.Eventually(t, 10*time.Second, "the lease expired in etcd", func() (bool, error) {
		resp, err := direct.Get(context.Background(), ElectionPrefix(b.prefix), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 0, err
	})
	if err := o.Trusted(); !errors.Is(err, ErrNotTrusted) {
		t.Fatalf("office trusted after its lease expired: %v", err)
	}
	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-a.lost:
		// Whichever the node learns first: the lease is gone, or the key.
		if !errors.Is(cause, ErrSessionLost) && !errors.Is(cause, ErrKeyDeleted) {
			t.Fatalf("office ended with %v, want ErrSessionLost or ErrKeyDeleted", cause)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the office did not end after etcd answered that its lease is gone")
	}
	_, o2 := waitOffice(t, a)
	if o2.Term <= o.Term {
		t.Fatalf("new term %d not above %d", o2.Term, o.Term)
	}
}
