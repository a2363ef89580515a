package leader

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/faultproxy"
)

// TestRevokeLeaseOfGoneHolder: what `enginehealth release-lease` does for
// a master whose process died. The elector reports each lease it is
// granted (OnLease) before its key exists under it. The master here is
// cut from etcd, as a dead process is silent, and its lease, the one
// OnLease reported, is revoked with RevokeLease: the standby takes office
// at once (long before the TTL), but acts only once the old holder's
// window surely closed, since nothing says that the holder stopped
// acting (no resignation marker is written for it). A second revocation
// finds the lease gone: no error, nothing revoked. Back in touch, the old
// master learns its lease is gone and is granted a new one, reported
// again.
func TestRevokeLeaseOfGoneHolder(t *testing.T) {
	b := setup(t)
	proxy := faultproxy.New(t, etcd.Endpoint)
	a := b.startBehind(t, "a", proxy)
	_, oa := waitOffice(t, a)
	var lease clientv3.LeaseID
	select {
	case lease = <-a.leases:
	default:
		t.Fatal("the master took office on a lease OnLease did not report")
	}
	if got := clientv3.LeaseID(leaseOf(t, newClient(t), b.prefix, "a")); got != lease {
		t.Fatalf("OnLease reported lease %x, the election key is under %x", int64(lease), int64(got))
	}
	c := b.startWith(t, "c", newClient(t), 3*time.Second, time.Second)
	pause(c.elector.window()) // a standby of a cluster that runs (see TestOneMasterAndGracefulHandover)
	waitRenewal(t, oa)
	if err := proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	cli := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	revokedAt := time.Now()
	if revoked, err := RevokeLease(ctx, cli, lease, time.Second, nil); !revoked || err != nil {
		t.Fatalf("RevokeLease of the master's lease: revoked %v, %v", revoked, err)
	}
	_, oc := waitOffice(t, c)
	if took := time.Since(revokedAt); took > time.Second {
		t.Fatalf("the standby took office %s after the revocation, want at once", took)
	}
	if until := oa.TrustedUntil(); oc.ActingFrom().Before(until) {
		t.Fatalf("the new master may act from %s, while the old one may trust its window until %s",
			oc.ActingFrom().Format("15:04:05.000"), until.Format("15:04:05.000"))
	}
	if revoked, err := RevokeLease(ctx, cli, lease, time.Second, nil); revoked || err != nil {
		t.Fatalf("RevokeLease of a lease gone: revoked %v, %v; want false, nil", revoked, err)
	}
	testkit.Eventually(t, 5*time.Second, "the new master acting", func() (bool, error) {
		return oc.Trusted() == nil, nil
	})

	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	select {
	case next := <-a.leases:
		if next == lease {
			t.Fatalf("the old master reported lease %x again", int64(lease))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the old master, back in touch with etcd, reported no new lease")
	}
}
