package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/enginehealth/enginehealth/configs"
)

// etcdSync keeps the client's endpoints those of the etcd cluster's
// members (etcd.auto_sync_interval), so that a node configured with the
// addresses of members since replaced still reaches the cluster:
// etcd.endpoints are seeds.
//
// It does what the client's own auto-sync (clientv3.Config.AutoSyncInterval)
// would, but through the daemon's dialer: with etcd.tls the daemon makes
// the TLS connections itself and gives the client bare host:port
// endpoints (dialledByUs), and the members advertise https:// URLs. It
// skips learners (they serve no client requests until promoted) and
// members that have not started (no name, no client URLs yet), sets the
// endpoints only when the set of addresses changed, and logs each change
// once.
type etcdSync struct {
	cli     *clientv3.Client
	every   time.Duration
	timeout time.Duration // of one member list request
	tls     bool          // the daemon dials TLS itself: endpoints as dialledByUs makes them
	log     *slog.Logger

	mu sync.Mutex
	// unused holds the members not used, by ID, with why (learner, not
	// started, a scheme the client does not speak), as last logged.
	unused map[uint64]string
	failed bool // the last member list failed (logged once)
	// refused holds the members' addresses (joined) that did not answer, as
	// last logged.
	refused string
	// probe connects to endpoints and fails when none answers.
	probe func(endpoints []string) error
}

func newEtcdSync(cli *clientv3.Client, e configs.Etcd, log *slog.Logger) *etcdSync {
	s := &etcdSync{cli: cli, every: *e.AutoSyncInterval, timeout: e.DialTimeout, tls: e.TLS != nil, log: log, unused: map[uint64]string{}}
	s.probe = func(eps []string) error { return anyAnswers(e, eps) }
	return s
}

// anyAnswers probes the endpoints (probeAll) and returns nil when one
// answers, else why the first did not.
func anyAnswers(e configs.Etcd, endpoints []string) error {
	errs := probeAll(e, endpoints)
	if slices.Contains(errs, nil) {
		return nil
	}
	return fmt.Errorf("%s: %w", endpoints[0], errs[0])
}

// Run syncs at once, then every interval, until ctx ends.
func (s *etcdSync) Run(ctx context.Context) error {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.Sync(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sync asks the cluster for its members (a linearizable request: a
// member cut off, or removed and not told yet, cannot answer with an old
// list) and sets the client's endpoints to the client URLs of those it
// can use, when they differ from the endpoints it has. It reports whether
// it set them.
func (s *etcdSync) Sync(ctx context.Context) bool {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	resp, err := s.cli.MemberList(rctx)
	cancel()
	if ctx.Err() != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		// Unreachable etcd is said by the etcd check (etcdCheck); this
		// says only that the endpoints stay as they are, once.
		if !s.failed {
			s.log.InfoContext(ctx, "cannot list the etcd cluster's members; the etcd endpoints stay as they are", slog.Any("err", err))
		}
		s.failed = true
		return false
	}
	s.failed = false
	eps := s.usable(ctx, resp.Members)
	if len(eps) == 0 {
		// Never none: a list without a member this node can use (all of
		// another scheme) leaves the endpoints it has.
		return false
	}
	if s.tls {
		eps = dialledByUs(eps)
	}
	have := s.cli.Endpoints()
	added, removed := diffAddrs(have, eps)
	if len(added) == 0 && len(removed) == 0 {
		return false
	}
	// The member that answered is among them: if none answers from this
	// node, the members advertise what it cannot reach (behind a proxy,
	// a NAT, another network), and the endpoints it has are kept.
	if err := s.probe(eps); err != nil {
		if key := strings.Join(addrs(eps), ","); s.refused != key {
			s.refused = key
			s.log.WarnContext(ctx, "the etcd members' client URLs do not answer from this node; the etcd endpoints stay as they are (set etcd.auto_sync_interval: 0 when the members advertise addresses this node does not reach)",
				"members", addrs(eps), "endpoints", addrs(have), slog.Any("err", err))
		}
		return false
	}
	s.refused = ""
	s.cli.SetEndpoints(eps...)
	s.log.InfoContext(ctx, endpointsChangedMsg, "endpoints", addrs(eps), "added", added, "removed", removed)
	return true
}

// usable returns the client URLs of the members this node can use, and
// logs once each member it does not use, with why.
func (s *etcdSync) usable(ctx context.Context, members []*etcdserverpb.Member) []string {
	var eps []string
	seen := map[uint64]bool{}
	for _, m := range members {
		why := ""
		switch {
		case m.IsLearner:
			why = "it is a learner: learners serve no client requests until promoted"
		case m.Name == "" || len(m.ClientURLs) == 0:
			why = "it has not started yet (no name, no client URLs)"
		default:
			var ok []string
			for _, u := range m.ClientURLs {
				if err := s.dialable(u); err != nil {
					why = "its client URL " + err.Error()
				} else {
					ok = append(ok, u)
				}
			}
			if len(ok) > 0 {
				why = "" // used by its other URLs
			}
			eps = append(eps, ok...)
		}
		if why == "" {
			continue
		}
		seen[m.ID] = true
		if s.unused[m.ID] != why {
			s.unused[m.ID] = why
			s.log.InfoContext(ctx, "etcd member not used: "+why, "member_id", fmt.Sprintf("%x", m.ID), "member", m.Name,
				"peer_urls", m.PeerURLs, "client_urls", m.ClientURLs)
		}
	}
	for id := range s.unused {
		if !seen[id] {
			delete(s.unused, id) // promoted, started or removed
		}
	}
	return eps
}

// dialable says why the client cannot dial the client URL u (nil: it
// can): with etcd.tls it dials https:// and unixs:// (the daemon makes
// them TLS), without, http:// and unix://; a host:port it dials needs a
// host that is an address of some host and a port (a member that
// listens on 0.0.0.0, or port 0, may advertise it as such).
func (s *etcdSync) dialable(u string) error {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		scheme, rest = "", u
	}
	switch strings.ToLower(scheme) {
	case "unix", "unixs":
		if s.tls != strings.EqualFold(scheme, "unixs") {
			return fmt.Errorf("%s is of a scheme this node does not dial (etcd.tls %s)", u, map[bool]string{true: "is set", false: "is not set"}[s.tls])
		}
		return nil
	case "http", "https":
		if s.tls != strings.EqualFold(scheme, "https") {
			return fmt.Errorf("%s is of a scheme this node does not dial (etcd.tls %s)", u, map[bool]string{true: "is set", false: "is not set"}[s.tls])
		}
	case "":
	default:
		return fmt.Errorf("%s is of a scheme this node does not dial", u)
	}
	host, port, err := net.SplitHostPort(rest)
	if ip := net.ParseIP(host); err != nil || host == "" || port == "0" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("%s is no address a client can dial (a host and a port)", u)
	}
	return nil
}

// endpointsChangedMsg is the log line of a change of the endpoints.
const endpointsChangedMsg = "etcd endpoints changed: following the cluster's members"

// addr is an endpoint as the client dials it: host:port (or the unix
// socket), without http:// or https://, so that the configured 10.0.0.1:2379
// and the advertised http://10.0.0.1:2379 are the same member.
func addr(ep string) string {
	scheme, rest, ok := strings.Cut(ep, "://")
	if ok && (strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https")) {
		return rest
	}
	return ep
}

func addrs(eps []string) []string {
	out := make([]string, len(eps))
	for i, ep := range eps {
		out[i] = addr(ep)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// diffAddrs returns the addresses of next that have lacks, and those of
// have that next lacks.
func diffAddrs(have, next []string) (added, removed []string) {
	h, n := addrs(have), addrs(next)
	added, removed = []string{}, []string{}
	for _, a := range n {
		if !slices.Contains(h, a) {
			added = append(added, a)
		}
	}
	for _, a := range h {
		if !slices.Contains(n, a) {
			removed = append(removed, a)
		}
	}
	return added, removed
}

// warnSeeds probes every configured endpoint at the TCP and TLS level
// (probeEndpoint), once, after the client connected, and logs one
// warning naming those that did not answer: a node whose endpoints are
// partly wrong (a member gone, a typo) starts on the others, and says so
// once rather than at every retry.
//
// An endpoint that accepts connections is then asked for its status with
// cli (dialled as cli dials: dialled[i] is endpoints[i] as cli has it), so
// that one that accepts and never answers (a frozen process, a proxy to
// nothing) is named too.
func warnSeeds(ctx context.Context, e configs.Etcd, cli *clientv3.Client, endpoints, dialled []string, log *slog.Logger) {
	var failed, causes []string
	errs := probeAll(e, endpoints)
	var wg sync.WaitGroup
	for i, err := range errs {
		if err != nil || strings.HasPrefix(endpoints[i], "unix") {
			continue
		}
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, min(e.DialTimeout, 2*time.Second))
			defer cancel()
			if _, err := cli.Status(sctx, dialled[i]); err != nil {
				errs[i] = fmt.Errorf("accepts connections but did not answer an etcd status request within %s: %w", min(e.DialTimeout, 2*time.Second), err)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			failed, causes = append(failed, endpoints[i]), append(causes, fmt.Sprintf("%s: %v", endpoints[i], err))
		}
	}
	if len(failed) == 0 || ctx.Err() != nil {
		return
	}
	hint := "etcd.auto_sync_interval is 0: fix etcd.endpoints"
	if *e.AutoSyncInterval > 0 {
		hint = "the node follows the cluster's members (etcd.auto_sync_interval); fix etcd.endpoints before the next restart"
	}
	log.WarnContext(ctx, fmt.Sprintf("%d of %d etcd endpoints did not answer; this node uses the others", len(failed), len(endpoints)),
		"endpoints", failed, "causes", causes, "hint", hint)
}
