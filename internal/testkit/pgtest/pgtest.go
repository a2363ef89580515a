// Package pgtest runs ephemeral PostgreSQL servers for tests.
//
// A Server is a real postgres process started from the local server binaries
// (PATH, then /usr/lib/postgresql/*/bin) in a temporary directory, on a free
// loopback port, with durability off. As root, initdb and postgres run as the
// "postgres" user (or "nobody"), since both refuse to run as root. The server
// is a foreground child with Pdeathsig, so a killed test binary leaves
// nothing behind.
//
// One server per test package (see Main), a fresh database per test (see
// NewDatabase). When TEST_DATABASE_URL is set, Shared uses that server
// instead and only creates databases on it.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/infra/pgdb"

	_ "github.com/lib/pq" // driver for the admin connection
)

// InstallHint tells how to get the server binaries on Debian/Ubuntu.
const InstallHint = "install the PostgreSQL server binaries (Debian/Ubuntu: apt-get install -y postgresql) or set TEST_DATABASE_URL to an existing server's URL"

// Server is one PostgreSQL server for tests.
type Server struct {
	// Port of the server on 127.0.0.1.
	Port int

	adminURL string // URL of the "postgres" database
	external bool

	binDir  string
	baseDir string // owned by the server user; holds data/, the socket and the log
	cred    *syscall.Credential
	uid     int
	gid     int

	tls *TLS // nil: plain TCP only

	mu   sync.Mutex
	proc *proc
	dbs  atomic.Int64
	// closed reports whether Close was called (a failed-over primary a test removed):
	// its databases need no dropping.
	closed atomic.Bool

	// migrated is the database MigratedDB copies: migrated once, on the
	// first call, and never connected to afterwards (CREATE DATABASE …
	// TEMPLATE refuses a template with sessions).
	migratedOnce sync.Once
	migrated     string
	migratedErr  error
}

// TLS makes a server accept only TLS connections over TCP (hostssl lines
// alone in pg_hba.conf: a client that does not speak TLS is refused), with
// the server certificate CertFile and its key KeyFile (PEM; copied into the
// server's directory, owned by the server user, mode 0600 as PostgreSQL
// demands).
type TLS struct {
	CertFile, KeyFile string
}

// Start initialises and starts a new local server. Close removes it.
func Start() (*Server, error) { return start(nil) }

// StartTLS is Start with TLS on.
func StartTLS(t TLS) (*Server, error) { return start(&t) }

// NewTLS is New with TLS on.
func NewTLS(tb testing.TB, t TLS) *Server {
	tb.Helper()
	s, err := StartTLS(t)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

func start(t *TLS) (*Server, error) {
	bin, err := findBinDir()
	if err != nil {
		return nil, err
	}
	s := &Server{binDir: bin, uid: -1, gid: -1, tls: t}
	if os.Geteuid() == 0 {
		if err := s.pickUser(); err != nil {
			return nil, err
		}
	}
	if err := s.makeDir("ehpg-"); err != nil {
		return nil, err
	}
	if err := s.initdb(); err != nil {
		_ = os.RemoveAll(s.baseDir)
		return nil, err
	}
	if s.tls != nil {
		if err := s.setupTLS(); err != nil {
			_ = os.RemoveAll(s.baseDir)
			return nil, err
		}
	}
	if err := s.startOnFreePort(); err != nil {
		return nil, err
	}
	return s, nil
}

// makeDir makes the server's directory, owned by the server user.
func (s *Server) makeDir(prefix string) error {
	var err error
	if s.baseDir, err = os.MkdirTemp("", prefix); err != nil {
		return err
	}
	if err := os.Chmod(s.baseDir, 0o755); err != nil {
		return err
	}
	if s.uid >= 0 {
		return os.Chown(s.baseDir, s.uid, s.gid)
	}
	return nil
}

// startOnFreePort starts the server on a free port (one can be taken
// between our probe and the server's bind: it tries a few), and removes
// its directory when it cannot.
func (s *Server) startOnFreePort() error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if s.Port, err = FreePort(); err == nil {
			if err = s.Resume(); err == nil {
				return nil
			}
		}
	}
	_ = os.RemoveAll(s.baseDir)
	return err
}

// External wraps an existing server given by a URL; it is never stopped.
func External(rawURL string) (*Server, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("TEST_DATABASE_URL: %w", err)
	}
	port, _ := strconv.Atoi(u.Port())
	s := &Server{Port: port, adminURL: rawURL, external: true}
	db, err := sql.Open("postgres", rawURL)
	if err != nil {
		return nil, err
	}
	defer func() { _ = db.Close() }() // closing a pool after use: nothing to act on
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("TEST_DATABASE_URL: %w", err)
	}
	return s, nil
}

// Shared returns the server for a test package: TEST_DATABASE_URL when set,
// else a new local server.
func Shared() (*Server, error) {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return External(u)
	}
	return Start()
}

// Main runs a test package's tests with a shared server in *srv, and stops
// it afterwards. Call it from TestMain.
func Main(m *testing.M, srv **Server) int {
	s, err := Shared()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: cannot start PostgreSQL: %v\n", err)
		return 1
	}
	*srv = s
	defer s.Close()
	return m.Run()
}

// New starts a local server owned by one test, stopped in its cleanup.
// Use it for tests that stop and start the server.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Dir returns the server's directory (data, socket, log); empty for an
// external server.
func (s *Server) Dir() string { return s.baseDir }

// URL returns a connection URL for database db.
func (s *Server) URL(db string) string {
	if s.external {
		u, _ := url.Parse(s.adminURL)
		u.Path = "/" + db
		return u.String()
	}
	mode := "disable"
	if s.tls != nil {
		mode = "require" // encrypted, server not verified: tests add verify-full themselves
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=%s", s.Port, db, mode)
}

// setupTLS copies the certificate and key into the data directory and
// allows TCP connections over TLS only.
func (s *Server) setupTLS() error {
	data := filepath.Join(s.baseDir, "data")
	write := func(name string, b []byte) error {
		p := filepath.Join(data, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return fmt.Errorf("pgtest: TLS: %w", err)
		}
		if s.uid >= 0 {
			if err := os.Chown(p, s.uid, s.gid); err != nil {
				return fmt.Errorf("pgtest: TLS: %w", err)
			}
		}
		return nil
	}
	for src, dst := range map[string]string{s.tls.CertFile: "server.crt", s.tls.KeyFile: "server.key"} {
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("pgtest: TLS: %w", err)
		}
		if err := write(dst, b); err != nil {
			return err
		}
	}
	return write("pg_hba.conf", []byte("local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostssl replication all 127.0.0.1/32 trust\n"))
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9_]+`)

// NewDatabase creates a fresh database for t, dropped in its cleanup, and
// returns its URL.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	return s.newDatabase(t, "")
}

// newDatabase creates a fresh database for t, a copy of database
// template when it is set, dropped in t's cleanup, and returns its URL.
func (s *Server) newDatabase(t testing.TB, template string) string {
	t.Helper()
	url, drop, err := s.createDatabase(s.dbName(t), template)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return url
}

// dbName is a new database name for t: a number unique on s, then the
// test's name as far as it fits.
func (s *Server) dbName(t testing.TB) string {
	name := fmt.Sprintf("t%d_%s", s.dbs.Add(1), unsafeChars.ReplaceAllString(strings.ToLower(t.Name()), "_"))
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

// SameDatabase creates on s a database of the name of another server's
// database URL (the same DSN, another server: what a client sees when its
// address moves to another cluster), dropped in t's cleanup, and returns
// its URL.
func (s *Server) SameDatabase(t testing.TB, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	got, drop, err := s.CreateDatabase(strings.TrimPrefix(u.Path, "/"))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return got
}

// CreateDatabase creates database name and returns its URL and the
// function that drops it (for code without a testing.TB: an Example).
func (s *Server) CreateDatabase(name string) (url string, drop func() error, err error) {
	return s.createDatabase(name, "")
}

// createDatabase creates database name, a copy of database template
// when it is set, and returns its URL and the function that drops it.
func (s *Server) createDatabase(name, template string) (url string, drop func() error, err error) {
	stmt := fmt.Sprintf(`CREATE DATABASE %q`, name)
	if template != "" {
		stmt += fmt.Sprintf(` TEMPLATE %q`, template)
	}
	if err := s.exec(stmt); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	return s.URL(name), func() error {
		if s.closed.Load() {
			return nil
		}
		if err := s.exec(fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, name)); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}, nil
}

// MigratedDB returns a pool on a fresh database (as NewDatabase: dropped
// in t's cleanup) with the sidecar schema "enginehealth" migrated, closed
// in t's cleanup. The database is a copy of a template the server
// migrates once (CREATE DATABASE … TEMPLATE), not migrated anew: the
// same schema, without running every migration for every test.
func (s *Server) MigratedDB(t testing.TB) *sqlx.DB {
	t.Helper()
	s.migratedOnce.Do(func() { s.migrated, s.migratedErr = s.migrateTemplate() })
	if s.migratedErr != nil {
		t.Fatalf("pgtest: %v", s.migratedErr)
	}
	db, err := pgdb.Open(pgdb.Config{DSN: s.newDatabase(t, s.migrated)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// migrateTemplate creates the database MigratedDB copies and migrates
// it. Its name holds the process id: test packages sharing an external
// server (TEST_DATABASE_URL) each make their own. Close drops it.
func (s *Server) migrateTemplate() (string, error) {
	name := fmt.Sprintf("eh_migrated_%d", os.Getpid())
	url, _, err := s.createDatabase(name, "")
	if err != nil {
		return "", err
	}
	db, err := pgdb.Open(pgdb.Config{DSN: url})
	if err != nil {
		return "", err
	}
	defer func() { _ = db.Close() }() // the template must have no sessions left
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := pgdb.Migrate(ctx, db, pgdb.DefaultSchema); err != nil {
		return "", fmt.Errorf("migrate the template database %s: %w", name, err)
	}
	return name, nil
}

func (s *Server) exec(stmt string) error {
	db, err := sql.Open("postgres", s.admin())
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }() // closing a pool after use: nothing to act on
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, stmt)
	return err
}

func (s *Server) admin() string {
	if s.external {
		return s.adminURL
	}
	return s.URL("postgres")
}

// Resume starts the (stopped) server again on the same port and data.
func (s *Server) Resume() error {
	if s.external {
		return errors.New("pgtest: cannot start an external server")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return errors.New("pgtest: server already running")
	}
	logf, err := os.OpenFile(filepath.Join(s.baseDir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command(filepath.Join(s.binDir, "postgres"),
		"-D", filepath.Join(s.baseDir, "data"),
		"-p", strconv.Itoa(s.Port),
		"-k", s.baseDir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
	)
	if s.tls != nil {
		cmd.Args = append(cmd.Args, "-c", "ssl=on", "-c", "ssl_cert_file=server.crt", "-c", "ssl_key_file=server.key")
	}
	cmd.Dir = s.baseDir
	// HOME: libpq (a standby's WAL receiver) looks for a client
	// certificate under it, and fails on one it cannot read (root's).
	cmd.Env = append(os.Environ(), "HOME="+s.baseDir)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := s.ping(); err == nil {
			s.proc = p
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("pgtest: postgres exited at start (%v): %s", p.err, s.logTail())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-p.done
			return fmt.Errorf("pgtest: postgres not ready after 30s: %s", s.logTail())
		}
	}
}

// proc is a running postgres; done is closed when it has exited.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (s *Server) ping() error {
	db, err := sql.Open("postgres", s.admin()+"&connect_timeout=2")
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }() // closing a pool after use: nothing to act on
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// Freeze stops the postmaster (SIGSTOP), as a hung host would: sessions
// already open go on, new connections are not answered. Thaw resumes it.
func (s *Server) Freeze() error { return s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen postmaster (SIGCONT).
func (s *Server) Thaw() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return errors.New("pgtest: server not running")
	}
	return s.proc.cmd.Process.Signal(sig)
}

// Kill ends the server at once (SIGKILL of the postmaster, as when its
// host dies): open sessions break, nothing is shut down cleanly. Resume
// starts it again (with crash recovery); a failed-over primary is closed
// instead (Close).
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil {
		return
	}
	s.proc = nil
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Stop shuts the server down (fast shutdown; immediate after 10s). Resume
// starts it again.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil {
		return
	}
	s.proc = nil
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// Close stops the server and removes its files (of an external server:
// drops the template database MigratedDB made).
func (s *Server) Close() {
	if s.external {
		if s.migrated != "" {
			_ = s.exec(fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, s.migrated)) // a leftover template on a shared server is harmless
		}
		return
	}
	s.closed.Store(true)
	s.Stop()
	_ = os.RemoveAll(s.baseDir)
}

// StartStandby makes a streaming replica of s and starts it: a copy of
// its data taken with pg_basebackup -R, in hot standby (read-only), on a
// port of its own, replicating asynchronously from from (host:port: s's
// own address, or a proxy in front of it, which can be cut to make the
// standby fall behind). It has s's TLS settings. Promote makes it a
// primary; Close removes it.
func (s *Server) StartStandby(from string) (*Server, error) {
	if s.external {
		return nil, errors.New("pgtest: cannot make a standby of an external server")
	}
	host, port, err := net.SplitHostPort(from)
	if err != nil {
		return nil, fmt.Errorf("pgtest: standby of %q: %w", from, err)
	}
	r := &Server{binDir: s.binDir, uid: s.uid, gid: s.gid, cred: s.cred, tls: s.tls}
	if err := r.makeDir("ehpg-standby-"); err != nil {
		return nil, err
	}
	// A fast checkpoint: the default spreads it over minutes.
	cmd := exec.Command(filepath.Join(s.binDir, "pg_basebackup"),
		"-h", host, "-p", port, "-U", "postgres", "-D", filepath.Join(r.baseDir, "data"),
		"-R", "-X", "stream", "-c", "fast", "--no-sync")
	cmd.Dir = r.baseDir
	cmd.Env = append(os.Environ(), "HOME="+r.baseDir) // as in Resume
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred, Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(r.baseDir)
		return nil, fmt.Errorf("pgtest: pg_basebackup from %s: %v: %s", from, err, out)
	}
	if err := r.startOnFreePort(); err != nil {
		return nil, err
	}
	return r, nil
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// Promote makes a standby a primary (pg_promote, waiting until it
// accepts writes). The data it had not received from its primary is
// lost, as in any asynchronous failover.
func (s *Server) Promote() error {
	db, err := sql.Open("postgres", s.admin())
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }() // closing a pool after use: nothing to act on
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var done bool
	if err := db.QueryRowContext(ctx, `SELECT pg_promote(true, 60)`).Scan(&done); err != nil {
		return fmt.Errorf("pgtest: promote: %w", err)
	}
	if !done {
		return fmt.Errorf("pgtest: promote: not a primary after 60s: %s", s.logTail())
	}
	return nil
}

// InRecovery reports whether the server is a standby.
func (s *Server) InRecovery() (bool, error) {
	db, err := sql.Open("postgres", s.admin())
	if err != nil {
		return false, err
	}
	defer func() { _ = db.Close() }() // closing a pool after use: nothing to act on
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var in bool
	err = db.QueryRowContext(ctx, `SELECT pg_is_in_recovery()`).Scan(&in)
	return in, err
}

// WaitReplayed waits until the standby s has replayed what its primary
// had written when it was called (the primary's current WAL position),
// or ctx ends. (The insert position: under synchronous_commit=off a
// commit may not be written yet; the standby gets it once it is.)
func (s *Server) WaitReplayed(ctx context.Context, primary *Server) error {
	p, err := sql.Open("postgres", primary.admin())
	if err != nil {
		return err
	}
	defer func() { _ = p.Close() }() // closing a pool after use: nothing to act on
	var lsn string
	if err := p.QueryRowContext(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		return fmt.Errorf("pgtest: primary's WAL position: %w", err)
	}
	r, err := sql.Open("postgres", s.admin())
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }() // closing a pool after use: nothing to act on
	for {
		var caught bool
		err := r.QueryRowContext(ctx, `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, lsn).Scan(&caught)
		if err == nil && caught {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgtest: standby has not replayed %s: %w (last error %v)", lsn, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Server) initdb() error {
	cmd := exec.Command(filepath.Join(s.binDir, "initdb"),
		"-D", filepath.Join(s.baseDir, "data"),
		"-U", "postgres", "--auth=trust", "--no-sync", "--no-instructions",
		"-E", "UTF8", "--locale=C")
	cmd.Dir = s.baseDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: initdb: %v: %s", err, out)
	}
	return nil
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.baseDir, "postgres.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func (s *Server) pickUser() error {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err := strconv.ParseUint(u.Uid, 10, 32)
		if err != nil {
			return fmt.Errorf("pgtest: user %s: uid %q: %w", name, u.Uid, err)
		}
		gid, err := strconv.ParseUint(u.Gid, 10, 32)
		if err != nil {
			return fmt.Errorf("pgtest: user %s: gid %q: %w", name, u.Gid, err)
		}
		s.uid, s.gid = int(uid), int(gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		return nil
	}
	return errors.New("pgtest: running as root and neither user postgres nor nobody exists to run the server")
}

// findBinDir finds a directory holding both initdb and postgres.
func findBinDir() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("postgres"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(r))
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(matches, func(i, j int) bool { return version(matches[i]) > version(matches[j]) })
	dirs = append(dirs, matches...)
	for _, d := range dirs {
		if isExec(filepath.Join(d, "postgres")) && isExec(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("pgtest: no PostgreSQL server binaries (initdb, postgres) in PATH or /usr/lib/postgresql/*/bin: %s", InstallHint)
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// FreePort returns a TCP port free on 127.0.0.1 at the time of the call.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
