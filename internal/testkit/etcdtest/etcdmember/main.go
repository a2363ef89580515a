// Command etcdmember runs one member of a test etcd cluster in its own
// process (go.etcd.io/etcd/server/v3/embed, the client's version), so tests
// can freeze it with SIGSTOP or kill it with SIGKILL, as a stalled disk, a
// hung VM or a crash would. Test-only: see etcdtest.StartCluster.
//
// It prints "ready" on stdout once it serves clients, and stops on SIGTERM.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

func main() {
	var (
		name       = flag.String("name", "", "member name")
		dir        = flag.String("dir", "", "data directory")
		client     = flag.String("client", "", "client URL, http://127.0.0.1:PORT")
		peer       = flag.String("peer", "", "peer URL, http://127.0.0.1:PORT")
		initial    = flag.String("initial-cluster", "", "name=peerURL,...")
		state      = flag.String("state", "new", "initial cluster state: new or existing")
		tickMs     = flag.Uint("tick-ms", 100, "heartbeat interval (etcd's default 100)")
		electionMs = flag.Uint("election-ms", 1000, "election timeout (etcd's default 1000)")
		logFile    = flag.String("log", "", "append etcd's own log (JSON, info and above) to this file; none when empty")
	)
	flag.Parse()
	if err := run(*name, *dir, *client, *peer, *initial, *state, *tickMs, *electionMs, *logFile); err != nil {
		fmt.Fprintln(os.Stderr, "etcdmember:", err)
		os.Exit(1)
	}
}

func run(name, dir, client, peer, initial, state string, tickMs, electionMs uint, logFile string) error {
	cu, err := url.Parse(client)
	if err != nil {
		return err
	}
	pu, err := url.Parse(peer)
	if err != nil {
		return err
	}
	cfg := embed.NewConfig()
	cfg.Name = name
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = initial
	cfg.ClusterState = state
	cfg.InitialClusterToken = "enginehealth-test"
	cfg.UnsafeNoFsync = true
	cfg.TickMs = tickMs
	cfg.ElectionMs = electionMs
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	if logFile != "" {
		// Leader changes, lease revocations and slow applies: what a test
		// that fails under faults needs to read.
		cfg.Logger = "zap"
		cfg.LogOutputs = []string{logFile}
		cfg.LogLevel = "info"
		cfg.ZapLoggerBuilder = nil
	}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("ready")
	case err := <-e.Err():
		return err
	case <-sig:
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("not ready after a minute")
	}
	select {
	case err := <-e.Err():
		return err
	case <-sig:
		return nil
	}
}
