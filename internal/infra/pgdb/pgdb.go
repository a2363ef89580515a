// Package pgdb opens the daemon's PostgreSQL pool and applies the sidecar's
// schema migrations.
//
// Connections are made with a dialer whose reads time out: lib/pq's
// cancellation sends a CancelRequest and keeps reading the old socket, so a
// query on a partitioned connection would otherwise block forever, whatever
// its context says. Every session also carries statement_timeout and
// idle_in_transaction_session_timeout, so a stuck daemon never holds locks.
package pgdb

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Defaults of Config.
const (
	DefaultSchema           = "enginehealth"
	DefaultStatementTimeout = 30 * time.Second
	DefaultConnectTimeout   = 5 * time.Second
	DefaultMaxOpenConns     = 10
)

// Config of a pool.
type Config struct {
	// DSN in URL or key=value form. A secret: never log it.
	DSN string
	// ApplicationName shown in pg_stat_activity.
	ApplicationName string
	// StatementTimeout of every statement; default 30s.
	StatementTimeout time.Duration
	// ConnectTimeout of one connection attempt, also the slack added to
	// StatementTimeout for the network read deadline; default 5s.
	ConnectTimeout time.Duration
	// MaxOpenConns of the pool; default 10.
	MaxOpenConns int
	// ReadOnly means the pool only reads, so any server will do, a standby
	// too (target_session_attrs=any unless the DSN says otherwise).
	ReadOnly bool
	// Cluster, when set, checks each new connection's server against the
	// PostgreSQL cluster it has learnt (see Cluster); nil: none.
	Cluster *Cluster
}

// Open returns a pool for cfg. It does not connect: see Ping.
func Open(cfg Config) (*sqlx.DB, error) {
	stmt := cmp.Or(cfg.StatementTimeout, DefaultStatementTimeout)
	conn := cmp.Or(cfg.ConnectTimeout, DefaultConnectTimeout)
	pcfg, err := pq.NewConfig(cfg.DSN)
	if err != nil {
		// The error text may quote the DSN: do not wrap it.
		return nil, fmt.Errorf("database DSN is malformed")
	}
	if pcfg.Runtime == nil {
		pcfg.Runtime = map[string]string{}
	}
	ms := strconv.FormatInt(stmt.Milliseconds(), 10)
	pcfg.Runtime["statement_timeout"] = ms
	pcfg.Runtime["idle_in_transaction_session_timeout"] = strconv.FormatInt((stmt + conn).Milliseconds(), 10)
	// The sidecar's statements are short and index-driven; JIT compiling
	// them costs more than it saves (a repair batch's pick, estimated
	// high for its per-row primary-key probes, spent 60 ms compiling to
	// run for 13). A DSN that sets jit keeps its choice.
	if _, ok := pcfg.Runtime["jit"]; !ok {
		pcfg.Runtime["jit"] = "off"
	}
	if pcfg.ConnectTimeout == 0 {
		pcfg.ConnectTimeout = conn
	}
	if cfg.ApplicationName != "" && pcfg.ApplicationName == "" {
		pcfg.ApplicationName = cfg.ApplicationName
	}
	// The sidecar writes: a connection to a server that takes no writes
	// (a standby, before or without its promotion, behind an address a
	// failover has not moved yet) is refused when it is made, as
	// database unavailable, not kept in the pool to fail every write.
	// With several hosts in the DSN (host=a,b), the one that takes
	// writes is found.
	switch pcfg.TargetSessionAttrs {
	case "":
		pcfg.TargetSessionAttrs = pq.TargetSessionAttrsReadWrite
		if cfg.ReadOnly {
			pcfg.TargetSessionAttrs = pq.TargetSessionAttrsAny
		}
	case pq.TargetSessionAttrsReadOnly, pq.TargetSessionAttrsStandby, pq.TargetSessionAttrsPreferStandby:
		return nil, fmt.Errorf("database DSN: target_session_attrs=%s: the sidecar writes; use read-write (the default) or primary", pcfg.TargetSessionAttrs)
	}
	connector, err := pq.NewConnectorConfig(pcfg)
	if err != nil {
		return nil, fmt.Errorf("database connector: %w", err)
	}
	conns := &connSet{m: map[*deadlineConn]struct{}{}}
	connector.Dialer(deadlineDialer{connect: conn, read: stmt + conn, resolver: resolver, conns: conns})
	var dc driver.Connector = writable{connector}
	if cfg.Cluster != nil {
		dc = guardConnector{Connector: dc, cluster: cfg.Cluster}
	}
	sdb := sql.OpenDB(dc)
	pools.Store(sdb, conns)
	db := sqlx.NewDb(sdb, "postgres")
	maxConns := cmp.Or(cfg.MaxOpenConns, DefaultMaxOpenConns)
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return db, nil
}

// Reset closes every connection of a pool opened by Open, idle or in
// use: a statement waiting for a server that stopped answering (a frozen
// primary, a path that drops packets) fails now instead of at its read
// deadline, and the next statements dial anew (an address a failover
// moved, the next host of a host list). Statements in flight elsewhere
// on the pool fail too, as on a broken network: callers retry them.
func Reset(db *sqlx.DB) {
	db.SetMaxIdleConns(0)
	db.SetMaxIdleConns(db.Stats().MaxOpenConnections)
	if v, ok := pools.Load(db.DB); ok {
		v.(*connSet).closeAll()
	}
}

// pools maps the pools of Open to their connections (Reset).
var pools sync.Map // *sql.DB → *connSet

// connSet is a pool's open network connections.
type connSet struct {
	mu sync.Mutex
	m  map[*deadlineConn]struct{}
}

func (s *connSet) add(c *deadlineConn) {
	s.mu.Lock()
	s.m[c] = struct{}{}
	s.mu.Unlock()
}

func (s *connSet) remove(c *deadlineConn) {
	s.mu.Lock()
	delete(s.m, c)
	s.mu.Unlock()
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	cs := make([]*deadlineConn, 0, len(s.m))
	for c := range s.m {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
}

// Hosts returns how many hosts a DSN names (host=a,b: 2), at least 1:
// making a connection may take a connect timeout for each.
func Hosts(dsn string) int {
	c, err := pq.NewConfig(dsn)
	if err != nil {
		return 1
	}
	return 1 + len(c.Multi)
}

// Ping checks that the database answers, bounded by timeout.
func Ping(ctx context.Context, db *sqlx.DB, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}

// ErrReadOnly means the server takes no writes (a standby, or a server set
// read-only); the sidecar treats it as the database being unavailable.
var ErrReadOnly = errors.New("the server takes no writes (a standby not promoted yet, or read-only)")

// writable names lib/pq's refusal of a server that takes no writes
// (target_session_attrs; plain errors) as ErrReadOnly.
type writable struct{ *pq.Connector }

func (w writable) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := w.Connector.Connect(ctx)
	if err != nil {
		for _, s := range []string{"session is read-only", "server is in hot standby mode"} {
			if strings.Contains(err.Error(), s) {
				return nil, fmt.Errorf("%w: %w", ErrReadOnly, err)
			}
		}
	}
	return c, err
}

// resolver looks the DSN's host names up (nil: the default resolver); a
// test sets it.
var resolver *net.Resolver

// deadlineDialer dials with a timeout and returns connections whose every
// read must complete within read.
//
// lib/pq hands it the DSN's host and port unresolved (a host list,
// host=a,b, it tries one host after the other, each with its own connect
// timeout). A name with several addresses (A and AAAA records) is
// resolved and dialled by net.Dialer: one address after the other in the
// resolver's order (IPv6 and IPv4 raced 300 ms apart when it has both),
// the connect timeout shared out between them (each gets the time left
// divided by the addresses left, at least 2 s): an address that does not
// answer costs its share, then the next is tried. An address that accepts
// the connection and then never answers is not left for the next: lib/pq
// bounds the start-up by the connect timeout, which fails the attempt.
type deadlineDialer struct {
	connect  time.Duration
	read     time.Duration
	resolver *net.Resolver
	conns    *connSet // the pool's, for Reset; nil: none
}

func (d deadlineDialer) Dial(network, address string) (net.Conn, error) {
	return d.DialTimeout(network, address, d.connect)
}

func (d deadlineDialer) DialTimeout(network, address string, _ time.Duration) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

func (d deadlineDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var (
		mu    sync.Mutex
		tried []string // the addresses dialled, in order
	)
	nd := net.Dialer{Timeout: d.connect, KeepAlive: 15 * time.Second, Resolver: d.resolver,
		ControlContext: func(_ context.Context, _, addr string, _ syscall.RawConn) error {
			mu.Lock()
			tried = append(tried, addr)
			mu.Unlock()
			return nil
		}}
	c, err := nd.DialContext(ctx, network, address)
	if err != nil {
		mu.Lock()
		defer mu.Unlock()
		if len(tried) > 1 {
			// net.Dialer says the first address's error alone.
			return nil, fmt.Errorf("no address of %s connected within the connect timeout %s (tried %s in turn): %w",
				address, d.connect, strings.Join(tried, ", "), err)
		}
		return nil, err
	}
	dc := &deadlineConn{Conn: c, read: d.read, set: d.conns}
	if d.conns != nil {
		d.conns.add(dc)
	}
	return dc, nil
}

// deadlineConn bounds every read by read from its start, and by a
// deadline the driver set, whichever comes first: lib/pq bounds the whole
// connection set-up (TLS, authentication) by the connect timeout with
// SetDeadline, and clears it once the connection is up. (Without the
// second, each read's own deadline replaced the driver's: a server that
// accepted the connection and never answered held a connection attempt
// for read, 35 s by default, not the connect timeout.)
type deadlineConn struct {
	net.Conn
	read time.Duration
	set  *connSet

	mu    sync.Mutex
	fixed time.Time // the driver's deadline; zero: none
}

func (c *deadlineConn) Close() error {
	if c.set != nil {
		c.set.remove(c)
	}
	return c.Conn.Close()
}

func (c *deadlineConn) SetDeadline(t time.Time) error {
	c.setFixed(t)
	return c.Conn.SetDeadline(t)
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.setFixed(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *deadlineConn) setFixed(t time.Time) {
	c.mu.Lock()
	c.fixed = t
	c.mu.Unlock()
}

func (c *deadlineConn) Read(b []byte) (int, error) {
	d := time.Now().Add(c.read)
	c.mu.Lock()
	if !c.fixed.IsZero() && c.fixed.Before(d) {
		d = c.fixed
	}
	c.mu.Unlock()
	if err := c.Conn.SetReadDeadline(d); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

// Tx is a transaction of InTx: a *sqlx.Tx that can run functions once it
// has committed.
type Tx struct {
	*sqlx.Tx
	committed []func()
}

// AfterCommit runs fn once the transaction has committed, in the order
// given; never when it rolls back or its commit fails. (What fn reports,
// such as a log line, is then true.)
func (t *Tx) AfterCommit(fn func()) { t.committed = append(t.committed, fn) }

// InTx runs fn in a transaction: committed when fn returns nil, rolled back
// otherwise.
func InTx(ctx context.Context, db *sqlx.DB, fn func(*Tx) error) error {
	sx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	tx := &Tx{Tx: sx}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	for _, f := range tx.committed {
		f()
	}
	return nil
}

// IsLockTimeout reports whether err is a statement cancelled by
// lock_timeout (SQLSTATE 55P03, lock_not_available).
func IsLockTimeout(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code == "55P03"
}

// IsCanceled reports whether err is a statement the server cancelled
// (SQLSTATE 57014, query_canceled): its statement_timeout, or a cancel
// request, which lib/pq sends when the statement's context ends.
func IsCanceled(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code == "57014"
}

// Summary names the class of a failure in words fit for any client: a
// timeout, an unreachable database, or a database error by its SQLSTATE
// code and name. It never carries what an error's text may: addresses,
// SQL, values or the driver's message. The whole error belongs in the
// log.
func Summary(err error) string {
	var pqErr *pq.Error
	var wrong *WrongClusterError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &wrong):
		return "database unavailable: another PostgreSQL cluster answers at its address (its system_identifier is not the one recorded at migration)"
	case errors.As(err, &pqErr) && pqErr.Code == "57014":
		return "database statement timed out"
	case errors.Is(err, ErrReadOnly), errors.As(err, &pqErr) && pqErr.Code == "25006":
		return "database unavailable (the server takes no writes: a standby, or read-only)"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timed out"
	case Unavailable(err):
		return "database unavailable"
	case errors.As(err, &pqErr):
		return fmt.Sprintf("database error %s (%s)", pqErr.Code, pqErr.Code.Name())
	}
	return "failed (the node's log has the cause)"
}

// Unavailable reports whether err says the database could not be used
// for a while, rather than that a statement is wrong: the connection
// broke or could not be made, the server is shutting down, starting up or
// in recovery, or takes no writes (a standby: a failover in progress), or
// has no connection slot left. Such a failure is retried, and logged as
// the database's state, never as a fault of the sidecar.
func Unavailable(err error) bool {
	var pqErr *pq.Error
	var netErr net.Error
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The caller's own deadline (which satisfies net.Error) says
		// nothing of the database.
		return false
	case errors.Is(err, ErrReadOnly), errors.Is(err, driver.ErrBadConn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case errors.As(err, new(*WrongClusterError)):
		return true // another cluster behind the address: ours is not there
	case errors.As(err, &pqErr):
		switch pqErr.Code {
		case "25006", // read_only_sql_transaction: a standby
			"57P01", "57P02", "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
			"53300": // too_many_connections
			return true
		}
		return pqErr.Code.Class() == "08" // connection_exception
	case errors.As(err, &netErr):
		return true // refused, reset, or a read that timed out: a server that does not answer
	}
	return false
}

// Await runs fn(ctx) and waits for it no longer than ctx lasts. lib/pq
// reads an answer until the connection's read deadline (the statement
// timeout and the connect timeout) whatever ctx says: a server that stops
// answering (frozen, or a network path that drops packets) holds the
// caller that long. Await returns ctx's error once ctx ends; fn goes on in
// the background until the driver gives up, and its result is dropped.
// The caller's bound on concurrent database work (a pool, a slot) is what
// bounds those leftovers: fn must release what it holds itself.
func Await[T any](ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := fn(ctx)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("the database did not answer in time: %w", context.Cause(ctx))
	}
}

// Refusal returns what makes a first connection to PostgreSQL fail for
// good, or nil when the failure may pass (a server starting, a network
// down): a certificate that does not verify (unknown CA, wrong host name,
// expired), a TLS file that cannot be read, a server without TLS under
// sslmode=require or stricter, or the server's refusal of our role or
// password or of a connection without TLS (SQLSTATE class 28). Retrying
// these would only hide a configuration error behind a daemon that never
// starts.
func Refusal(err error) error {
	var (
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		path    *fs.PathError
		pqErr   *pq.Error
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &host), errors.As(err, &invalid):
		return fmt.Errorf("TLS: the server's certificate does not verify: %w", err)
	case errors.Is(err, pq.ErrSSLNotSupported):
		return fmt.Errorf("TLS: the server does not accept TLS connections: %w", err)
	case errors.Is(err, pq.ErrSSLKeyHasWorldPermissions), errors.Is(err, pq.ErrSSLKeyUnknownOwnership):
		return fmt.Errorf("TLS: sslkey: %w", err)
	case errors.As(err, &path):
		return fmt.Errorf("TLS: a file the DSN names (sslrootcert, sslcert, sslkey) cannot be read: %w", err)
	case errors.As(err, &pqErr) && pqErr.Code.Class() == "28":
		return fmt.Errorf("refused by the server: %w", err)
	}
	return nil
}
