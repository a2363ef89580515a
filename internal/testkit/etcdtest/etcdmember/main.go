// Command etcdmember runs one member of a test etcd cluster in its own
// process (go.etcd.io/etcd/server/v3/embed, the client's version), so tests
// can freeze it with SIGSTOP or kill it with SIGKILL, as a stalled disk, a
// hung VM or a crash would. Test-only: see etcdtest.StartCluster.
//
// It prints "ready" on stdout once it serves clients, and stops on SIGTERM.
//
// With -cert-file and -key-file it serves clients over TLS only (the
// client URL is https); with -trusted-ca-file as well it accepts only
// clients with a certificate that CA signed (etcd's --client-cert-auth
// --trusted-ca-file). Peers talk plain http.
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

// options are the command's flags.
type options struct {
	name, dir, client, peer, initial, state string
	tickMs, electionMs                      uint
	logFile                                 string
	certFile, keyFile, trustedCAFile        string
}

func main() {
	var o options
	flag.StringVar(&o.name, "name", "", "member name")
	flag.StringVar(&o.dir, "dir", "", "data directory")
	flag.StringVar(&o.client, "client", "", "client URL, http://127.0.0.1:PORT (https:// with -cert-file)")
	flag.StringVar(&o.peer, "peer", "", "peer URL, http://127.0.0.1:PORT")
	flag.StringVar(&o.initial, "initial-cluster", "", "name=peerURL,...")
	flag.StringVar(&o.state, "state", "new", "initial cluster state: new or existing")
	flag.UintVar(&o.tickMs, "tick-ms", 100, "heartbeat interval (etcd's default 100)")
	flag.UintVar(&o.electionMs, "election-ms", 1000, "election timeout (etcd's default 1000)")
	flag.StringVar(&o.logFile, "log", "", "append etcd's own log (JSON, info and above) to this file; none when empty")
	flag.StringVar(&o.certFile, "cert-file", "", "server certificate for clients (PEM); clients then speak TLS only")
	flag.StringVar(&o.keyFile, "key-file", "", "key of -cert-file (PEM)")
	flag.StringVar(&o.trustedCAFile, "trusted-ca-file", "", "with -cert-file: accept only clients with a certificate this CA signed (client-cert-auth)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "etcdmember:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	cu, err := url.Parse(o.client)
	if err != nil {
		return err
	}
	pu, err := url.Parse(o.peer)
	if err != nil {
		return err
	}
	cfg := embed.NewConfig()
	cfg.Name = o.name
	cfg.Dir = o.dir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = o.initial
	cfg.ClusterState = o.state
	cfg.InitialClusterToken = "enginehealth-test"
	cfg.UnsafeNoFsync = true
	cfg.TickMs = o.tickMs
	cfg.ElectionMs = o.electionMs
	// The cheapest password hashing etcd allows: a test authenticates
	// often, and the default cost takes ~100 ms of CPU each time.
	cfg.BcryptCost = 4
	cfg.ClientTLSInfo.CertFile = o.certFile
	cfg.ClientTLSInfo.KeyFile = o.keyFile
	cfg.ClientTLSInfo.TrustedCAFile = o.trustedCAFile
	cfg.ClientTLSInfo.ClientCertAuth = o.trustedCAFile != ""
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	if o.logFile != "" {
		// Leader changes, lease revocations and slow applies: what a test
		// that fails under faults needs to read.
		cfg.Logger = "zap"
		cfg.LogOutputs = []string{o.logFile}
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
