package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/infra/tlsfiles"
)

// connectEtcd makes the etcd client and waits until etcd answers a read
// of the prefix. Every failure is retried (etcd may start late, a
// certificate or a user may be fixed meanwhile) and logged with its cause:
// TLS refused either way, etcd authentication or permissions. Once
// connected, it says in one warning which endpoints did not answer
// (warnSeeds). The endpoints are seeds: etcdSync keeps the client's
// endpoints those of the cluster's members (not the client's own
// AutoSyncInterval, which would not dial through the daemon's TLS).
func connectEtcd(ctx context.Context, cfg *configs.Config, log *slog.Logger) (*clientv3.Client, error) {
	ccfg, endpoints, user := etcdClientConfig(ctx, cfg)
	var cli *clientv3.Client
	err := retry(ctx, log, "connect to etcd", cfg.Etcd.DialTimeout, func(ctx context.Context) error {
		if cli == nil {
			// With a user, New authenticates: it fails when etcd cannot
			// be reached, so it is retried like the read.
			c, err := clientv3.New(ccfg)
			if err != nil {
				return explainEtcd(ctx, cfg, endpoints, user, err)
			}
			cli = c
		}
		_, err := cli.Get(ctx, cfg.Etcd.Prefix, clientv3.WithCountOnly())
		return explainEtcd(ctx, cfg, endpoints, user, err)
	})
	if err != nil {
		if cli != nil {
			_ = cli.Close()
		}
		return nil, err
	}
	log.InfoContext(ctx, "connected to etcd", "tls", cfg.Etcd.ClientTLS != nil, "client_certificate", cfg.Etcd.ClientCert != nil, "user", user)
	warnSeeds(ctx, cfg.Etcd, cli, endpoints, ccfg.Endpoints, log)
	return cli, nil
}

// etcdClientConfig is the configuration of the daemon's etcd client for
// cfg, which enginehealth release-lease uses too (the same members, TLS
// and user): the client's, the endpoints as configured (credentials
// taken out) and the user. The client keeps ctx's values, not its end:
// it lives until it is closed.
func etcdClientConfig(ctx context.Context, cfg *configs.Config) (ccfg clientv3.Config, endpoints []string, user string) {
	endpoints, user, password := cfg.Etcd.ClientEndpoints()
	ccfg = clientv3.Config{
		// Every member: the client balances over them and moves on from
		// one that does not answer; each request has its own deadline.
		Endpoints:   endpoints,
		Username:    user,
		Password:    password,
		TLS:         cfg.Etcd.ClientTLS,
		DialTimeout: cfg.Etcd.DialTimeout,
		// Keep-alive probes close a connection to a member that stopped
		// answering (a frozen process keeps its TCP connections open).
		// 10s is gRPC's floor for the probe interval (etcd allows ≥ 5s).
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: min(max(cfg.Etcd.LeaseTTL/3, time.Second), 5*time.Second),
		Logger:               zap.NewNop(),
		Context:              context.WithoutCancel(ctx),
	}
	if cfg.Etcd.TLS != nil {
		// The daemon makes the TLS connections, not the client (which
		// would fix its CAs now): each verifies the members against the
		// CA file's certificates held when it is made, so a reload of
		// etcd.tls.ca_file applies to the next connections.
		ccfg.TLS = nil
		ccfg.Endpoints = dialledByUs(endpoints)
		ccfg.DialOptions = []grpc.DialOption{grpc.WithContextDialer(tlsfiles.GRPCDialer(cfg.Etcd.ClientTLS, cfg.Etcd.CAs))}
	}
	return ccfg, endpoints, user
}

// clusterKey holds, under the etcd prefix, the system_identifier of the
// PostgreSQL cluster the fleet uses, written by its first node.
const clusterKey = "postgres_cluster"

// wrongWitnessError means etcd records another PostgreSQL cluster for the fleet
// than the one behind this node's database address.
type wrongWitnessError struct {
	key             string
	recorded, found int64
	where           string
	// bad is the key's value when it is not a system_identifier.
	bad string
}

func (e *wrongWitnessError) Error() string {
	if e.bad != "" {
		return fmt.Sprintf("etcd key %s holds %q, not a PostgreSQL system_identifier: put the fleet's (SELECT system_identifier FROM pg_control_system()) there, or delete the key for the next node to record its own",
			e.key, e.bad)
	}
	return fmt.Sprintf("database %s: etcd records PostgreSQL cluster %d for this fleet (key %s), but the server at the database's address "+
		"belongs to cluster %d: another cluster is behind the address, so this node stops before it writes anything there. "+
		"If the fleet moved to this cluster on purpose (pg_upgrade, a restore into a new cluster), record it once: etcdctl put %s %d "+
		"(and, for a schema migrated on the old cluster, update its cluster_identity as the database's own check says)",
		e.where, e.recorded, e.key, e.found, e.key, e.found)
}

// witnessCluster compares the PostgreSQL cluster behind the database's
// address (live, its system_identifier) with the one etcd records for the
// fleet, and records it when none is: the first node of a fleet writes it.
// A different one is a *wrongWitnessError. Together with the schema's own
// record (cluster_identity), it catches a server of another cluster
// before anything is written to it, even an empty one, whose schema this
// node would otherwise migrate.
func witnessCluster(ctx context.Context, cli *clientv3.Client, cfg *configs.Config, live int64, log *slog.Logger) error {
	key := cfg.Etcd.Prefix + clusterKey
	value := strconv.FormatInt(live, 10)
	ctx, cancel := context.WithTimeout(ctx, cfg.Etcd.DialTimeout)
	defer cancel()
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value)).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return fmt.Errorf("etcd: record the PostgreSQL cluster at %s: %w", key, err)
	}
	if resp.Succeeded {
		log.InfoContext(ctx, "recorded the fleet's PostgreSQL cluster in etcd", "key", key, "system_identifier", live)
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return fmt.Errorf("etcd: %s vanished while it was read", key) // deleted in between: retried
	}
	recorded, err := strconv.ParseInt(string(kvs[0].Value), 10, 64)
	if err != nil {
		return &wrongWitnessError{key: key, found: live, bad: safe(firstBytes(string(kvs[0].Value), 64))}
	}
	if recorded != live {
		return &wrongWitnessError{key: key, recorded: recorded, found: live, where: cfg.Database.Where()}
	}
	return nil
}

// firstBytes cuts s to at most n bytes (on a rune boundary).
func firstBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// dialledByUs returns endpoints for a client that dials through
// tlsfiles.GRPCDialer: https://host:port as host:port, unixs://path as
// unix://path (the dialer makes them TLS).
func dialledByUs(endpoints []string) []string {
	out := make([]string, len(endpoints))
	for i, ep := range endpoints {
		scheme, rest, ok := strings.Cut(ep, "://")
		switch {
		case ok && strings.EqualFold(scheme, "https"):
			out[i] = rest
		case ok && strings.EqualFold(scheme, "unixs"):
			out[i] = "unix://" + rest
		default:
			out[i] = ep
		}
	}
	return out
}

// etcdTLSNow is the etcd client's TLS as a new connection uses it now
// (the CA file's certificates held now); nil without TLS.
func etcdTLSNow(e configs.Etcd) *tls.Config {
	if e.ClientTLS == nil || e.CAs == nil {
		return e.ClientTLS
	}
	c := e.ClientTLS.Clone()
	c.RootCAs = e.CAs.Load()
	return c
}

// explainEtcd says what an etcd request's error means for the
// configuration. The client only says "context deadline exceeded" when
// no connection could be made (it waits for one): then each endpoint is
// probed for the cause (unreachable, TLS refused either way).
func explainEtcd(ctx context.Context, cfg *configs.Config, endpoints []string, user string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrAuthFailed):
		return fmt.Errorf("etcd authentication failed: etcd refused user %q and its password (etcd.username with etcd.password_file or etcd.password_env, or user:password@ in etcd.endpoints): %w", user, err)
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		who := "this client"
		if user != "" {
			who = fmt.Sprintf("user %q", user)
		}
		return fmt.Errorf("etcd authorization: %s may not read %s (grant it a role with readwrite on the prefix %s): %w", who, cfg.Etcd.Prefix, cfg.Etcd.Prefix, err)
	case errors.Is(err, rpctypes.ErrUserEmpty):
		return fmt.Errorf("etcd authentication is enabled and no user is configured (etcd.username, or a client certificate whose CN is an etcd user): %w", err)
	case errors.Is(err, context.DeadlineExceeded) && !errors.Is(ctx.Err(), context.Canceled):
		// Not when the daemon is stopping.
		cause := probeEtcd(cfg.Etcd, endpoints)
		switch {
		case cause == nil:
			return fmt.Errorf("etcd did not answer within %s, though every member accepts connections: a member frozen or overloaded, or the cluster without quorum (%w)", cfg.Etcd.DialTimeout, err)
		case errors.Is(cause, context.DeadlineExceeded):
			return cause // says the timeout itself
		}
		return fmt.Errorf("%w (%w)", cause, err)
	}
	return err
}

// probeWait is how long a probe waits, after a TLS 1.3 handshake, for the
// member to refuse the client certificate (it does so at once).
const probeWait = 300 * time.Millisecond

// probeEtcd connects to every endpoint as the client would, with the TLS
// material held now, at the level of TCP and TLS (each within a second at
// most), and returns why those that fail do (nil when none fails there):
// one, or each of several (the first's error wrapped).
func probeEtcd(e configs.Etcd, endpoints []string) error {
	var first error
	var causes []string
	for i, err := range probeAll(e, endpoints) {
		if err != nil {
			if first == nil {
				first = fmt.Errorf("etcd at %s: %w", endpoints[i], err)
			}
			causes = append(causes, fmt.Sprintf("%s: %v", endpoints[i], err))
		}
	}
	if len(causes) < 2 {
		return first
	}
	return fmt.Errorf("%d of %d etcd endpoints fail (%w); and %s", len(causes), len(endpoints), first, strings.Join(causes[1:], "; "))
}

// probeAll probes every endpoint at once (probeEndpoint, each within a
// second at most, with the TLS material held now) and returns why each
// failed (nil where it answered).
func probeAll(e configs.Etcd, endpoints []string) []error {
	tc, timeout := etcdTLSNow(e), min(e.DialTimeout, time.Second)
	errs := make([]error, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		wg.Go(func() { errs[i] = probeEndpoint(tc, ep, timeout) })
	}
	wg.Wait()
	return errs
}

func probeEndpoint(tc *tls.Config, endpoint string, timeout time.Duration) error {
	hostport := endpoint
	if _, rest, ok := strings.Cut(endpoint, "://"); ok {
		hostport = rest
	}
	if strings.HasPrefix(endpoint, "unix") {
		return nil // not probed
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", hostport)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no TCP connection within %s (the host is down, or a firewall drops the packets): %w", timeout, err)
	}
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }() // a probe's connection: nothing to act on
	host, _, _ := net.SplitHostPort(hostport)
	if tc == nil {
		if strings.HasPrefix(endpoint, "https://") {
			return nil // verified with the system's roots: probed no further
		}
		// A member that serves clients over TLS answers a hello with its
		// certificate (which the system's roots may not verify): nothing
		// but the handshake is sent.
		err := tls.Client(conn, &tls.Config{ServerName: host}).HandshakeContext(ctx)
		var verr *tls.CertificateVerificationError
		if err == nil || errors.As(err, &verr) {
			return errors.New("the member speaks TLS, and etcd.tls is not set (a member started with --cert-file and --key-file): set etcd.tls.ca_file")
		}
		return nil
	}
	c := tc.Clone()
	if c.ServerName == "" {
		c.ServerName = host
	}
	c.NextProtos = []string{"h2"}
	t := tls.Client(conn, c)
	err = t.HandshakeContext(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("it accepted the connection but did not finish the TLS handshake within %s (the member is frozen or overloaded): %w", timeout, err)
	}
	// A member that serves clients without TLS closes the connection on
	// our hello (or answers it with what is no TLS record).
	var rerr tls.RecordHeaderError
	notTLS := errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.As(err, &rerr)
	if err == nil {
		// With TLS 1.3 the member checks our certificate after the
		// handshake and, refusing it, sends an alert at once; else it
		// waits for us to speak.
		_ = t.SetReadDeadline(time.Now().Add(min(probeWait, timeout)))
		_, err = t.Read(make([]byte, 1))
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
	}
	var verr *tls.CertificateVerificationError
	var oe *net.OpError
	switch {
	case errors.As(err, &verr):
		return fmt.Errorf("its certificate is not trusted (etcd.tls.ca_file must hold the CA that signed the members' certificates, etcd.tls.server_name a name they are for): %w", err)
	case notTLS:
		return fmt.Errorf("the member does not speak TLS: it ended our TLS handshake (etcd.tls is set: the members must serve clients with --cert-file and --key-file): %w", err)
	case errors.As(err, &oe) && oe.Op == "remote error" && c.GetClientCertificate == nil:
		return fmt.Errorf("the member refused the TLS connection; it wants a client certificate (etcd.tls.cert_file and etcd.tls.key_file): %w", err)
	case errors.As(err, &oe) && oe.Op == "remote error":
		return fmt.Errorf("the member refused our client certificate (etcd.tls.cert_file: it must be signed by a CA in the members' --trusted-ca-file, and valid): %w", err)
	}
	return err
}
