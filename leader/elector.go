package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/enginehealth/enginehealth/internal/backoff"
	"github.com/lmittmann/tint"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Causes of a lost office (context.Cause of the leader context).
var (
	ErrSessionLost  = errors.New("leader: etcd session ended (lease expired or revoked)")
	ErrTrustExpired = errors.New("leader: no keep-alive answer within the trust window")
	ErrKeyDeleted   = errors.New("leader: the leader key was deleted")
	// ErrNotTrusted: the office may no longer act.
	ErrNotTrusted = errors.New("leader: office not trusted")
)

// Candidate is the election value.
type Candidate struct {
	Name        string `json:"name"`
	Incarnation string `json:"incarnation"`
	APIAddress  string `json:"api_address"`
}

// Config of an Elector.
type Config struct {
	Client *clientv3.Client
	// Prefix of the cluster's keys; the election is under Prefix + "leader/".
	Prefix string
	// TTL of the session lease (whole seconds).
	TTL time.Duration
	// TrustMargin: the office is trusted until the last keep-alive answer
	// + TTL − TrustMargin.
	TrustMargin time.Duration
	Candidate   Candidate
	// Gate, when set, must return nil for the office to be trusted (the
	// node's own database heartbeat).
	Gate func() error
	Log  *slog.Logger
}

// ElectionPrefix returns the election key prefix under a cluster prefix.
func ElectionPrefix(prefix string) string { return prefix + "leader/" }

// Office is one term of this node as master.
type Office struct {
	// Term is the leader key's create revision.
	Term      int64
	Candidate Candidate

	ctx     context.Context
	trusted func() error
}

// Trusted returns nil while the office may act: the leader context is live,
// the lease is inside its trust window, and the gate passes.
func (o *Office) Trusted() error {
	if err := o.ctx.Err(); err != nil {
		return fmt.Errorf("%w: term %d ended: %v", ErrNotTrusted, o.Term, context.Cause(o.ctx))
	}
	if err := o.trusted(); err != nil {
		return fmt.Errorf("%w: term %d: %v", ErrNotTrusted, o.Term, err)
	}
	return nil
}

// Elector campaigns for master and runs the leader function while elected.
type Elector struct {
	cfg Config
	log *slog.Logger
	now func() time.Time

	mu     sync.Mutex
	office *Office
}

// New returns an elector.
func New(cfg Config) *Elector {
	return &Elector{cfg: cfg, log: cfg.Log.With("component", "leader"), now: time.Now}
}

// Office returns the current office, or nil when this node is not master.
func (e *Elector) Office() *Office {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.office
}

func (e *Elector) setOffice(o *Office) {
	e.mu.Lock()
	e.office = o
	e.mu.Unlock()
}

// Run campaigns until ctx is done. Each time this node is elected it calls
// lead with a context cancelled when the office is lost, and waits for lead
// to return; lead must return promptly once its context is done. Run
// resigns at once when ctx is done and returns nil.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context, o *Office) error) error {
	bo := backoff.Backoff{Base: 250 * time.Millisecond, Max: 5 * time.Second}
	for {
		err := e.serve(ctx, lead)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			d := bo.Next()
			e.log.WarnContext(ctx, "election round ended", "retry_in", d.Round(time.Millisecond), tint.Err(err))
			if backoff.Sleep(ctx, d) != nil {
				return nil
			}
			continue
		}
		bo.Reset()
	}
}

// serve runs one session: campaign, confirm, lead, step down.
func (e *Elector) serve(ctx context.Context, lead func(ctx context.Context, o *Office) error) error {
	cli := e.cfg.Client
	ttl := e.cfg.TTL
	start := e.now()
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(int(ttl/time.Second)), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("new etcd session: %w", err)
	}
	defer func() {
		// Revoke the lease: our candidate or leader key goes with it.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		sess.Orphan()
		if _, err := cli.Revoke(cctx, sess.Lease()); err != nil && ctx.Err() == nil {
			e.log.DebugContext(ctx, "revoke lease", tint.Err(err))
		}
	}()

	// Our own view of the keep-alives: the trust window is anchored at the
	// last answer (at the session's start until the first one).
	var (
		renewMu   sync.Mutex
		lastRenew = start
	)
	ka, err := cli.KeepAlive(sess.Ctx(), sess.Lease())
	if err != nil {
		return fmt.Errorf("keep-alive: %w", err)
	}
	go func() {
		for resp := range ka {
			if resp != nil {
				renewMu.Lock()
				lastRenew = e.now()
				renewMu.Unlock()
			}
		}
	}()
	trustedUntil := func() time.Time {
		renewMu.Lock()
		defer renewMu.Unlock()
		return lastRenew.Add(ttl - e.cfg.TrustMargin)
	}
	trusted := func() error {
		if until := trustedUntil(); !e.now().Before(until) {
			return fmt.Errorf("lease outside its trust window since %s", until.Format(time.RFC3339Nano))
		}
		if e.cfg.Gate != nil {
			return e.cfg.Gate()
		}
		return nil
	}

	value, err := json.Marshal(e.cfg.Candidate)
	if err != nil {
		return err
	}
	el := concurrency.NewElection(sess, ElectionPrefix(e.cfg.Prefix))
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	go func() {
		select {
		case <-sess.Done():
			ccancel()
		case <-cctx.Done():
		}
	}()
	e.log.DebugContext(ctx, "campaigning", "lease", fmt.Sprintf("%x", sess.Lease()))
	if err := el.Campaign(cctx, string(value)); err != nil {
		if isDone(sess.Done()) {
			return fmt.Errorf("campaign: %w", ErrSessionLost)
		}
		return fmt.Errorf("campaign: %w", err)
	}

	// Campaign can return after the session expired: confirm.
	if isDone(sess.Done()) {
		return fmt.Errorf("elected: %w", ErrSessionLost)
	}
	if err := e.confirm(ctx, el); err != nil {
		return err
	}
	if err := trusted(); err != nil {
		return fmt.Errorf("elected but not trusted: %w", err)
	}

	lctx, lcancel := context.WithCancelCause(ctx)
	defer lcancel(nil)
	office := &Office{Term: el.Rev(), Candidate: e.cfg.Candidate, ctx: lctx, trusted: trusted}
	go e.guard(lctx, lcancel, sess, el.Key(), trustedUntil)

	e.log.InfoContext(ctx, "elected master", "term", office.Term)
	e.setOffice(office)
	leadErr := lead(lctx, office)
	e.setOffice(nil)
	cause := context.Cause(lctx)
	lcancel(nil)

	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer rcancel()
	if err := el.Resign(rctx); err != nil && ctx.Err() == nil {
		e.log.DebugContext(ctx, "resign", tint.Err(err))
	}
	switch {
	case ctx.Err() != nil:
		e.log.InfoContext(ctx, "resigned master on shutdown", "term", office.Term)
		return nil
	case leadErr != nil:
		return fmt.Errorf("master work of term %d failed: %w", office.Term, leadErr)
	case cause != nil:
		e.log.WarnContext(ctx, "lost master office", "term", office.Term, "cause", cause.Error())
		return cause
	}
	return nil
}

// confirm checks that the first key under the election prefix is ours, at
// our revision.
func (e *Elector) confirm(ctx context.Context, el *concurrency.Election) error {
	qctx, cancel := context.WithTimeout(ctx, e.cfg.TTL)
	defer cancel()
	resp, err := el.Leader(qctx)
	if err != nil {
		return fmt.Errorf("confirm leadership: %w", err)
	}
	kv := resp.Kvs[0]
	if string(kv.Key) != el.Key() || kv.CreateRevision != el.Rev() {
		return fmt.Errorf("confirm leadership: the leader key is %s@%d, not ours (%s@%d)", kv.Key, kv.CreateRevision, el.Key(), el.Rev())
	}
	return nil
}

// guard cancels the leader context when the session ends, the trust window
// closes, or the leader key is deleted.
func (e *Elector) guard(ctx context.Context, cancel context.CancelCauseFunc, sess *concurrency.Session, key string, trustedUntil func() time.Time) {
	watch := e.cfg.Client.Watch(clientv3.WithRequireLeader(ctx), key)
	timer := time.NewTimer(time.Until(trustedUntil()))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sess.Done():
			cancel(ErrSessionLost)
			return
		case <-timer.C:
			d := trustedUntil().Sub(e.now())
			if d <= 0 {
				cancel(ErrTrustExpired)
				return
			}
			timer.Reset(d)
		case wr, ok := <-watch:
			if !ok {
				// The watch ended (etcd lost its leader, or ctx is done);
				// the session and the trust timer still guard the office.
				watch = nil
				continue
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					cancel(ErrKeyDeleted)
					return
				}
			}
		}
	}
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Holder is the current master as etcd sees it.
type Holder struct {
	Candidate
	Term int64 `json:"term"`
}

// ErrNoLeader: no node holds the election.
var ErrNoLeader = errors.New("leader: no master elected")

// Current returns the current election holder under the cluster prefix.
func Current(ctx context.Context, cli *clientv3.Client, prefix string) (Holder, error) {
	resp, err := cli.Get(ctx, ElectionPrefix(prefix), clientv3.WithFirstCreate()...)
	if err != nil {
		return Holder{}, fmt.Errorf("read leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return Holder{}, ErrNoLeader
	}
	var h Holder
	if err := json.Unmarshal(resp.Kvs[0].Value, &h.Candidate); err != nil {
		return Holder{}, fmt.Errorf("read leader: bad election value %q: %w", resp.Kvs[0].Value, err)
	}
	h.Term = resp.Kvs[0].CreateRevision
	return h, nil
}
