package api

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Defaults of ServerOptions.
const (
	defaultReadTimeout    = 5 * time.Second
	defaultWriteTimeout   = 30 * time.Second
	defaultIdleTimeout    = 30 * time.Second
	defaultMaxHeaderBytes = 16 << 10
	defaultMaxConns       = 512
)

// ServerOptions tune the daemon's HTTP server and listener; a zero field
// takes its default.
type ServerOptions struct {
	// ReadTimeout bounds reading a whole request, headers and body, from
	// its first byte; default 5s (requests are small: bodies are at most
	// 64 KiB). A request whose body does not arrive in time is answered
	// 408 and its connection closed. POST /v1/check and /v1/recovery get
	// Config.LongTimeout once their body is read.
	ReadTimeout time.Duration
	// ReadHeaderTimeout bounds reading the request headers; default
	// ReadTimeout.
	ReadHeaderTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the
	// end of its answer; default 30s. POST /v1/check and /v1/recovery,
	// which can run for minutes, extend their own deadline to
	// Config.LongTimeout.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that carries no request
	// for that long; default 30s.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps the size of request headers; default 16 KiB.
	MaxHeaderBytes int
	// MaxConns caps the open connections, each a file descriptor; default
	// 512. At the cap the listener makes room for a new connection by
	// closing the one that has gone longest without a request in progress
	// (idle keep-alive, or headers not complete yet): held-open and
	// slow-header connections cannot lock out /healthz. When every
	// connection is serving a request, new ones wait in the kernel's
	// accept queue until one finishes.
	MaxConns int
}

func (o ServerOptions) withDefaults() ServerOptions {
	o.ReadTimeout = cmp.Or(o.ReadTimeout, defaultReadTimeout)
	o.ReadHeaderTimeout = cmp.Or(o.ReadHeaderTimeout, o.ReadTimeout)
	o.WriteTimeout = cmp.Or(o.WriteTimeout, defaultWriteTimeout)
	o.IdleTimeout = cmp.Or(o.IdleTimeout, defaultIdleTimeout)
	o.MaxHeaderBytes = cmp.Or(o.MaxHeaderBytes, defaultMaxHeaderBytes)
	o.MaxConns = cmp.Or(o.MaxConns, defaultMaxConns)
	return o
}

// NewServer returns the daemon's HTTP server for handler h (NewHandler):
// timeouts and header limit from opts, the server's own error log
// (accept errors, panics) through log. Serve it on a listener from
// NewListener: the server reports each connection's state to it.
func NewServer(h http.Handler, log *slog.Logger, opts ServerOptions) *http.Server {
	o := opts.withDefaults()
	return &http.Server{
		Handler:           withWriteDeadline(h, o.WriteTimeout),
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		ReadTimeout:       o.ReadTimeout,
		WriteTimeout:      o.WriteTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    o.MaxHeaderBytes,
		ErrorLog:          stdlog.New(&serverLog{log: log.With("component", "api")}, "", 0),
		ConnState:         trackConnState,
	}
}

// writeDeadlineKey holds when the server's WriteTimeout ends a request.
type writeDeadlineKey struct{}

// withWriteDeadline records in each request's context when the server's
// WriteTimeout will cut it, so a handler can shorten (never lengthen) it.
func withWriteDeadline(h http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), writeDeadlineKey{}, time.Now().Add(timeout))
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// serverLog turns the lines net/http writes to its error log into slog
// records, the line in the err field. Failed TLS handshakes (a port scan,
// a load balancer's TCP probe, a flood) are summed up, one record per
// handshakeLogEvery with how many failed, never one per connection.
type serverLog struct {
	log *slog.Logger

	mu         sync.Mutex
	handshakes int       // failed since the last record
	loggedAt   time.Time // of the last handshake record
}

// handshakeLogEvery spaces the records of failed TLS handshakes.
const handshakeLogEvery = 10 * time.Second

func (s *serverLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelWarn
	if strings.Contains(msg, "panic serving") {
		level = slog.LevelError
	}
	if strings.Contains(msg, "TLS handshake error") {
		s.mu.Lock()
		s.handshakes++
		n, now := s.handshakes, time.Now()
		if now.Sub(s.loggedAt) < handshakeLogEvery {
			s.mu.Unlock()
			return len(p), nil
		}
		s.handshakes, s.loggedAt = 0, now
		s.mu.Unlock()
		s.log.Warn("TLS handshakes failed (one record per 10 s at most)", "failed", n, "last_err", msg)
		return len(p), nil
	}
	s.log.Log(context.Background(), level, "http server error", "err", msg)
	return len(p), nil
}

// NewListener wraps ln to cap its open connections at opts.MaxConns (see
// ServerOptions.MaxConns). Only a server from NewServer tells it which
// connections carry a request; under another server every connection
// counts as busy, and the cap simply makes new connections wait.
func NewListener(ln net.Listener, log *slog.Logger, opts ServerOptions) net.Listener {
	return &connLimiter{
		Listener: ln,
		max:      opts.withDefaults().MaxConns,
		log:      log.With("component", "api"),
		conns:    map[*trackedConn]struct{}{},
		changed:  make(chan struct{}),
		closed:   make(chan struct{}),
	}
}

// capWarnEvery spaces the warnings of a listener at its cap.
const capWarnEvery = 10 * time.Second

// connLimiter is the listener of NewListener.
type connLimiter struct {
	net.Listener
	max       int
	log       *slog.Logger
	closed    chan struct{}
	closeOnce sync.Once

	mu    sync.Mutex
	conns map[*trackedConn]struct{}
	// changed is closed (and replaced) when a connection closes or stops
	// carrying a request: a waiting Accept looks again.
	changed  chan struct{}
	shed     int // connections closed to make room since the last warning
	warnedAt time.Time
}

// trackedConn is a connection of a connLimiter.
type trackedConn struct {
	net.Conn
	l *connLimiter
	// Guarded by l.mu.
	idle  bool      // no request in progress: may be closed to make room
	since time.Time // when it last became idle
	gone  bool      // closed or shed: no longer counted
}

// Accept returns the next connection once there is room for it.
func (l *connLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	for {
		l.mu.Lock()
		if len(l.conns) < l.max {
			l.conns[tc] = struct{}{}
			l.mu.Unlock()
			return tc, nil
		}
		victim := l.oldestIdleLocked()
		if victim != nil {
			l.dropLocked(victim)
			l.shed++
		}
		warn, shed := l.warnLocked()
		changed := l.changed
		l.mu.Unlock()
		if warn {
			if victim != nil {
				l.log.Warn("connection cap reached: closing connections that carry no request", "max_conns", l.max, "closed", shed)
			} else {
				l.log.Warn("connection cap reached and every connection is serving a request: new connections wait", "max_conns", l.max)
			}
		}
		if victim != nil {
			_ = victim.Conn.Close()
			continue
		}
		select {
		case <-changed:
		case <-l.closed:
			_ = c.Close()
			return nil, fmt.Errorf("accept: %w", net.ErrClosed)
		}
	}
}

// Close closes the listener (not its connections: the server does).
func (l *connLimiter) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// open returns the number of connections counted against the cap.
func (l *connLimiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

func (l *connLimiter) oldestIdleLocked() *trackedConn {
	var oldest *trackedConn
	for c := range l.conns {
		if c.idle && (oldest == nil || c.since.Before(oldest.since)) {
			oldest = c
		}
	}
	return oldest
}

func (l *connLimiter) dropLocked(c *trackedConn) {
	if c.gone {
		return
	}
	c.gone = true
	delete(l.conns, c)
	l.signalLocked()
}

func (l *connLimiter) signalLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// warnLocked reports whether to warn now about the cap, and how many
// connections were shed since the last warning.
func (l *connLimiter) warnLocked() (bool, int) {
	now := time.Now()
	if now.Sub(l.warnedAt) < capWarnEvery {
		return false, 0
	}
	l.warnedAt = now
	shed := l.shed
	l.shed = 0
	return true, shed
}

func (l *connLimiter) setState(c *trackedConn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.gone {
		return
	}
	switch s {
	case http.StateNew, http.StateIdle:
		c.idle, c.since = true, time.Now()
		l.signalLocked()
	case http.StateActive, http.StateHijacked:
		c.idle = false
	case http.StateClosed:
		l.dropLocked(c)
	}
}

// trackConnState is the http.Server.ConnState hook of NewServer. Over
// TLS (a tls.NewListener around NewListener's), the connection is the
// TLS one around ours: a connection still in its handshake is StateNew,
// idle, and may be closed to make room like a slow header.
func trackConnState(c net.Conn, s http.ConnState) {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	if tc, ok := c.(*trackedConn); ok {
		tc.l.setState(tc, s)
	}
}

// Close closes the connection and frees its place.
func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	c.l.dropLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
