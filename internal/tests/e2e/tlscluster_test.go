package e2e

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/testkit/etcdtest"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
	"github.com/enginehealth/enginehealth/internal/testkit/testca"
)

// The operators of a TLS cluster's tokens file, and the etcd user of its
// sidecars.
const (
	aliceToken  = "alice-token-7Rk2"  // alice, role operate
	readerToken = "reader-token-4Wq9" // reader, role read
	etcdUser    = "enginehealth"
)

// tlsSetup is what a TLS-everywhere cluster runs on (newTLSCluster), all
// of one test CA made for the test:
//
//   - etcd: three member processes serving clients over TLS only, with
//     --client-cert-auth (a client certificate of the CA required) and
//     auth on; the sidecars authenticate as etcdUser (no root: readwrite
//     on the test's prefix only) with a password file, and present a
//     client certificate whose CN is no etcd user;
//   - PostgreSQL accepting TLS connections only, reached as localhost
//     with sslmode=verify-full and the CA as sslrootcert;
//   - the API over TLS with client_auth require: each node has a
//     certificate of its own (CN its name, for server and client use: it
//     presents it when it forwards to the master), and a tokens file
//     names alice (operate) and reader (read).
type tlsSetup struct {
	ca   *testca.CA
	etcd *etcdtest.Cluster
	pg   *pgtest.Server
	// etcdClient is the sidecars' certificate to etcd; cli the one the
	// CLI and the test's own API clients present.
	etcdClient, cli          *testca.Issued
	passwordFile, tokensFile string

	mu    sync.Mutex
	nodes map[string]*testca.Issued // API certificates by node name
}

// newTLSCluster makes a TLS-everywhere cluster for t (tlsSetup): its own
// etcd cluster and PostgreSQL server, a database on it, and the
// certificates and files the daemons' configurations (configWith) name.
// The etcd members' logs go to t's artifacts.
func newTLSCluster(t testing.TB) *cluster {
	t.Helper()
	dir := t.TempDir()
	ca, err := testca.New(dir, "tls-everywhere")
	if err != nil {
		t.Fatal(err)
	}
	s := &tlsSetup{ca: ca, nodes: map[string]*testca.Issued{}}
	const password = "etcd-pw-Zx81"
	s.passwordFile = writeTestFile(t, dir, "etcd-password", password+"\n")
	s.tokensFile = writeTestFile(t, dir, "tokens.yaml", operatorEntry("alice", aliceToken, "operate")+operatorEntry("reader", readerToken, "read"))
	s.etcd, err = etcdtest.StartCluster(etcdtest.ClusterConfig{Binary: memberBin, CA: ca, LogDir: t.ArtifactDir(),
		Auth: &etcdtest.Auth{RootPassword: "root-pw-Lp40", Users: []etcdtest.User{{Name: etcdUser, Password: password, Prefix: etcdPrefix(t)}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.etcd.Close)
	pgCert := ca.MustIssue(t, "postgres", testca.Options{Server: true, Hosts: []string{"localhost"}})
	s.pg = pgtest.NewTLS(t, pgtest.TLS{CertFile: pgCert.CertFile, KeyFile: pgCert.KeyFile})
	s.etcdClient = ca.MustIssue(t, "sidecar-etcd-client", testca.Options{Client: true})
	s.cli = ca.MustIssue(t, "cli", testca.Options{Client: true})

	u, err := url.Parse(s.pg.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Host = fmt.Sprintf("localhost:%d", s.pg.Port) // the name the server's certificate is for
	q := u.Query()
	q.Set("sslmode", "verify-full")
	q.Set("sslrootcert", ca.CertFile)
	u.RawQuery = q.Encode()
	c := newClusterOn(t, u.String())
	c.tls = s
	return c
}

// writeTestFile writes text into dir/name (mode 0600) and returns its
// path: to a temporary name first, then renamed, so that a daemon reading
// it meanwhile never sees half of it.
func writeTestFile(t testing.TB, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p+".tmp", []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		t.Fatal(err)
	}
	return p
}

// etcdLines are the lines under etcd: of a sidecar's configuration.
func (s *tlsSetup) etcdLines() string {
	return fmt.Sprintf("  tls:\n    ca_file: %s\n    cert_file: %s\n    key_file: %s\n  username: %s\n  password_file: %s\n",
		s.ca.CertFile, s.etcdClient.CertFile, s.etcdClient.KeyFile, etcdUser, s.passwordFile)
}

// apiLines are the lines under api: of node name's configuration (after
// listen): its TLS, unless plain, and the tokens file.
func (s *tlsSetup) apiLines(t testing.TB, name string, plain bool) string {
	lines := "  tokens_file: " + s.tokensFile + "\n"
	if plain {
		return lines
	}
	cert := s.nodeCert(t, name)
	return lines + fmt.Sprintf("  tls:\n    cert_file: %s\n    key_file: %s\n    client_ca_file: %s\n    client_auth: require\n    ca_file: %s\n",
		cert.CertFile, cert.KeyFile, s.ca.CertFile, s.ca.CertFile)
}

// nodeCert returns node name's API certificate, issued on first use
// (once: a daemon and the demo engine of one name share its files, and
// issuing again would rotate it).
func (s *tlsSetup) nodeCert(t testing.TB, name string) *testca.Issued {
	s.mu.Lock()
	defer s.mu.Unlock()
	if is, ok := s.nodes[name]; ok {
		return is
	}
	is := s.ca.MustIssue(t, name, testca.Options{})
	s.nodes[name] = is
	return is
}

// clientTLS is the TLS of the test's own API clients: the CA, and the
// CLI's certificate (client_auth require).
func (s *tlsSetup) clientTLS() *tls.Config {
	return &tls.Config{RootCAs: s.ca.Pool(), Certificates: []tls.Certificate{s.cli.TLS}}
}

// cliEnv is the CLI's environment with token: the token, and under TLS
// the CA and the client certificate.
func (c *cluster) cliEnv(token string) []string {
	env := []string{"ENGINEHEALTH_TOKEN=" + token}
	if s := c.tls; s != nil {
		env = append(env, "ENGINEHEALTH_CACERT="+s.ca.CertFile, "ENGINEHEALTH_CERT="+s.cli.CertFile, "ENGINEHEALTH_KEY="+s.cli.KeyFile)
	}
	return env
}

// operatorEnv is the CLI's environment of an operator who may act: the
// harness's token tok (cfgOpts.TokenEnv), or in a TLS cluster alice's.
func (c *cluster) operatorEnv() []string {
	if c.tls != nil {
		return c.cliEnv(aliceToken)
	}
	return c.cliEnv("tok")
}

// apiURL is the base URL of the API at addr: an advertised address as it
// is (https:// under TLS), host:port with the cluster's scheme.
func (c *cluster) apiURL(addr string) string {
	if c.tls != nil && !strings.Contains(addr, "://") {
		return "https://" + addr
	}
	return addr
}

// get sends GET path to the API at addr with hc.
func (c *cluster) get(hc *http.Client, addr, path string) (*http.Response, error) {
	return hc.Get(api.URL(c.apiURL(addr), path))
}

// httpClient is an HTTP client of the cluster's APIs, with its own
// transport under TLS (the CA, the CLI's certificate).
func (c *cluster) httpClient(timeout time.Duration) *http.Client {
	hc := &http.Client{Timeout: timeout}
	if c.tls != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = c.tls.clientTLS()
		hc.Transport = tr
	}
	return hc
}
