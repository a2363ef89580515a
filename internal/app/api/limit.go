package api

import (
	"bytes"
	"container/list"
	"context"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
)

// DefaultMaxDBRequests is how many requests may read or write the database
// at once (Config.MaxDBRequests). The daemon gives the API a connection
// pool of this size of its own, apart from the pool its heartbeat and the
// master's work use, so readers cannot starve them.
const DefaultMaxDBRequests = 4

// dbWait is how long a request waits for a database slot before it is
// answered 503 busy; leaderWait is the shorter wait of /v1/leader, which
// must answer within a second.
const (
	dbWait     = time.Second
	leaderWait = 100 * time.Millisecond
)

// slots bounds the requests that use the database (a slot from before the
// query until the answer is built), and the bytes of built answers being
// written (a budget of answerBytes, held until the client has read the
// answer): however many clients ask, and however slowly they read, the
// daemon's memory for answers stays bounded, and a slow reader holds
// bytes of the budget, not a database slot.
type slots struct {
	ch       chan struct{}
	bytes    *semaphore.Weighted
	lastWarn atomic.Int64 // unix nanoseconds of the last busy warning
}

// answerWriteTimeout bounds the writing of one answer that holds budget.
const answerWriteTimeout = 10 * time.Second

// answerBytes is the budget of answers being written at once. An answer
// is at most a few MiB (events: maxEventText of text), so it always fits.
const answerBytes = 32 << 20

func newSlots(n int) *slots {
	return &slots{ch: make(chan struct{}, n), bytes: semaphore.NewWeighted(answerBytes)}
}

// acquire takes a slot, waiting at most wait. It returns the release
// function, or false when none came free (or the request went away).
func (s *slots) acquire(ctx context.Context, wait time.Duration) (func(), bool) {
	select {
	case s.ch <- struct{}{}:
		return func() { <-s.ch }, true
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case s.ch <- struct{}{}:
		return func() { <-s.ch }, true
	case <-t.C:
	case <-ctx.Done():
	}
	return nil, false
}

// limited runs next holding a database slot, into a buffer; the answer is
// then written holding its size of the byte budget. Without a slot or
// budget in time it answers 503 busy with Retry-After, and warns at most
// every 10 s.
func (h *handler) limited(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		release, ok := h.slots.acquire(r.Context(), dbWait)
		if !ok {
			h.busy(w, r)
			return
		}
		// next runs on its own, into its own buffer and header: a
		// database that stops answering holds lib/pq's read until the
		// connection's read deadline (35 s by default) whatever the
		// request's context says, and the client gets a 503 at
		// h.cfg.Timeout and a second rather than wait for it. next keeps
		// its slot until it returns, so such leftovers stay bounded.
		bw := &bufferedWriter{header: w.Header().Clone(), code: http.StatusOK}
		wait, cancelWait := context.WithTimeout(context.WithoutCancel(r.Context()), h.cfg.Timeout+answerGrace)
		panicked, err := pgdb.Await(wait, func(context.Context) (p any, _ error) {
			defer release()
			defer func() { p = recover() }()
			next(bw, r)
			return nil, nil
		})
		cancelWait()
		if err != nil {
			h.notAnswering(w, r)
			return
		}
		if panicked != nil {
			panic(panicked) // net/http's recovery logs it and drops the connection, as before
		}
		maps.Copy(w.Header(), bw.header)
		n := min(int64(bw.buf.Len()), answerBytes)
		// Not r's context: a request whose body failed to arrive (408) has
		// it cancelled, and still gets its answer.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), dbWait)
		err = h.slots.bytes.Acquire(ctx, n)
		cancel()
		if err != nil {
			h.busy(w, r)
			return
		}
		defer h.slots.bytes.Release(n)
		// A reader too slow to take the answer in answerWriteTimeout gives
		// its share of the budget back rather than hold it.
		deadline := time.Now().Add(answerWriteTimeout)
		if d, ok := r.Context().Value(writeDeadlineKey{}).(time.Time); ok && d.Before(deadline) {
			deadline = d // the server's own WriteTimeout comes first
		}
		_ = http.NewResponseController(w).SetWriteDeadline(deadline)
		w.WriteHeader(bw.code)
		_, _ = w.Write(bw.buf.Bytes())
	}
}

// bufferedWriter keeps an answer in memory until it is written whole.
type bufferedWriter struct {
	header http.Header
	code   int
	buf    bytes.Buffer
}

func (b *bufferedWriter) Header() http.Header         { return b.header }
func (b *bufferedWriter) WriteHeader(code int)        { b.code = code }
func (b *bufferedWriter) Write(p []byte) (int, error) { return b.buf.Write(p) }

// answerGrace is how much longer than its database timeout a request may
// take before it is answered 503 (notAnswering).
const answerGrace = time.Second

// notAnswering answers a request whose database work outlived its timeout:
// the database does not answer (it is frozen, or the path to it drops
// packets). The work may still end, and a change take effect, later.
func (h *handler) notAnswering(w http.ResponseWriter, r *http.Request) {
	h.reqLog(r).WarnContext(r.Context(), "the database did not answer in time", "timeout", (h.cfg.Timeout + answerGrace).String())
	w.Header().Set("Retry-After", "5")
	writeProblem(w, http.StatusServiceUnavailable, "database: no answer within "+(h.cfg.Timeout+answerGrace).String(),
		"PostgreSQL is not answering this node (down, frozen or cut off); a change asked for may still take effect when it answers")
}

// busy answers a request that found no database slot or answer budget.
func (h *handler) busy(w http.ResponseWriter, r *http.Request) {
	now := time.Now().UnixNano()
	if last := h.slots.lastWarn.Load(); now-last > int64(10*time.Second) && h.slots.lastWarn.CompareAndSwap(last, now) {
		h.reqLog(r).WarnContext(r.Context(), "API busy: every database slot or the answer budget is taken; refusing requests with 503 (warned at most every 10s)",
			"slots", cap(h.slots.ch), "answer_bytes", answerBytes)
	}
	w.Header().Set("Retry-After", "1")
	w.Header().Set(RefusedHeader, "busy")
	writeProblem(w, http.StatusServiceUnavailable, "busy: too many requests are using the database or being answered",
		strconv.Itoa(cap(h.slots.ch))+" database requests and "+strconv.Itoa(answerBytes>>20)+" MiB of answers at a time; try again")
}

// The lockout of addresses that fail to authenticate: after
// authFailLimit failed authentications from one address within
// authFailWindow, every request of it that needs authentication is
// answered 429 for authLockout, a right token included, and the lockout is
// logged once. A success does not clear the count: a holder of a read
// token could otherwise guess operate tokens between two of its own
// reads. At most authFailAddrs addresses are tracked, the one that failed
// least recently forgotten first, so a flood of addresses takes bounded
// memory.
const (
	authFailLimit  = 10
	authFailWindow = time.Minute
	authLockout    = time.Minute
	authFailAddrs  = 4096
)

// authFailures counts failed authentications by address.
type authFailures struct {
	mu    sync.Mutex
	now   func() time.Time
	max   int
	addrs map[string]*list.Element // of *failedAddr
	lru   *list.List               // least recently failed at the front
}

// failedAddr is what is known of one address.
type failedAddr struct {
	addr string
	// at holds the times (unix nanoseconds) of its last n failures (at most
	// authFailLimit), a ring whose oldest is at next once it is full.
	at      [authFailLimit]int64
	next, n int
	// until is the end of its lockout (unix nanoseconds), 0 when none.
	until int64
}

func newAuthFailures(maxAddrs int, now func() time.Time) *authFailures {
	return &authFailures{now: now, max: maxAddrs, addrs: map[string]*list.Element{}, lru: list.New()}
}

// locked returns how long addr stays locked out, when it is.
func (f *authFailures) locked(addr string) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.addrs[addr]
	if !ok {
		return 0, false
	}
	left := time.Duration(e.Value.(*failedAddr).until - f.now().UnixNano())
	return left, left > 0
}

// fail records a failed authentication from addr; true when it locks the
// address out.
func (f *authFailures) fail(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now().UnixNano()
	e, ok := f.addrs[addr]
	if ok {
		f.lru.MoveToBack(e)
	} else {
		if f.lru.Len() >= f.max {
			oldest := f.lru.Front()
			f.lru.Remove(oldest)
			delete(f.addrs, oldest.Value.(*failedAddr).addr)
		}
		e = f.lru.PushBack(&failedAddr{addr: addr})
		f.addrs[addr] = e
	}
	a := e.Value.(*failedAddr)
	a.at[a.next] = now
	a.next = (a.next + 1) % authFailLimit
	a.n = min(a.n+1, authFailLimit)
	// The last authFailLimit failures all within the window: lock it out,
	// and count afresh after the lockout.
	if a.n == authFailLimit && now-a.at[a.next] < int64(authFailWindow) {
		a.until = now + int64(authLockout)
		a.n = 0
		return true
	}
	return false
}

// tracked is how many addresses are known.
func (f *authFailures) tracked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.addrs)
}
