package etcdtest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/enginehealth/enginehealth/internal/testkit/testca"
)

// BuildMember builds the etcdmember program into dir and returns its path.
func BuildMember(dir string) (string, error) {
	out, err := exec.Command("go", "build", "-o", dir, "github.com/enginehealth/enginehealth/internal/testkit/etcdtest/etcdmember").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("etcdtest: build etcdmember: %v\n%s", err, out)
	}
	return filepath.Join(dir, "etcdmember"), nil
}

// ClusterConfig configures StartCluster.
type ClusterConfig struct {
	// Binary is the etcdmember program (BuildMember).
	Binary string
	// Members; default 3.
	Members int
	// TickMs and ElectionMs default to etcd's own defaults (100, 1000), as
	// a production cluster runs.
	TickMs, ElectionMs int
	// LogDir, when set, receives each member's own etcd log (NAME.log,
	// appended across restarts): leader changes, lease revocations.
	LogDir string
	// CA, when set, has the members serve clients over TLS only: https
	// client URLs with a certificate CA issues (for 127.0.0.1 and
	// localhost), accepting only clients with a certificate CA signed
	// (etcd's --client-cert-auth --trusted-ca-file). Peers talk plain
	// http. The cluster's own client presents a certificate of CA.
	CA *testca.CA
	// Auth, when set, enables etcd authentication once the cluster is up.
	Auth *Auth
}

// Auth is etcd authentication for a test cluster.
type Auth struct {
	// RootPassword of the root user (the root role), which the cluster's
	// own client authenticates as.
	RootPassword string
	// Users added before authentication is enabled.
	Users []User
}

// User is an etcd user.
type User struct {
	Name, Password string
	// Prefix the user may read and write, granted by a role named after
	// the user; empty: the user has the root role.
	Prefix string
}

// Cluster is a multi-member etcd cluster, one process per member.
// Members are the members of the cluster: Add and Remove change them
// (not safe while another goroutine reads them).
type Cluster struct {
	Members []*Member
	cfg     ClusterConfig
	dir     string
	// removed holds members taken out by Remove (their processes are gone;
	// kept for Close); named counts members named so far (m1, m2, …).
	removed []*Member
	named   int
	// server is the members' certificate (with CA).
	server *testca.Issued
	// access is how the cluster's own client reaches the members: TLS
	// with its certificate, root's credentials once auth is on.
	access clientv3.Config
}

// Member is one member process.
type Member struct {
	Name      string
	ClientURL string // http://127.0.0.1:PORT, https:// with ClusterConfig.CA
	PeerURL   string

	c       *Cluster
	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	stopped bool // SIGSTOPped
}

// Endpoint returns the member's client address, host:port.
func (m *Member) Endpoint() string {
	_, hostport, _ := strings.Cut(m.ClientURL, "://")
	return hostport
}

// StartCluster starts the members and waits until the cluster has a leader
// and every member answers. Close stops it.
func StartCluster(cfg ClusterConfig) (*Cluster, error) {
	if cfg.Members == 0 {
		cfg.Members = 3
	}
	if cfg.TickMs == 0 {
		cfg.TickMs = 100
	}
	if cfg.ElectionMs == 0 {
		cfg.ElectionMs = 1000
	}
	dir, err := os.MkdirTemp("", "ehetcdc-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, dir: dir, access: clientv3.Config{DialTimeout: time.Second, Logger: zap.NewNop()}}
	if cfg.CA != nil {
		if err := c.issue(); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	ports, err := freePorts(2 * cfg.Members)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	var initial []string
	for i := range cfg.Members {
		m := c.newMember(ports[2*i], ports[2*i+1])
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	ready := make(chan error, cfg.Members)
	for _, m := range c.Members {
		if err := m.start(strings.Join(initial, ","), "new", ready); err != nil {
			c.Close()
			return nil, err
		}
	}
	for range c.Members {
		if err := <-ready; err != nil {
			c.Close()
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if cfg.Auth != nil {
		if err := c.enableAuth(ctx, cfg.Auth); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// newMember names a member to come (m1, m2, … in the order made, never
// a name used before) on the given ports.
func (c *Cluster) newMember(clientPort, peerPort int) *Member {
	scheme := "http"
	if c.cfg.CA != nil {
		scheme = "https"
	}
	c.named++
	return &Member{
		Name:      fmt.Sprintf("m%d", c.named),
		ClientURL: fmt.Sprintf("%s://127.0.0.1:%d", scheme, clientPort),
		PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		c:         c,
	}
}

// issue makes the members' certificate (also their client certificate to
// themselves: etcd's gateway dials its own server with it) and the
// cluster client's, both of the CA.
func (c *Cluster) issue() error {
	name := filepath.Base(c.dir)
	server, err := c.cfg.CA.Issue(name+"-member", testca.Options{})
	if err != nil {
		return fmt.Errorf("etcdtest: member certificate: %w", err)
	}
	client, err := c.cfg.CA.Issue(name+"-client", testca.Options{Client: true})
	if err != nil {
		return fmt.Errorf("etcdtest: client certificate: %w", err)
	}
	c.server = server
	c.access.TLS = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: c.cfg.CA.Pool(), Certificates: []tls.Certificate{client.TLS}}
	return nil
}

// enableAuth adds root and the users (each with a role granting read and
// write on its prefix, or root), enables authentication, and from then on
// the cluster's client authenticates as root.
func (c *Cluster) enableAuth(ctx context.Context, a *Auth) error {
	cli, err := c.Client()
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }() // closing a client after use: nothing to act on
	steps := []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "root", a.RootPassword); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
	}
	for _, u := range a.Users {
		role := "root"
		steps = append(steps, func() error { _, err := cli.UserAdd(ctx, u.Name, u.Password); return err })
		if u.Prefix != "" {
			role = u.Name
			steps = append(steps,
				func() error { _, err := cli.RoleAdd(ctx, role); return err },
				func() error {
					_, err := cli.RoleGrantPermission(ctx, role, u.Prefix, clientv3.GetPrefixRangeEnd(u.Prefix), clientv3.PermissionType(clientv3.PermReadWrite))
					return err
				})
		}
		steps = append(steps, func() error { _, err := cli.UserGrantRole(ctx, u.Name, role); return err })
	}
	steps = append(steps, func() error { _, err := cli.AuthEnable(ctx); return err })
	for _, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("etcdtest: enable auth: %w", err)
		}
	}
	c.access.Username, c.access.Password = "root", a.RootPassword
	return nil
}

// Client returns a client of every member, with the cluster's own access
// (its client certificate, root's credentials once auth is on). Close it.
func (c *Cluster) Client() (*clientv3.Client, error) {
	return c.clientOf(c.Endpoints()...)
}

func (c *Cluster) clientOf(endpoints ...string) (*clientv3.Client, error) {
	cfg := c.access
	cfg.Endpoints = endpoints
	return clientv3.New(cfg)
}

// ClientConfig returns the cluster's own access as a client configuration
// of every member (its client certificate, root's credentials once auth is
// on), for a client a test tunes itself (timeouts, keep-alives).
func (c *Cluster) ClientConfig() clientv3.Config {
	cfg := c.access
	cfg.Endpoints = c.Endpoints()
	return cfg
}

// freePorts reserves n loopback ports by listening on port 0, then frees
// them for the members.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (m *Member) start(initial, state string, ready chan<- error) error {
	data := filepath.Join(m.c.dir, m.Name)
	args := []string{"-name", m.Name, "-dir", data, "-client", m.ClientURL, "-peer", m.PeerURL,
		"-initial-cluster", initial, "-state", state,
		"-tick-ms", fmt.Sprint(m.c.cfg.TickMs), "-election-ms", fmt.Sprint(m.c.cfg.ElectionMs)}
	if s := m.c.server; s != nil {
		args = append(args, "-cert-file", s.CertFile, "-key-file", s.KeyFile, "-trusted-ca-file", m.c.cfg.CA.CertFile)
	}
	if m.c.cfg.LogDir != "" {
		args = append(args, "-log", filepath.Join(m.c.cfg.LogDir, m.Name+".log"))
	}
	cmd := exec.Command(m.c.cfg.Binary, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("etcdtest: start member %s: %w", m.Name, err)
	}
	done := make(chan struct{})
	m.mu.Lock()
	m.cmd, m.done, m.stopped = cmd, done, false
	m.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			if sc.Text() == "ready" && !said {
				said = true
				ready <- nil
			}
		}
		err := cmd.Wait()
		if !said {
			ready <- fmt.Errorf("etcdtest: member %s exited before it was ready: %v", m.Name, err)
		}
		close(done)
	}()
	return nil
}

// Endpoints returns every member's client address.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.Endpoint())
	}
	return eps
}

// client returns a client of one member only.
func (m *Member) client() (*clientv3.Client, error) {
	return m.c.clientOf(m.Endpoint())
}

// status asks one member for its status.
func (m *Member) status(ctx context.Context) (*clientv3.StatusResponse, error) {
	cli, err := m.client()
	if err != nil {
		return nil, err
	}
	defer func() { _ = cli.Close() }() // closing a client after use: nothing to act on
	return cli.Status(ctx, m.Endpoint())
}

// Leader returns the member that is the raft leader, asking the members
// that run (not stopped, not killed).
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	for _, m := range c.Members {
		if !m.Running() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := m.status(sctx)
		cancel()
		if err != nil || st.Leader == 0 {
			continue
		}
		for _, l := range c.Members {
			lst, err := func() (*clientv3.StatusResponse, error) {
				sctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				return l.status(sctx)
			}()
			if err == nil && lst.Header.MemberId == st.Leader {
				return l, nil
			}
		}
	}
	return nil, errors.New("etcdtest: no member knows a leader")
}

// WaitHealthy waits until every running member answers a linearizable read
// and the cluster has a leader.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	var last error
	for {
		last = nil
		for _, m := range c.Members {
			if !m.Running() {
				continue
			}
			if err := func() error {
				cli, err := m.client()
				if err != nil {
					return err
				}
				defer func() { _ = cli.Close() }() // closing a client after use: nothing to act on
				rctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				_, err = cli.Get(rctx, "health")
				return err
			}(); err != nil {
				last = fmt.Errorf("member %s: %w", m.Name, err)
				break
			}
		}
		if last == nil {
			_, err := c.Leader(ctx)
			if err == nil {
				return nil
			}
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcdtest: cluster not healthy: %w", last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Running reports whether the member's process runs and is not stopped.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runningLocked()
}

func (m *Member) runningLocked() bool {
	if m.cmd == nil || m.stopped {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

func (m *Member) signal(sig syscall.Signal) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return fmt.Errorf("etcdtest: member %s not started", m.Name)
	}
	if err := m.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("etcdtest: %s to member %s: %w", sig, m.Name, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		m.stopped = true
	case syscall.SIGCONT:
		m.stopped = false
	}
	return nil
}

// Freeze stops the member with SIGSTOP: its process and TCP connections
// stay, it answers nothing (a stalled disk, a hung VM).
func (m *Member) Freeze() error { return m.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen member.
func (m *Member) Thaw() error { return m.signal(syscall.SIGCONT) }

// Pause stops the member with SIGSTOP for d, then resumes it: a process
// starved of CPU for a moment, or a stall of its disk. It does nothing and
// returns false when the member is not running or is frozen; a Freeze,
// Thaw or Kill meanwhile waits for the pause to end.
func (m *Member) Pause(d time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.runningLocked() || m.cmd.Process.Signal(syscall.SIGSTOP) != nil {
		return false
	}
	<-time.After(d)
	_ = m.cmd.Process.Signal(syscall.SIGCONT)
	return true
}

// Kill kills the member with SIGKILL and waits for it to exit.
func (m *Member) Kill() error {
	if err := m.signal(syscall.SIGKILL); err != nil {
		return err
	}
	m.mu.Lock()
	done := m.done
	m.mu.Unlock()
	<-done
	return nil
}

// Restart starts a killed member again on its data directory.
func (m *Member) Restart() error {
	var initial []string
	for _, o := range m.c.Members {
		initial = append(initial, o.Name+"="+o.PeerURL)
	}
	ready := make(chan error, 1)
	if err := m.start(strings.Join(initial, ","), "existing", ready); err != nil {
		return err
	}
	select {
	case err := <-ready:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("etcdtest: member %s not ready 30s after restart", m.Name)
	}
}

// Close kills every member and removes the data.
func (c *Cluster) Close() {
	for _, m := range append(c.Members, c.removed...) {
		m.mu.Lock()
		cmd, done := m.cmd, m.done
		m.mu.Unlock()
		if cmd == nil {
			continue
		}
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill() // after quorum loss a clean stop can hang
		<-done
	}
	_ = os.RemoveAll(c.dir)
}
