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
	// maxSessions bounds the sessions kept at once: past it, a sign-in
	// ends the session that would expire first.
	maxSessions = 10000
)

// session is one signed-in operator.
type session struct {
	token string
	// csrf is the token every form of the session carries, and every
	// mutation must send back.
	csrf    string
	expires time.Time
	// flash is shown once, by the next page the session reads (the
	// result of an action, after its redirect).
	flash *flash
}

// flash is the result of an action, shown on the page it redirected to.
type flash struct {
	OK   bool
	Text string
	// After is the newest event's id before the action: the page marks
	// the events after it that the action's operator wrote.
	After int64
}

type sessions struct {
	mu  sync.Mutex
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

// create starts a session for token and returns its cookie value and
// expiry.
func (s *sessions) create(token string) (string, time.Time) {
	id := randomToken()
	now := s.now()
	ss := &session{token: token, csrf: randomToken(), expires: now.Add(s.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= maxSessions {
		s.purgeLocked(now)
	}
	if len(s.m) >= maxSessions {
		var first [sha256.Size]byte
		var at time.Time
		for k, v := range s.m {
			if at.IsZero() || v.expires.Before(at) {
				first, at = k, v.expires
			}
		}
		delete(s.m, first)
	}
	s.m[sha256.Sum256([]byte(id))] = ss
	return id, ss.expires
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
// and has not expired, and takes its flash (shown once).
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
	out := *ss
	ss.flash = nil
	return out, true
}

// setFlash gives the session of cookie value id a result to show once.
func (s *sessions) setFlash(id string, f flash) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, ok := s.m[sha256.Sum256([]byte(id))]; ok {
		ss.flash = &f
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
