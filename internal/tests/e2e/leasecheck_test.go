package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/leader"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// leaseWatch records when each election key is deleted, watching etcd
// directly (not through the sidecars' proxies). Together with the
// keep-alives each sidecar counted (its log), it checks what the trust
// window rests on: etcd keeps a lease at least a TTL past the send of
// every keep-alive a sidecar counted (leader/doc.go).
type leaseWatch struct {
	mu        sync.Mutex
	deletions []leaseDeletion
	cancel    context.CancelFunc
	done      chan struct{}
}

type leaseDeletion struct {
	key   string
	lease int64
	// seen: when the watch delivered the deletion (it happened before).
	seen time.Time
}

func startLeaseWatch(t testing.TB, endpoints []string, prefix string) *leaseWatch {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	gctx, gcancel := context.WithTimeout(context.Background(), 10*time.Second)
	start, err := cli.Get(gctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	gcancel()
	if err != nil {
		cli.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &leaseWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer cli.Close()
		rev := start.Header.Revision // every revision up to it has been seen
		for ctx.Err() == nil {
			opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithFilterPut(), clientv3.WithRev(rev + 1)}
			for resp := range cli.Watch(clientv3.WithRequireLeader(ctx), prefix, opts...) {
				seen := time.Now()
				for _, ev := range resp.Events {
					if ev.PrevKv == nil {
						continue
					}
					w.mu.Lock()
					w.deletions = append(w.deletions, leaseDeletion{key: string(ev.Kv.Key), lease: ev.PrevKv.Lease, seen: seen})
					w.mu.Unlock()
					rev = max(rev, ev.Kv.ModRevision)
				}
			}
			// The watch ended (no leader, a member gone): watch again from
			// the last revision seen.
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *leaseWatch) stop() {
	w.cancel()
	<-w.done
}

// renewal is a keep-alive a sidecar counted, from its log.
type renewal struct {
	node           string
	sent, credited time.Time
	member         string
	raftTerm       int64
}

// leaseLogs reads, from sidecar logs, the keep-alives counted per lease
// (hex id) and the leases the sidecars revoked themselves.
func leaseLogs(logs []string) (renewals map[string][]renewal, revoked map[string]bool) {
	renewals, revoked = map[string][]renewal{}, map[string]bool{}
	for _, log := range logs {
		sc := bufio.NewScanner(strings.NewReader(log))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if !strings.Contains(string(line), `"component":"leader"`) {
				continue
			}
			var l struct {
				Time     time.Time `json:"time"`
				Msg      string    `json:"msg"`
				Node     string    `json:"node"`
				Lease    string    `json:"lease"`
				Sent     time.Time `json:"sent"`
				Member   string    `json:"member"`
				RaftTerm int64     `json:"raft_term"`
			}
			if json.Unmarshal(line, &l) != nil {
				continue
			}
			switch l.Msg {
			case "etcd keep-alive answered":
				renewals[l.Lease] = append(renewals[l.Lease], renewal{node: l.Node, sent: l.Sent, credited: l.Time, member: l.Member, raftTerm: l.RaftTerm})
			case "revoking the etcd lease":
				revoked[l.Lease] = true
			}
		}
	}
	return renewals, revoked
}

// checkLeases checks, for every election key deleted while the run lasted
// whose lease its sidecar did not revoke itself (so etcd expired it), that
// no keep-alive of that lease the sidecar counted was sent less than ttl
// before the deletion was seen: a counted keep-alive promises the lease
// lives ttl past its send, and the trust window (ttl − trust_margin)
// rests on that promise.
func (w *leaseWatch) checkLeases(logs []string, ttl time.Duration) checkResult {
	res := checkResult{name: "etcd kept each lease a TTL past every keep-alive counted"}
	renewals, revoked := leaseLogs(logs)
	w.mu.Lock()
	deletions := append([]leaseDeletion(nil), w.deletions...)
	w.mu.Unlock()
	self := 0
	for _, d := range deletions {
		id := strconv.FormatInt(d.lease, 16)
		if revoked[id] || d.lease == 0 {
			self++
			continue
		}
		res.checked++
		for _, rn := range renewals[id] {
			if until := rn.sent.Add(ttl); d.seen.Before(until) {
				res.found++
				if len(res.violations) < 20 {
					res.violations = append(res.violations, fmt.Sprintf("%s: %s's lease %s (key %s) was gone at %s, %s before the TTL from its keep-alive sent at %s (answered by member %s in raft term %d, counted at %s)",
						res.name, rn.node, id, d.key, d.seen.Format("15:04:05.000"), until.Sub(d.seen).Round(time.Millisecond),
						rn.sent.Format("15:04:05.000"), rn.member, rn.raftTerm, rn.credited.Format("15:04:05.000")))
				}
				break
			}
		}
	}
	res.name += fmt.Sprintf(" (of %d keys deleted, %d by their sidecar's own revoke)", len(deletions), self)
	return res
}

// electionPrefix is the election prefix of the harness's daemons in test t.
func electionPrefix(t testing.TB) string {
	return leader.ElectionPrefix("/" + strings.ReplaceAll(t.Name(), "/", "_") + "/")
}
