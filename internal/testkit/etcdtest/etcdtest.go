// Package etcdtest runs an in-process etcd server for tests (and the demo):
// go.etcd.io/etcd/server/v3/embed, pinned to the client's version, on free
// loopback ports, in a temporary directory, without fsync. Import it only
// from tests and demo code: embed is heavy.
package etcdtest

import (
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Etcd is one running member.
type Etcd struct {
	// Endpoint is the client address, host:port.
	Endpoint string

	e   *embed.Etcd
	dir string
}

// Start runs a single-member cluster. Its short tick (50 ms, election
// 500 ms) allows lease TTLs down to 1 s. Close stops it.
func Start() (*Etcd, error) {
	dir, err := os.MkdirTemp("", "ehetcd-")
	if err != nil {
		return nil, err
	}
	// Free ports chosen first, not port 0: the member advertises its
	// URLs, and a client that follows the members (auto-sync) dials them.
	ports, err := freePorts(2)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = dir
	client, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", ports[0]))
	peer, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", ports[1]))
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = true
	cfg.TickMs = 50
	cfg.ElectionMs = 500
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("etcdtest: start: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("etcdtest: %w", err)
	case <-time.After(30 * time.Second):
		e.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("etcdtest: not ready after 30s")
	}
	return &Etcd{Endpoint: e.Clients[0].Addr().String(), e: e, dir: dir}, nil
}

// New runs a member owned by t, stopped in its cleanup.
func New(t testing.TB) *Etcd {
	t.Helper()
	e, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// Dir returns the member's data directory.
func (e *Etcd) Dir() string { return e.dir }

// Close stops the member and removes its data.
func (e *Etcd) Close() {
	e.e.Close()
	_ = os.RemoveAll(e.dir)
}
