package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
)

// leaseTTL is the lease TTL of every test daemon (harness config).
const leaseTTL = 3 * time.Second

// BenchmarkFailover measures the time from signalling the master of a
// three-node cluster to a new master in office (its term recorded in the
// database: failover-ms) and to one that acts (GET /v1/leader?local=true
// answers 200: acting-ms). Targets (docs/benchmarks.md): in office after a kill ≤
// lease TTL + 1000 ms, after a graceful stop ≤ 1000 ms; acting after a kill
// also waits out the old master's trust window (lease TTL − trust margin).
// crash-released is the kill followed by what systemd runs once the
// process is gone (the unit's ExecStopPost=, enginehealth release-lease,
// timed with the rest): in office ≤ 1000 ms, acting a trust window later.
func BenchmarkFailover(b *testing.B) {
	for _, mode := range []struct {
		name    string
		sig     syscall.Signal
		release bool
	}{{"kill", syscall.SIGKILL, false}, {"graceful", syscall.SIGTERM, false}, {"crash-released", syscall.SIGKILL, true}} {
		b.Run(mode.name, func(b *testing.B) {
			failovers(b, newCluster(b), mode.sig, mode.release, "")
		})
	}
}

// BenchmarkTLSFailover is BenchmarkFailover's kill on a TLS-everywhere
// cluster (newTLSCluster): etcd with client certificates and auth,
// PostgreSQL with verify-full, the API with client_auth require. The
// figures are tls-failover-ms and tls-acting-ms; the target is the same
// (in office ≤ lease TTL + 1000 ms).
func BenchmarkTLSFailover(b *testing.B) {
	failovers(b, newTLSCluster(b), syscall.SIGKILL, false, "tls-")
}

// failovers runs node-a, node-b and node-c on c and, b.N times, signals
// the master with sig (and, with release, runs release-lease for it once
// its process is gone, as systemd would) and times the next one into
// office and to acting (then restarts the old one, acked, untimed); it
// reports the means as PREFIXfailover-ms and PREFIXacting-ms, and the
// lease TTL as ttl-ms.
func failovers(b *testing.B, c *cluster, sig syscall.Signal, release bool, prefix string) {
	ds := map[string]*daemon{}
	launch := func(name string) *daemon {
		return c.startEnv(name, c.configWith(name, cfgOpts{TokenEnv: "EH_TOKEN"}), "EH_TOKEN=tok")
	}
	started := time.Now()
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		ds[name] = launch(name)
	}
	for _, d := range ds {
		c.waitRegistered(d, 30*time.Second)
	}
	cur := c.waitTerm(b, 0, 30*time.Second)
	// A cluster that has run for a while: a candidate that first read
	// the election less than a trust window ago waits out the rest of it
	// before it acts (a master whose key vanished before it looked may
	// still believe), which only a cluster started moments ago meets.
	// The trust window is at most the lease TTL.
	<-time.After(time.Until(started.Add(leaseTTL)))
	fence := testkit.Must(leader.NewFence(leader.FenceConfig{DB: c.db, Schema: "enginehealth", Events: audit.New("enginehealth")}))
	var total, acting time.Duration
	hc := c.httpClient(time.Second)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		old := ds[cur.Node]
		start := time.Now()
		old.signal(b, sig)
		if release {
			if _, errOut, code := releaseLease(b, old); code != 0 {
				b.Fatalf("release-lease for %s: exit %d: %s", old.name, code, errOut)
			}
		}
		// Poll tightly: the graceful figure is tens of milliseconds.
		deadline := start.Add(30 * time.Second)
		for {
			next, err := fence.Current(context.Background())
			if err == nil && next.Term > cur.Term {
				total += time.Since(start)
				cur = next
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("no new master 30s after %s", sig)
			}
			<-time.After(2 * time.Millisecond)
		}
		// In office, and then acting: after a kill, once the old
		// master's trust window is surely closed.
		n, err := c.node(cur.Node)
		if err != nil {
			b.Fatal(err)
		}
		for {
			resp, err := c.get(hc, n.APIAddress, "/v1/leader?local=true")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					acting += time.Since(start)
					break
				}
			}
			if time.Now().After(deadline) {
				b.Fatalf("the new master %s did not act 30s after %s", cur.Node, sig)
			}
			<-time.After(2 * time.Millisecond)
		}
		b.StopTimer()
		old.wait(b, 10*time.Second)
		before, err := c.node(old.name)
		if err != nil && sig == syscall.SIGKILL {
			b.Fatalf("the killed master's record: %v", err)
		}
		ds[old.name] = launch(old.name)
		c.rejoin(b, old.name, before.Incarnation, cur.Node)
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), prefix+"failover-ms")
	b.ReportMetric(float64(acting.Milliseconds())/float64(b.N), prefix+"acting-ms")
	b.ReportMetric(float64(leaseTTL.Milliseconds()), "ttl-ms")
}

// rejoin waits until node name is registered again in a new incarnation
// (not prev) and Ready. A killed node comes back in Unexpected shutdown and
// never campaigns until an operator acknowledges it: rejoin acks it, as
// the operator would, through the API of node via, so that a benchmark can
// kill the master any number of times.
func (c *cluster) rejoin(t testing.TB, name, prev, via string) {
	t.Helper()
	var n nodes.Node
	eventually(t, 30*time.Second, name+" registered again", func() (bool, error) {
		var err error
		n, err = c.node(name)
		return err == nil && n.Incarnation != prev, nil
	})
	if n.Status == nodes.StatusUnexpectedShutdown {
		m, err := c.node(via)
		if err != nil {
			t.Fatal(err)
		}
		if _, errOut, code := cli(t, c.operatorEnv(), "node", "ack", name, "--reason", "benchmark restart", "--api", c.apiURL(m.APIAddress)); code != 0 {
			t.Fatalf("node ack %s: exit %d: %s", name, code, errOut)
		}
	}
	waitNodeStatus(t, c, name, nodes.StatusReady)
}

// BenchmarkAPIOverTLS times one API request over TLS (client_auth
// require: the client's certificate verified) on a kept-alive connection,
// beside plain HTTP at the same load: two daemons of one TLS-everywhere
// cluster, one serving its API over TLS, the other plain
// (cfgOpts.PlainAPI). apiClients clients (one per core of the 2-core test
// machine) send GET /healthz one after the other, each on a connection of
// its own (a handshake each, before the timing; the benchmark fails if a
// connection was not reused), in rounds that alternate between the two
// daemons so that both see the same machine. It reports the p99 of each
// (tls-p99-us, plain-p99-us), their ratio (tls-ratio-vs-plain; target ≤
// 2) and the medians. /healthz is answered from memory: the transport is
// most of what is timed, the worst case for the ratio.
func BenchmarkAPIOverTLS(b *testing.B) {
	const apiClients, rounds, perRound = 2, 10, 300
	c := newTLSCluster(b)
	type side struct {
		url     string
		clients []*http.Client
		dials   atomic.Int64
		took    []time.Duration
		mu      sync.Mutex
	}
	sides := map[bool]*side{}
	for _, secure := range []bool{true, false} {
		name := map[bool]string{true: "api-tls", false: "api-plain"}[secure]
		d := c.start(name, c.configWith(name, cfgOpts{PlainAPI: !secure}))
		s := &side{url: api.URL(c.waitRegistered(d, 30*time.Second).APIAddress, "/healthz")}
		if strings.HasPrefix(s.url, "https://") != secure {
			b.Fatalf("%s's API at %s", name, s.url)
		}
		for range apiClients {
			dialer := &net.Dialer{Timeout: 5 * time.Second}
			tr := &http.Transport{MaxIdleConnsPerHost: 1, TLSClientConfig: c.tls.clientTLS(),
				DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
					s.dials.Add(1)
					return dialer.DialContext(ctx, network, addr)
				}}
			b.Cleanup(tr.CloseIdleConnections)
			s.clients = append(s.clients, &http.Client{Transport: tr, Timeout: 10 * time.Second})
		}
		sides[secure] = s
	}
	get := func(hc *http.Client, url string) error {
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body) // read to the end: the connection is reused
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
	// burst: every client of s sends n requests, all at once, each timed.
	burst := func(s *side, n int, timed bool) {
		errs := make(chan error, len(s.clients))
		for _, hc := range s.clients {
			go func() {
				took := make([]time.Duration, 0, n)
				for range n {
					start := time.Now()
					if err := get(hc, s.url); err != nil {
						errs <- err
						return
					}
					took = append(took, time.Since(start))
				}
				if timed {
					s.mu.Lock()
					s.took = append(s.took, took...)
					s.mu.Unlock()
				}
				errs <- nil
			}()
		}
		for range s.clients {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
	}
	// Both daemons healthy before the first request (a daemon answers
	// /healthz 503 until it is Ready: a busy host can be slower to get
	// there than to register).
	for name, s := range map[string]*side{"api-tls": sides[true], "api-plain": sides[false]} {
		waitNodeStatus(b, c, name, nodes.StatusReady)
		eventually(b, 30*time.Second, name+" healthy", func() (bool, error) { return get(s.clients[0], s.url) == nil, nil })
	}
	for _, s := range sides {
		burst(s, 1, false) // the handshakes
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := range rounds {
			first := r%2 == 0
			burst(sides[first], perRound, true)
			burst(sides[!first], perRound, true)
		}
	}
	b.StopTimer()
	p50, p99 := map[bool]time.Duration{}, map[bool]time.Duration{}
	for secure, s := range sides {
		if n := s.dials.Load(); n != apiClients {
			b.Fatalf("%d connections to %s for %d clients: connections were not reused", n, s.url, apiClients)
		}
		slices.Sort(s.took)
		p50[secure], p99[secure] = s.took[len(s.took)/2], s.took[len(s.took)*99/100]
	}
	b.ReportMetric(float64(p99[true].Microseconds()), "tls-p99-us")
	b.ReportMetric(float64(p99[false].Microseconds()), "plain-p99-us")
	b.ReportMetric(float64(p99[true])/float64(p99[false]), "tls-ratio-vs-plain")
	// The median beside it: on a busy host the p99 is mostly the scheduler.
	b.ReportMetric(float64(p50[true].Microseconds()), "tls-p50-us")
	b.ReportMetric(float64(p50[false].Microseconds()), "plain-p50-us")
}
