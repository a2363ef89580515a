package api

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"
)

// The console's sessions: an operator signs in once with a named token
// and is then known by a cookie (sessionCookie: HttpOnly, Secure,
// SameSite=Strict, path /console, expiring with the session). Sessions
// live in this node's memory only: a restart signs everyone out, and a
// session is good on the node that made it. The cookie's value is a
// random 256-bit id; the store keeps its SHA-256 only, so a lookup's
// timing says nothing about other sessions' ids.
//
// A session keeps the token it was made with: each request checks it
// again against the operators configured now (a token removed by a
// reload signs its sessions out; a role changed applies at once), and
// the console's actions call the API with it, as the CLI would.

const (
	sessionCookie = "eh_session"
	// DefaultSessionTTL is how long a console session lasts after its
	// sign-in (it is not extended by use).
	DefaultSessionTTL = 8 * time.Hour
	// maxSessions bounds the sessions kept at once, and
	// maxOperatorSessions those of one operator: past either, a sign-in
	// ends the oldest session (of that operator, first).
	// An operator signing in again and again ends only their own.
	maxSessions         = 10000
	maxOperatorSessions = 20
)

// session is one signed-in operator.
type session struct {
	// name is the operator's, when the session began; seq orders the
	// sessions by their start.
	name  string
	seq   uint64
	token string
	// csrf is the token every form of the session carries, and every
	// mutation must send back.
	csrf    string
	expires time.Time
	// flash is shown once, by the next page the session reads (the
	// result of an action, after its redirect).
	flash *flash
	// bulk serialises the session's bulk decisions (a double-click posts
	// one twice); decided is the last one made, its key and result (the
	// second post of a double-click shows the first's result).
	bulk    *sync.Mutex
	decided *decided
}

// decided is a bulk decision made: what it was made on (bulkKey) and what
// it did.
type decided struct {
	key string
	fl  flash
}

// flash is the result of an action, shown on the page it redirected to.
type flash struct {
	// For is that page (its path and query): another page the session
	// reads meanwhile does not show it.
	For  string
	OK   bool
	Text string
	// After is the newest event's id before the action: the page marks
	// the events after it that the action's operator wrote.
	After int64
}

type sessions struct {
	mu  sync.Mutex
	seq uint64
	m   map[[sha256.Size]byte]*session
	ttl time.Duration
	now func() time.Time
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{m: map[[sha256.Size]byte]*session{}, ttl: ttl, now: now}
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// create starts a session of operator name, signed in with token, and
// returns its cookie value and expiry.
func (s *sessions) create(name, token string) (string, time.Time) {
	id := randomToken()
	now := s.now()
	ss := &session{name: name, token: token, csrf: randomToken(), expires: now.Add(s.ttl), bulk: new(sync.Mutex)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	ss.seq = s.seq
	s.purgeLocked(now)
	mine := 0
	for _, v := range s.m {
		if v.name == name {
			mine++
		}
	}
	if mine >= maxOperatorSessions {
		s.evictLocked(func(v *session) bool { return v.name == name })
	}
	if len(s.m) >= maxSessions {
		s.evictLocked(func(*session) bool { return true })
	}
	s.m[sha256.Sum256([]byte(id))] = ss
	return id, ss.expires
}

// evictLocked ends the oldest session of those which (all last as
// long: the oldest expires first).
func (s *sessions) evictLocked(which func(*session) bool) {
	var first [sha256.Size]byte
	var oldest uint64
	for k, v := range s.m {
		if which(v) && (oldest == 0 || v.seq < oldest) {
			first, oldest = k, v.seq
		}
	}
	delete(s.m, first)
}

// purgeLocked drops the expired sessions.
func (s *sessions) purgeLocked(now time.Time) {
	for k, v := range s.m {
		if !now.Before(v.expires) {
			delete(s.m, k)
		}
	}
}

// get returns a copy of the session of cookie value id, if it exists
// and has not expired.
func (s *sessions) get(id string) (session, bool) {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.m[k]
	if !ok {
		return session{}, false
	}
	if !s.now().Before(ss.expires) {
		delete(s.m, k)
		return session{}, false
	}
	return *ss, true
}

// takeFlash returns the flash of the session of cookie value id when it
// is for page (a path and query), and forgets it: it is shown once, on
// its own page.
func (s *sessions) takeFlash(id, page string) *flash {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.m[sha256.Sum256([]byte(id))]
	if !ok || ss.flash == nil || ss.flash.For != page {
		return nil
	}
	f := ss.flash
	ss.flash = nil
	return f
}

// setFlash gives the session of cookie value id a result to show once.
func (s *sessions) setFlash(id string, f flash) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, ok := s.m[sha256.Sum256([]byte(id))]; ok {
		ss.flash = &f
	}
}

// lockBulk takes the bulk-decision lock of the session of cookie value
// id (a session that ended meanwhile: a lock of its own) and returns its
// unlock.
func (s *sessions) lockBulk(id string) func() {
	s.mu.Lock()
	mu := new(sync.Mutex)
	if ss, ok := s.m[sha256.Sum256([]byte(id))]; ok {
		mu = ss.bulk
	}
	s.mu.Unlock()
	mu.Lock()
	return mu.Unlock
}

// lastDecided returns the last bulk decision of the session of cookie
// value id, if it made one.
func (s *sessions) lastDecided(id string) (decided, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.m[sha256.Sum256([]byte(id))]
	if !ok || ss.decided == nil {
		return decided{}, false
	}
	return *ss.decided, true
}

// setDecided records the session's bulk decision of key, and gives it
// fl to show once.
func (s *sessions) setDecided(id, key string, fl flash) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, ok := s.m[sha256.Sum256([]byte(id))]; ok {
		ss.decided = &decided{key: key, fl: fl}
		ss.flash = &fl
	}
}

// drop ends the session of cookie value id.
func (s *sessions) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, sha256.Sum256([]byte(id)))
}

// csrfOK reports whether got is the session's CSRF token.
func (ss session) csrfOK(got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(ss.csrf)) == 1
}
