package leader

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/enginehealth/enginehealth/internal/infra/backoff"
	"github.com/enginehealth/enginehealth/internal/infra/faultinject"
)

// Causes of a lost office (context.Cause of the leader context).
var (
	ErrSessionLost = errors.New("leader: etcd lease lost (expired or revoked)")
	ErrKeyDeleted  = errors.New("leader: the leader key was deleted")
	// ErrNotTrusted means the office may not act now.
	ErrNotTrusted = errors.New("leader: office not trusted")
	// ErrNotYet means the office may not act yet: an earlier master may still
	// trust its own window (Office.ActingFrom). Wrapped with ErrNotTrusted.
	ErrNotYet = errors.New("waiting out earlier masters' trust windows")
)

// Candidate is the election value.
type Candidate struct {
	Name        string `json:"name"`
	Incarnation string `json:"incarnation"`
	APIAddress  string `json:"api_address"`
}

// Defaults of Config, applied by New.
const (
	DefaultPrefix        = "/enginehealth/"
	DefaultLeaseTTL      = 10 * time.Second
	DefaultTrustMargin   = time.Second
	DefaultResignTimeout = time.Second
	// DefaultDialTimeout of the etcd client's connection attempts.
	DefaultDialTimeout = 5 * time.Second
	// MinLeaseTTL is the shortest lease: a shorter one leaves no room for a
	// keep-alive round.
	MinLeaseTTL = 3 * time.Second
)

// Config of an Elector.
type Config struct {
	Client *clientv3.Client
	// Prefix of the cluster's keys; the election is under Prefix + "leader/".
	// Zero values take the Default constants.
	Prefix string
	// TTL of the lease (whole seconds).
	TTL time.Duration
	// TrustMargin shortens the trust window: the office acts only until the
	// send time of the last answered keep-alive + TTL − TrustMargin.
	TrustMargin time.Duration
	Candidate   Candidate
	// Gate, when set, must return nil for the office to be trusted (the
	// node's own database heartbeat).
	Gate func() error
	// ResignTimeout bounds the lease revocation when Run stops. Resigning is best effort: without it the lease expires after TTL.
	ResignTimeout time.Duration
	// Log is where the elector reports its rounds; none by default.
	Log *slog.Logger
	// OnLease, when set, is called with each lease the elector is
	// granted, before it campaigns with it: the daemon records the lease
	// in its state file for `enginehealth release-lease` (RevokeLease),
	// so that a record exists before the lease can hold an election key.
	// A lease lost or revoked is followed by a new one, and a new call.
	// It runs on the election's goroutine, and must return promptly.
	OnLease func(id clientv3.LeaseID)
}

// ElectionPrefix returns the prefix of the election keys under a cluster
// prefix: a candidate's key is ElectionPrefix + its lease id in hex, as with
// etcd's concurrency.Election and `etcdctl elect <prefix>leader`.
func ElectionPrefix(prefix string) string { return prefix + "leader/" }

// timings derived from the lease TTL.
type timings struct {
	// renew is the time between two keep-alives while they are answered: a
	// third of the TTL, or a quarter of the trust window when that is
	// shorter, so that a renewal may lose an attempt or two to an
	// unresponsive member (each costs attempt) without the window closing.
	renew time.Duration
	// attempt bounds one keep-alive or election read; one that times out
	// is retried at once, so the round-robin balancer moves on from an
	// unresponsive member.
	attempt time.Duration
	// request bounds the other etcd requests (grant, campaign put).
	request time.Duration
	// poll is how often, at least, a standby re-reads the election, in case
	// its watch hangs on an unresponsive member.
	poll time.Duration
}

func timingsFor(ttl, margin time.Duration) timings {
	return timings{
		renew:   max(min(ttl/3, (ttl-margin)/4), 250*time.Millisecond),
		attempt: clamp(ttl/6, 250*time.Millisecond, time.Second),
		request: clamp(ttl/3, 500*time.Millisecond, 2*time.Second),
		poll:    clamp(ttl/6, 250*time.Millisecond, time.Second),
	}
}

func clamp(d, lo, hi time.Duration) time.Duration { return min(max(d, lo), hi) }

// jitter returns d ± 20%, at random. The client sends each request to the
// next member in turn, so requests at fixed periods from the elector's
// goroutines (keep-alive and confirming read, election read, guard) fall
// into a fixed pattern: with three members and three requests a round, an
// unresponsive member got every election read (a standby never saw the
// master's key go). Jitter breaks the pattern.
func jitter(d time.Duration) time.Duration {
	return d - d/5 + rand.N(2*d/5+1)
}

// Office is one term of this node as master.
type Office struct {
	// Term is the leader key's create revision.
	Term      int64
	Candidate Candidate

	ctx     context.Context
	end     context.CancelCauseFunc // nil for an office built by hand in tests
	lease   *lease
	trusted func() error
	now     func() time.Time

	mu sync.Mutex
	// actFrom is when the office starts to act, and not before (zero: at once).
	actFrom time.Time
}

// ActingFrom returns when the office may start to act: it takes office
// (records its term) at once, but acts only once no earlier holder can
// still believe in its own trust window (zero: at once). See doc.go.
func (o *Office) ActingFrom() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.actFrom
}

// depose ends the office at once, with cause: this node learned of a
// newer term (the fence found one recorded), so another node may act
// already.
func (o *Office) depose(cause error) {
	if o.end != nil && !faultinject.Off(faultinject.Fencing) {
		o.end(cause)
	}
}

// Trusted returns nil while the office may act: the office is live, the
// last answered keep-alive is inside the trust window, and the gate
// passes. An office whose keep-alives go unanswered is suspended, not
// ended: it acts again, in the same term, as soon as a keep-alive is
// answered, because an answered keep-alive proves the lease (and with it the
// leader key) never expired.
func (o *Office) Trusted() error {
	if err := o.mayTakeOffice(); err != nil {
		return err
	}
	if from := o.ActingFrom(); !from.IsZero() && o.clock().Before(from) && !faultinject.Off(faultinject.Fencing) {
		return fmt.Errorf("%w: term %d: %w until %s", ErrNotTrusted, o.Term, ErrNotYet, from.Format(time.RFC3339Nano))
	}
	return nil
}

// AwaitTrusted waits up to wait for the office to be trusted (Trusted
// nil), and returns Trusted's answer then; it stops waiting when the office
// ends or ctx is done. For an operator's command, which would rather wait
// a moment than be refused: on a starved host the node's own heartbeat
// (the gate) can be late by a few tens of milliseconds, and the office
// cannot act until the next one.
func (o *Office) AwaitTrusted(ctx context.Context, wait time.Duration) error {
	const poll = 20 * time.Millisecond
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		err := o.Trusted()
		if err == nil || o.ctx.Err() != nil {
			return err
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return o.Trusted()
		case <-ctx.Done():
			return err
		case <-o.ctx.Done():
			return o.Trusted()
		}
	}
}

// mayTakeOffice is Trusted without the wait for earlier holders: taking
// office (recording the term, which fences every earlier master's writes)
// does not wait.
func (o *Office) mayTakeOffice() error {
	if err := o.ctx.Err(); err != nil {
		return fmt.Errorf("%w: term %d ended: %v", ErrNotTrusted, o.Term, context.Cause(o.ctx))
	}
	if err := o.trusted(); err != nil && !faultinject.Off(faultinject.Fencing) {
		return fmt.Errorf("%w: term %d: %v", ErrNotTrusted, o.Term, err)
	}
	return nil
}

func (o *Office) clock() time.Time {
	if o.now == nil {
		return time.Now()
	}
	return o.now()
}

// actAtOnce lifts the wait for earlier holders (no term was ever recorded
// before this office's: there was none).
func (o *Office) actAtOnce() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.actFrom = time.Time{}
}

// TrustedUntil returns the end of the current trust window (zero for an
// office built by hand in tests).
func (o *Office) TrustedUntil() time.Time {
	if o.lease == nil {
		return time.Time{}
	}
	return o.lease.trustedUntil()
}

// Done is closed when the office ends.
func (o *Office) Done() <-chan struct{} { return o.ctx.Done() }

// Err returns why the office ended (nil while it lasts).
func (o *Office) Err() error { return context.Cause(o.ctx) }

// Elector campaigns for master and runs the leader function while elected.
type Elector struct {
	cfg Config
	t   timings
	log *slog.Logger
	now func() time.Time

	mu     sync.Mutex
	office *Office
}

// New returns an elector. It fails on a config no elector can run
// with: no etcd client, no candidate name or incarnation, a TTL below
// MinLeaseTTL or not in whole seconds (etcd leases are), a negative
// trust margin or resign timeout, or a trust window (TTL − TrustMargin)
// no longer than TTL/3, which a few keep-alive rounds could not outlast.
func New(cfg Config) (*Elector, error) {
	cfg.Prefix = cmp.Or(cfg.Prefix, DefaultPrefix)
	cfg.TTL = cmp.Or(cfg.TTL, DefaultLeaseTTL)
	cfg.TrustMargin = cmp.Or(cfg.TrustMargin, DefaultTrustMargin)
	cfg.ResignTimeout = cmp.Or(cfg.ResignTimeout, DefaultResignTimeout)
	cfg.Log = cmp.Or(cfg.Log, slog.New(slog.DiscardHandler))
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Elector{cfg: cfg, t: timingsFor(cfg.TTL, cfg.TrustMargin), log: cfg.Log.With("component", "leader"), now: time.Now}, nil
}

// validate checks a Config whose defaults are applied.
func (c Config) validate() error {
	switch {
	case c.Client == nil:
		return errors.New("leader: an elector needs an etcd client (Config.Client)")
	case c.Candidate.Name == "" || c.Candidate.Incarnation == "":
		return fmt.Errorf("leader: an elector needs its candidate's name and incarnation, got %+v", c.Candidate)
	case !strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/"):
		return fmt.Errorf("leader: the key prefix %q must start and end with '/' (its keys are PREFIX + \"leader/\")", c.Prefix)
	case c.TTL < MinLeaseTTL:
		return fmt.Errorf("leader: lease TTL %s is below the minimum %s: it leaves no room for a keep-alive round", c.TTL, MinLeaseTTL)
	case c.TTL%time.Second != 0:
		return fmt.Errorf("leader: lease TTL %s must be whole seconds (etcd leases are)", c.TTL)
	case c.TrustMargin < 0 || c.ResignTimeout < 0:
		return fmt.Errorf("leader: trust margin %s and resign timeout %s may not be negative", c.TrustMargin, c.ResignTimeout)
	case c.TTL-c.TrustMargin <= c.TTL/3:
		return fmt.Errorf("leader: trust margin %s leaves a trust window (TTL − margin = %s) no longer than TTL/3 (%s): it must outlast a few keep-alive rounds",
			c.TrustMargin, c.TTL-c.TrustMargin, c.TTL/3)
	}
	return nil
}

// Office returns the current office, or nil when this node is not master.
// The office may be suspended: check Trusted.
func (e *Elector) Office() *Office {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.office
}

// ObserveTerm tells the elector of a term recorded in the fence (a read of
// it anywhere in this node): an office of an older term ends at once, since
// the newer one may act already.
func (e *Elector) ObserveTerm(recorded int64) {
	if o := e.Office(); o != nil && recorded > o.Term {
		o.depose(fmt.Errorf("%w: recorded term %d, ours %d", ErrDeposed, recorded, o.Term))
	}
}

func (e *Elector) setOffice(o *Office) {
	e.mu.Lock()
	e.office = o
	e.mu.Unlock()
}

// Run campaigns until ctx is done. Each time this node is elected it calls
// lead with a context cancelled when the office ends, and waits for lead to
// return; lead must return promptly once its context is done. When ctx is
// done Run resigns (revokes its lease, bounded by ResignTimeout) and returns
// nil. Every etcd request is bounded, so Run never waits on an unresponsive
// etcd member longer than one request.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context, o *Office) error) error {
	bo := backoff.Backoff{Base: 250 * time.Millisecond, Max: 5 * time.Second}
	for {
		err := e.serve(ctx, lead)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			d := bo.Next()
			e.log.WarnContext(ctx, "election round ended", "retry_in", d.Round(time.Millisecond), slog.Any("err", err))
			if backoff.Sleep(ctx, d) != nil {
				return nil
			}
			continue
		}
		bo.Reset()
	}
}

// serve runs one lease: grant it, keep it alive, campaign with it, and
// lead as long as it lasts. It revokes the lease when it returns.
func (e *Elector) serve(ctx context.Context, lead func(ctx context.Context, o *Office) error) error {
	l, err := e.grant(ctx)
	if err != nil {
		return err
	}
	kctx, kstop := context.WithCancel(ctx)
	kdone := make(chan struct{})
	go func() { defer close(kdone); e.keepAlive(kctx, l) }()
	if e.cfg.OnLease != nil {
		e.cfg.OnLease(l.id)
	}
	// On shutdown, resign at once: the next master need not wait for our
	// duties to wind down (their writes are fenced).
	stopResign := context.AfterFunc(ctx, func() { e.revoke(ctx, l) })
	defer func() {
		stopResign()
		kstop()
		<-kdone
		e.revoke(ctx, l)
	}()

	value, err := json.Marshal(electionValue{Candidate: e.cfg.Candidate, TrustWindowMS: e.window().Milliseconds()})
	if err != nil {
		return err
	}
	for {
		c, err := e.campaign(ctx, l, string(value))
		if err != nil {
			return err
		}
		err = e.lead(ctx, l, c, lead)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrKeyDeleted):
			// Our place in line is gone with the key: stand again.
			e.log.WarnContext(ctx, "lost master office", "term", c.rev, slog.Any("err", err))
			continue
		case err != nil:
			// Deposed, the lease lost: the round ends (and the caller
			// says so); the office ended here, said in the same words.
			e.log.WarnContext(ctx, "lost master office", "term", c.rev, slog.Any("err", err))
			return err
		}
	}
}

// lease is a granted etcd lease and what this node knows of it.
type lease struct {
	id clientv3.LeaseID
	// key is our election key under this lease (it exists only while we
	// campaign; reading it confirms keep-alives either way).
	key string
	ttl time.Duration

	mu      sync.Mutex
	renewed time.Time // send time of the last answered keep-alive
	margin  time.Duration
	changed chan struct{} // closed and replaced at each answered keep-alive
	lost    chan struct{} // closed when the lease is known to be gone
	lostErr error
	revoked sync.Once
}

func (l *lease) trustedUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed.Add(l.ttl - l.margin)
}

func (l *lease) markRenewed(sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sent.After(l.renewed) {
		l.renewed = sent
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *lease) markLost(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostErr == nil {
		l.lostErr = err
		close(l.lost)
	}
}

func (l *lease) renewals() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

func (l *lease) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostErr
}

// grant obtains a new lease. A grant is applied through raft, by the
// leader of the term it commits in, so etcd keeps the lease for at least
// its TTL from then: its send time opens the first trust window.
func (e *Elector) grant(ctx context.Context) (*lease, error) {
	sent := e.now()
	gctx, cancel := context.WithTimeout(ctx, e.t.request)
	defer cancel()
	resp, err := e.cfg.Client.Grant(gctx, int64(e.cfg.TTL/time.Second))
	if err != nil {
		return nil, fmt.Errorf("grant etcd lease: %w", err)
	}
	return &lease{
		id: resp.ID, key: fmt.Sprintf("%s%x", ElectionPrefix(e.cfg.Prefix), int64(resp.ID)),
		ttl: e.cfg.TTL, renewed: sent, margin: e.cfg.TrustMargin,
		changed: make(chan struct{}), lost: make(chan struct{}),
	}, nil
}

// keepAlive renews l every renew period, one bounded request at a time,
// until ctx is done or etcd says the lease is gone. A renewal that fails,
// or that a read does not confirm (renew), is retried at once: the next
// request goes to the next member, so an unresponsive member or a deposed
// raft leader costs one attempt.
func (e *Elector) keepAlive(ctx context.Context, l *lease) {
	failingSince := time.Time{}
	for {
		sent := e.now()
		err := e.renew(ctx, l, sent)
		// The next renewal is due a renew period after this one was sent,
		// however long it took to be answered.
		wait := jitter(e.t.renew) - e.now().Sub(sent)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			if !failingSince.IsZero() {
				e.log.InfoContext(ctx, "etcd keep-alive answered again", "after", e.now().Sub(failingSince).Round(time.Millisecond))
				failingSince = time.Time{}
			}
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			l.markLost(fmt.Errorf("%w: lease %x: %v", ErrSessionLost, int64(l.id), err))
			return
		default:
			switch {
			case !failingSince.IsZero():
				e.log.DebugContext(ctx, "etcd keep-alive failed again", slog.Any("err", err))
			case errors.Is(err, errUnconfirmed):
				// An etcd leader change: usually confirmed on the next try.
				failingSince = sent
				e.log.InfoContext(ctx, "etcd keep-alive answered in an older raft term; sending it again", "lease", fmt.Sprintf("%x", int64(l.id)),
					"trusted_until", l.trustedUntil().Format(time.RFC3339Nano), slog.Any("err", err))
			default:
				failingSince = sent
				e.log.WarnContext(ctx, "etcd keep-alive failed; retrying", "lease", fmt.Sprintf("%x", int64(l.id)),
					"trusted_until", l.trustedUntil().Format(time.RFC3339Nano), slog.Any("err", err))
			}
			// Retry soon; a timed-out attempt already waited.
			wait = jitter(50 * time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(max(wait, 0)):
		}
	}
}

// errUnconfirmed means a keep-alive was answered in a raft term that a
// linearizable read sent after the answer does not see.
var errUnconfirmed = errors.New("keep-alive not confirmed")

// renew sends one keep-alive for l (at sent) and counts it, moving the
// trust window to sent + TTL − margin, only once a linearizable read sent
// after its answer returns the same raft term (the term of the last entry
// the answering member had applied, read from the response headers).
//
// A keep-alive is not linearizable: etcd renews a lease in its raft
// leader's memory, and a leader that was deposed without knowing it yet
// (one frozen, or starved of CPU, while the others elected a new leader)
// still answers keep-alives, although the new leader, which alone can
// expire the lease, never saw them. A linearizable read is confirmed by a
// quorum in the current term. So if the read, sent after the keep-alive was
// answered, sees the keep-alive's term, that term's leader was still the
// leader after it renewed the lease: the renewal was the real one, made
// while the lease, and our key, existed. A counted keep-alive was thus sent
// before our key was deleted, however etcd ends the lease, and our window
// ends less than a window after that deletion: what a successor waits out
// (actFrom). If the read sees a later term, the renewal may have gone to a
// deposed leader, which can answer after our key is gone too, and it is not
// counted; the next keep-alive goes to another member. See doc.go.
//
// A "lease not found" answer is confirmed the same way: a deposed leader
// does not know the leases granted after it was deposed, and an office
// must not end on its word.
func (e *Elector) renew(ctx context.Context, l *lease, sent time.Time) error {
	resp, kaErr := call(ctx, e.t.attempt, func(ctx context.Context) (*clientv3.LeaseKeepAliveResponse, error) {
		return e.cfg.Client.KeepAliveOnce(ctx, l.id)
	})
	if kaErr != nil && (resp == nil || !errors.Is(kaErr, rpctypes.ErrLeaseNotFound)) {
		return kaErr
	}
	if faultinject.Off(faultinject.Confirm) {
		if kaErr == nil {
			l.markRenewed(sent)
			e.logRenewal(ctx, l, resp.ResponseHeader, sent)
		}
		return kaErr
	}
	read, err := e.confirmRead(ctx, l)
	if err != nil {
		return fmt.Errorf("confirm the keep-alive with a read: %w", err)
	}
	h := resp.ResponseHeader
	if h == nil {
		h = &etcdserverpb.ResponseHeader{}
	}
	if h.RaftTerm != read.Header.RaftTerm {
		return fmt.Errorf("%w: answered by member %x in raft term %d, a read sent after it sees term %d",
			errUnconfirmed, h.MemberId, h.RaftTerm, read.Header.RaftTerm)
	}
	if kaErr != nil {
		return kaErr // lease not found, and confirmed
	}
	l.markRenewed(sent)
	e.logRenewal(ctx, l, h, sent)
	return nil
}

// logRenewal logs a keep-alive counted: the fault suite reads these lines
// to report the leases etcd removed earlier than a TTL after a "sent".
func (e *Elector) logRenewal(ctx context.Context, l *lease, h *etcdserverpb.ResponseHeader, sent time.Time) {
	if h == nil {
		h = &etcdserverpb.ResponseHeader{}
	}
	e.log.DebugContext(ctx, "etcd keep-alive answered", "lease", fmt.Sprintf("%x", int64(l.id)),
		"member", fmt.Sprintf("%x", h.MemberId), "raft_term", h.RaftTerm,
		"sent", sent.Format(time.RFC3339Nano), "trusted_until", l.trustedUntil().Format(time.RFC3339Nano),
		"rtt", e.now().Sub(sent).Round(time.Millisecond))
}

// revoke resigns: it deletes the lease (and with it our election key) so
// the next candidate takes office at once. Best effort and bounded: an
// unreachable etcd expires the lease after its TTL anyway.
func (e *Elector) revoke(ctx context.Context, l *lease) {
	l.revoked.Do(func() { e.revokeOnce(ctx, l) })
}

func (e *Elector) revokeOnce(ctx context.Context, l *lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.ResignTimeout)
	defer cancel()
	// An office on this lease ends first (on shutdown it may not have seen
	// its context end yet): then say so, so that the successor need not
	// wait out our window, and only then revoke.
	if o := e.Office(); o != nil && o.lease == l {
		o.depose(errResigned)
		e.log.InfoContext(ctx, "left master office to resign; the next master acts at once", "term", o.Term)
	}
	mctx, mcancel := context.WithTimeout(rctx, e.cfg.ResignTimeout/2) // the revocation keeps the other half
	e.markResigned(mctx, l)
	mcancel()
	e.log.DebugContext(ctx, "revoking the etcd lease", "lease", fmt.Sprintf("%x", int64(l.id)))
	if _, err := e.cfg.Client.Revoke(rctx, l.id); err != nil && l.err() == nil {
		e.log.WarnContext(ctx, "could not revoke the etcd lease; it expires after its TTL", "lease", fmt.Sprintf("%x", int64(l.id)), slog.Any("err", err))
	}
}

// RevokeLease revokes lease id for a holder whose process is gone
// (`enginehealth release-lease`, run by systemd once the daemon's
// process has exited): its election key goes with it, and the next
// candidate takes office at once instead of after the lease's TTL. It
// sends the revocation as the elector sends its requests (call: each
// attempt bounded by attempt, a failed one sent again to two members at
// once), within ctx. A lease etcd no longer has (expired, revoked
// already, or by a first attempt that timed out and was applied all the
// same) is no error: revoked is false then.
//
// It writes no resignation marker (ResignedPrefix), unlike a holder that
// resigns: the marker says that the holder stopped acting, and only the
// holder knows that. The successor therefore waits out the holder's
// trust window from the key's deletion, as after an expiry, and a
// revocation made in error (the holder alive after all) costs a
// failover, never two acting masters.
//
// log, when not nil, gets the elector's debug line before the revocation
// ("revoking the etcd lease", component leader).
func RevokeLease(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID, attempt time.Duration, log *slog.Logger) (revoked bool, err error) {
	if log != nil {
		log.With("component", "leader").DebugContext(ctx, "revoking the etcd lease", "lease", fmt.Sprintf("%x", int64(id)))
	}
	_, err = call(ctx, attempt, func(ctx context.Context) (*clientv3.LeaseRevokeResponse, error) {
		return cli.Revoke(ctx, id)
	})
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("revoke etcd lease %x: %w", int64(id), err)
	}
	return true, nil
}

// LeaseHolders returns, for lease id, the candidates named by the
// election keys under prefix attached to it, and the other keys
// attached to it (outside prefix, or not an election value); found is
// false when the lease is gone. Before revoking a lease a file names
// (release-lease), whose it is.
func LeaseHolders(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID, prefix string, attempt time.Duration) (cands []Candidate, others []string, found bool, err error) {
	ttl, err := call(ctx, attempt, func(ctx context.Context) (*clientv3.LeaseTimeToLiveResponse, error) {
		return cli.TimeToLive(ctx, id, clientv3.WithAttachedKeys())
	})
	if err != nil {
		return nil, nil, false, fmt.Errorf("read etcd lease %x: %w", int64(id), err)
	}
	if ttl.TTL < 0 {
		return nil, nil, false, nil
	}
	for _, k := range ttl.Keys {
		key := string(k)
		if !strings.HasPrefix(key, prefix) {
			others = append(others, key)
			continue
		}
		resp, err := call(ctx, attempt, func(ctx context.Context) (*clientv3.GetResponse, error) { return cli.Get(ctx, key) })
		if err != nil {
			return nil, nil, true, fmt.Errorf("read %s: %w", key, err)
		}
		var c Candidate
		if len(resp.Kvs) == 0 || json.Unmarshal(resp.Kvs[0].Value, &c) != nil || c.Name == "" {
			others = append(others, key)
			continue
		}
		cands = append(cands, c)
	}
	return cands, others, true, nil
}

// errResigned ends an office whose node resigns.
var errResigned = errors.New("leader: resigned")

// markResigned writes l's resignation marker (ResignedPrefix), under a
// lease of its own that lives resignedTTL. Best effort: without it the
// successor waits out our trust window.
func (e *Elector) markResigned(ctx context.Context, l *lease) {
	g, err := e.cfg.Client.Grant(ctx, resignedTTL)
	if err == nil {
		_, err = e.cfg.Client.Put(ctx, fmt.Sprintf("%s%x", ResignedPrefix(e.cfg.Prefix), int64(l.id)), "", clientv3.WithLease(g.ID))
	}
	if err != nil {
		e.log.DebugContext(ctx, "could not mark the lease resigned; the next master waits out our trust window", slog.Any("err", err))
	}
}

// confirmRead reads l's key (linearizable, count only); any read sent
// after the keep-alive was answered confirms it, so one that fails is
// retried (call) without another keep-alive.
func (e *Elector) confirmRead(ctx context.Context, l *lease) (*clientv3.GetResponse, error) {
	return call(ctx, e.t.attempt, func(ctx context.Context) (*clientv3.GetResponse, error) {
		return e.cfg.Client.Get(ctx, l.key, clientv3.WithCountOnly())
	})
}

// call runs op once, bounded by attempt, and if it fails (not with "lease
// not found", which is an answer, nor because ctx is done) runs it twice
// more at once, bounded by attempt, and returns the first success or the
// last failure. The client sends each request to the next member in turn,
// so of two requests sent together one goes to a member other than the
// one that did not answer, whatever the other goroutines' requests do
// with the order (a retry sent alone can land on the same member again
// and again: seen with a frozen member and two live ones).
func call[T any](ctx context.Context, attempt time.Duration, op func(context.Context) (T, error)) (T, error) {
	actx, cancel := context.WithTimeout(ctx, attempt)
	v, err := op(actx)
	cancel()
	if err == nil || ctx.Err() != nil || errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return v, err
	}
	type result struct {
		v   T
		err error
	}
	results := make(chan result, 2)
	hctx, hcancel := context.WithTimeout(ctx, attempt)
	defer hcancel()
	for range 2 {
		go func() {
			v, err := op(hctx)
			results <- result{v, err}
		}()
	}
	var last result
	for range 2 {
		if last = <-results; last.err == nil || errors.Is(last.err, rpctypes.ErrLeaseNotFound) {
			break
		}
	}
	return last.v, last.err
}

// candidacy is our key in the election.
type candidacy struct {
	key string
	rev int64 // create revision: the term if elected
	// firstRead is when the first read of the election of this candidacy
	// was answered; ahead: every key seen ahead of ours (lower create
	// revision), by key. A holder that may still believe in its trust
	// window is one of them, or one whose key was gone before firstRead.
	firstRead time.Time
	ahead     map[string]*aheadKey
	// actFrom is when an office of this candidacy may start to act (see
	// Office.ActingFrom).
	actFrom time.Time
}

// aheadKey is a key seen ahead of ours.
type aheadKey struct {
	lease  int64
	window time.Duration // its holder's trust window (from its value)
	goneBy time.Time     // when a read first found it gone (zero: not yet)
}

// electionValue is what a candidate's key holds: the Candidate, and its
// trust window, so that a successor knows how long to wait it out.
type electionValue struct {
	Candidate
	TrustWindowMS int64 `json:"trust_window_ms"`
}

// ResignedPrefix returns the prefix of the resignation markers under a
// cluster prefix: "<prefix>resigned/<lease id in hex>", written by a
// holder that stopped acting, just before it revokes that lease, so that
// its successor need not wait out its trust window. Each lives a minute.
func ResignedPrefix(prefix string) string { return prefix + "resigned/" }

// resignedTTL is how long a resignation marker lives (seconds).
const resignedTTL = 60

// campaign makes sure our key exists under the election prefix and waits
// until it is the oldest (the leader key) while our trust window is open.
func (e *Elector) campaign(ctx context.Context, l *lease, value string) (candidacy, error) {
	prefix := ElectionPrefix(e.cfg.Prefix)
	c := candidacy{key: l.key, ahead: map[string]*aheadKey{}}
	cli := e.cfg.Client
	e.log.DebugContext(ctx, "campaigning", "key", c.key)
	for {
		if err := l.err(); err != nil {
			return c, err
		}
		if c.rev == 0 {
			rctx, cancel := context.WithTimeout(ctx, e.t.request)
			sent := e.now()
			resp, err := cli.Txn(rctx).
				If(clientv3.Compare(clientv3.CreateRevision(c.key), "=", 0)).
				Then(clientv3.OpPut(c.key, value, clientv3.WithLease(l.id))).
				Else(clientv3.OpGet(c.key)).Commit()
			cancel()
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				// A put is applied through raft: etcd's word on the lease.
				l.markLost(fmt.Errorf("%w: lease %x: %v", ErrSessionLost, int64(l.id), err))
				return c, l.err()
			}
			if err != nil {
				if werr := e.retryPause(ctx, l, sent); werr != nil {
					return c, werr
				}
				continue
			}
			c.rev = resp.Header.Revision
			if !resp.Succeeded {
				// The key survived an earlier round on this lease: our
				// place in line (and term) is kept.
				c.rev = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
			}
		}

		// Atomically: is our key still there, and which keys are ahead of
		// it (we are first when none is)?
		sent := e.now()
		resp, err := call(ctx, e.t.attempt, func(ctx context.Context) (*clientv3.TxnResponse, error) {
			return cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.rev)).
				Then(clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithMaxCreateRev(c.rev-1),
					clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))).Commit()
		})
		if err != nil {
			e.log.DebugContext(ctx, "read election failed", slog.Any("err", err))
			if werr := e.retryPause(ctx, l, sent); werr != nil {
				return c, werr
			}
			continue
		}
		if !resp.Succeeded {
			e.log.WarnContext(ctx, "our election key disappeared; standing again", "key", c.key)
			c = candidacy{key: l.key, ahead: map[string]*aheadKey{}}
			continue
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		c.seen(kvs, e.now(), e.window())
		if len(kvs) > 0 {
			e.log.DebugContext(ctx, "read election", "first", string(kvs[0].Key), "revision", resp.Header.Revision)
		}
		if len(kvs) == 0 {
			c.actFrom = e.actFrom(ctx, c)
			if err := e.awaitTrust(ctx, l); err != nil {
				return c, err
			}
			return c, nil
		}
		// Wait for a deletion under the prefix, or poll again. The watch is
		// bounded too: clientv3 shares one stream among watches, and on an
		// unresponsive member even registering a watch waits.
		wctx, wcancel := context.WithTimeout(ctx, jitter(e.t.poll))
		w := cli.Watch(clientv3.WithRequireLeader(wctx), prefix, clientv3.WithPrefix(),
			clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterPut())
		err = e.pauseUntil(ctx, wctx, l, w)
		wcancel()
		if err != nil {
			return c, err
		}
	}
}

// seen records a read of the keys ahead of ours, answered at at.
func (c *candidacy) seen(kvs []*mvccpb.KeyValue, at time.Time, own time.Duration) {
	if c.firstRead.IsZero() {
		c.firstRead = at
	}
	present := map[string]bool{}
	for _, kv := range kvs {
		present[string(kv.Key)] = true
		if _, ok := c.ahead[string(kv.Key)]; ok {
			continue
		}
		w := own
		var v electionValue
		if json.Unmarshal(kv.Value, &v) == nil && v.TrustWindowMS > 0 {
			w = max(w, time.Duration(v.TrustWindowMS)*time.Millisecond)
		}
		c.ahead[string(kv.Key)] = &aheadKey{lease: kv.Lease, window: w}
	}
	for k, a := range c.ahead {
		if !present[k] && a.goneBy.IsZero() {
			a.goneBy = at
		}
	}
}

// window is this node's trust window.
func (e *Elector) window() time.Duration { return e.cfg.TTL - e.cfg.TrustMargin }

// actFrom returns when an office of candidacy c, now first, may act: once
// no earlier holder can still believe in its trust window. A holder's
// window ends less than a window after its key is gone (its last counted
// keep-alive was sent while the key existed), whether etcd expired the
// lease on time, early, or it was revoked: so each key seen ahead is
// waited out from when it was found gone, and a key gone before this
// candidacy first read the election from that read. A holder that resigned
// (its marker: it stopped acting before it revoked) is not waited for.
func (e *Elector) actFrom(ctx context.Context, c candidacy) time.Time {
	if faultinject.Off(faultinject.Wait) {
		return time.Time{}
	}
	from := c.firstRead.Add(e.window())
	if len(c.ahead) == 0 {
		return from
	}
	rctx, cancel := context.WithTimeout(ctx, e.t.attempt)
	resp, err := e.cfg.Client.Get(rctx, ResignedPrefix(e.cfg.Prefix), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	cancel()
	resigned := map[string]bool{}
	if err == nil {
		for _, kv := range resp.Kvs {
			resigned[strings.TrimPrefix(string(kv.Key), ResignedPrefix(e.cfg.Prefix))] = true
		}
	}
	for _, a := range c.ahead {
		if !resigned[fmt.Sprintf("%x", a.lease)] {
			from = later(from, a.goneBy.Add(a.window))
		}
	}
	return from
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// retryPause paces the retry of a request sent at sent that failed. One
// that failed fast (refused, no leader) waits a poll period; one that timed
// out already waited and is retried at once: the balancer sends the next
// request to the next member, so an unresponsive member costs one attempt,
// not every one (a fixed request pattern would otherwise hit it each time).
func (e *Elector) retryPause(ctx context.Context, l *lease, sent time.Time) error {
	wait := jitter(e.t.poll) - e.now().Sub(sent)
	if wait <= 0 {
		return l.err()
	}
	pctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return e.pauseUntil(ctx, pctx, l, nil)
}

// pauseUntil waits for an event of w (if any), the end of wait, the lease's
// loss or the end of ctx, whichever comes first. A closed w does not end
// the wait early. It returns an error only when the lease is lost or ctx is
// done.
func (e *Elector) pauseUntil(ctx, wait context.Context, l *lease, w clientv3.WatchChan) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.lost:
			return l.err()
		case <-wait.Done():
			return nil
		case _, ok := <-w: // a nil channel never fires
			if !ok {
				w = nil
				continue
			}
			return nil
		}
	}
}

// awaitTrust waits until the trust window of l is open (a recent keep-alive
// was answered), l is lost, or ctx is done.
func (e *Elector) awaitTrust(ctx context.Context, l *lease) error {
	for {
		if e.now().Before(l.trustedUntil()) {
			return nil
		}
		ch := l.renewals()
		if e.now().Before(l.trustedUntil()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.lost:
			return l.err()
		case <-ch:
		}
	}
}

// lead runs the leader function for candidacy c until the office ends.
func (e *Elector) lead(ctx context.Context, l *lease, c candidacy, lead func(ctx context.Context, o *Office) error) error {
	lctx, lcancel := context.WithCancelCause(ctx)
	defer lcancel(nil)
	trusted := func() error {
		if until := l.trustedUntil(); !e.now().Before(until) {
			return fmt.Errorf("no etcd keep-alive confirmed since one sent at %s (trust window closed at %s)",
				until.Add(-(l.ttl - l.margin)).Format(time.RFC3339Nano), until.Format(time.RFC3339Nano))
		}
		if e.cfg.Gate != nil {
			return e.cfg.Gate()
		}
		return nil
	}
	office := &Office{Term: c.rev, Candidate: e.cfg.Candidate, ctx: lctx, end: lcancel, lease: l, trusted: trusted, now: e.now}
	office.actFrom = c.actFrom
	gdone := make(chan struct{})
	go func() { defer close(gdone); e.guard(lctx, lcancel, l, c) }()

	e.log.InfoContext(ctx, "elected master", "term", office.Term)
	e.setOffice(office)
	leadErr := lead(lctx, office)
	e.setOffice(nil)
	cause := context.Cause(lctx)
	lcancel(nil)
	<-gdone
	switch {
	case ctx.Err() != nil:
		e.log.InfoContext(ctx, "leaving master office on shutdown", "term", office.Term)
		return nil
	case leadErr != nil:
		return fmt.Errorf("master work of term %d failed: %w", office.Term, leadErr)
	case cause != nil:
		return cause
	}
	return nil
}

// guard ends the office (cancels its context with a cause) when the lease
// is known lost or the leader key is deleted or replaced, which it checks
// every renew period with a bounded read. Connection trouble alone does not
// end it: Office.Trusted suspends acting until a keep-alive is answered
// again. (No watch here: a watch stream stuck on an unresponsive member
// would hold the guard.)
func (e *Elector) guard(ctx context.Context, cancel context.CancelCauseFunc, l *lease, c candidacy) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.lost:
			if faultinject.Off(faultinject.Fencing) {
				<-ctx.Done() // a master never told it was deposed
				return
			}
			cancel(l.err())
			return
		case <-time.After(jitter(e.t.renew)):
		}
		resp, err := call(ctx, e.t.attempt, func(ctx context.Context) (*clientv3.GetResponse, error) {
			return e.cfg.Client.Get(ctx, c.key)
		})
		if err == nil && (len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != c.rev) && !faultinject.Off(faultinject.Fencing) {
			cancel(ErrKeyDeleted)
			return
		}
	}
}

// Holder is the current election holder as etcd sees it.
type Holder struct {
	Candidate
	Term int64
}

// ErrNoLeader means no node holds the election.
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
