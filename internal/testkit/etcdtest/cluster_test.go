package etcdtest

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/testca"
)

var member string // the etcdmember binary

func TestMain(m *testing.M) {
	testkit.Main(m, func(m *testing.M) int {
		dir, err := os.MkdirTemp("", "ehmember-")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		if member, err = BuildMember(dir); err != nil {
			panic(err)
		}
		return m.Run()
	})
}

// TestClusterFaults: the harness freezes, thaws, kills and restarts member
// processes, and the remaining members elect a new raft leader.
func TestClusterFaults(t *testing.T) {
	c, err := StartCluster(ClusterConfig{Binary: member})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Freeze(); err != nil {
		t.Fatal(err)
	}
	if old.Running() {
		t.Fatal("a frozen member counts as running")
	}
	// The two others elect a leader among themselves.
	var next *Member
	for next == nil || next == old {
		if ctx.Err() != nil {
			t.Fatal("no new raft leader while the old one is frozen")
		}
		next, _ = c.Leader(ctx)
	}
	if err := old.Thaw(); err != nil {
		t.Fatal(err)
	}
	killAndRestart(ctx, t, c, next)
}

// killAndRestart kills m, waits until the others are healthy, restarts
// it and waits until all are.
func killAndRestart(ctx context.Context, t *testing.T, c *Cluster, m *Member) {
	t.Helper()
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	if m.Running() {
		t.Fatal("a killed member counts as running")
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("two of three members: %v", err)
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

// TestTLSAuthCluster: members that serve clients over TLS with
// client-cert-auth and etcd auth on; the harness's own helpers (Leader,
// WaitHealthy, Restart) work against them, a user reaches its prefix and
// only it, and a client without a certificate of the CA, or without
// credentials and a certificate naming a user, gets nothing.
func TestTLSAuthCluster(t *testing.T) {
	ca, err := testca.New(t.TempDir(), "kit-ca")
	if err != nil {
		t.Fatal(err)
	}
	c, err := StartCluster(ClusterConfig{Binary: member, CA: ca,
		Auth: &Auth{RootPassword: "root-pw", Users: []User{{Name: "eh", Password: "eh-pw", Prefix: "/eh/"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue("eh", testca.Options{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := testca.New(t.TempDir(), "stranger-ca")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := stranger.Issue("eh", testca.Options{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	try := func(tc *tls.Config, user, password, key string) error {
		cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), TLS: tc, Username: user, Password: password,
			DialTimeout: 500 * time.Millisecond, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		defer cli.Close()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err = cli.Put(rctx, key, "x")
		return err
	}
	withCert := func(is *testca.Issued) *tls.Config {
		return &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{is.TLS}}
	}
	if err := try(withCert(cert), "eh", "eh-pw", "/eh/k"); err != nil {
		t.Fatalf("the user on its prefix: %v", err)
	}
	if err := try(withCert(cert), "eh", "eh-pw", "/other/k"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("the user outside its prefix: %v, want permission denied", err)
	}
	if err := try(withCert(cert), "eh", "wrong", "/eh/k"); !errors.Is(err, rpctypes.ErrAuthFailed) {
		t.Fatalf("a wrong password: %v, want authentication failed", err)
	}
	// Without credentials, etcd takes the certificate's CN as the user.
	if err := try(withCert(cert), "", "", "/eh/k"); err != nil {
		t.Fatalf("a certificate whose CN is the user, without a password: %v", err)
	}
	nobody, err := ca.Issue("nobody", testca.Options{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := try(withCert(nobody), "", "", "/eh/k"); err == nil {
		t.Fatal("a certificate whose CN is no user, without credentials, wrote")
	}
	if err := try(&tls.Config{RootCAs: ca.Pool()}, "eh", "eh-pw", "/eh/k"); err == nil {
		t.Fatal("a client without a certificate wrote")
	}
	if err := try(withCert(foreign), "eh", "eh-pw", "/eh/k"); err == nil {
		t.Fatal("a client with a certificate of another CA wrote")
	}
	if err := try(nil, "eh", "eh-pw", "/eh/k"); err == nil {
		t.Fatal("a plain-text client wrote")
	}

	// A killed member restarts with its TLS flags.
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killAndRestart(ctx, t, c, lead)
}

// TestClusterReplace: each member of three is replaced in turn (member
// remove, its process gone, member add of a new one on new ports started
// with initial-cluster-state existing), the raft leader included; what
// was written before is read after from the new members only, and none
// of the original client addresses accepts a connection. A learner added
// and never started leaves the cluster healthy and is removed.
func TestClusterReplace(t *testing.T) {
	c, err := StartCluster(ClusterConfig{Binary: member})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "kept", "yes"); err != nil {
		t.Fatal(err)
	}
	learner, err := c.AddLearner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("with a learner never started: %v", err)
	}
	if err := c.RemoveID(ctx, learner); err != nil {
		t.Fatal(err)
	}
	original := slices.Clone(c.Members)
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The raft leader last: the two others first.
	isLead := func(m *Member) int {
		if m == lead {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(original, func(a, b *Member) int { return cmp.Compare(isLead(a), isLead(b)) })
	names := map[string]bool{}
	for _, m := range original {
		names[m.Name] = true
		next, err := c.Replace(ctx, m)
		if err != nil {
			t.Fatalf("replace %s: %v", m.Name, err)
		}
		if names[next.Name] || m.Running() || len(c.Members) != 3 {
			t.Fatalf("replaced %s by %s: running %v, %d members", m.Name, next.Name, m.Running(), len(c.Members))
		}
		names[next.Name] = true
	}
	for _, m := range original {
		if conn, err := net.DialTimeout("tcp", m.Endpoint(), time.Second); err == nil {
			conn.Close()
			t.Fatalf("%s's address %s still accepts connections", m.Name, m.Endpoint())
		}
	}
	fresh, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	resp, err := fresh.Get(ctx, "kept")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "yes" {
		t.Fatalf("the key written before, read from the new members: %v %v", resp, err)
	}
	ml, err := fresh.MemberList(ctx)
	if err != nil || len(ml.Members) != 3 {
		t.Fatalf("member list: %v %v", ml, err)
	}
}
