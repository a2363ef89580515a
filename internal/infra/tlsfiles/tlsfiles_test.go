package tlsfiles

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/testca"
)

func TestMain(m *testing.M) { testkit.Main(m, nil) }

// kit is a CA and the files the cases are made of.
type kit struct {
	dir    string
	ca     *testca.CA
	client *testca.Issued
}

func newKit(t *testing.T) kit {
	t.Helper()
	dir := t.TempDir()
	ca, err := testca.New(dir, "tlsfiles-ca")
	if err != nil {
		t.Fatal(err)
	}
	return kit{dir: dir, ca: ca, client: ca.MustIssue(t, "client", testca.Options{Client: true})}
}

// file writes data to name in dir and returns its path.
func file(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// secretText is in the files that are no PEM: no message may quote it.
const secretText = "c2VjcmV0LWNvbnRlbnQtbmV2ZXItc2hvd24"

// TestClientProblems: each bad input is refused with the key path of its
// setting and the file, never the file's content.
func TestClientProblems(t *testing.T) {
	k := newKit(t)
	now := time.Now()
	other := k.ca.MustIssue(t, "other", testca.Options{Client: true})
	expired := k.ca.MustIssue(t, "expired", testca.Options{Client: true, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-24 * time.Hour)})
	future := k.ca.MustIssue(t, "future", testca.Options{Client: true, NotBefore: now.Add(24 * time.Hour), NotAfter: now.Add(48 * time.Hour)})
	serverOnly := k.ca.MustIssue(t, "server-only", testca.Options{Server: true})
	notPEM := file(t, k.dir, "not-pem", []byte(secretText+"\n"))
	keyPEM := read(t, k.client.KeyFile)
	encrypted := file(t, k.dir, "encrypted-key.pem", []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"))
	caWithKey := file(t, k.dir, "ca-with-key.pem", append(read(t, k.ca.CertFile), keyPEM...))
	badCert := file(t, k.dir, "bad-cert.pem", []byte("-----BEGIN CERTIFICATE-----\nAAAAAAAA\n-----END CERTIFICATE-----\n"))
	fifo := filepath.Join(k.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	oldCAdir := t.TempDir()
	oldCA, err := testca.New(oldCAdir, "old")
	if err != nil {
		t.Fatal(err)
	}
	// A CA whose only certificate expired: a copy of a real CA PEM is
	// enough; the clock says when.
	later := now.Add(20 * 365 * 24 * time.Hour)

	cases := []struct {
		name string
		f    Files
		now  time.Time
		key  string // the key path that must be named
		msg  string // and a fragment of the message
	}{
		{"CA file missing", Files{CAFile: filepath.Join(k.dir, "nope.pem")}, now, "etcd.tls.ca_file", "cannot read " + filepath.Join(k.dir, "nope.pem") + ": no such file"},
		{"CA file a directory", Files{CAFile: k.dir}, now, "etcd.tls.ca_file", "not a regular file"},
		{"CA file a FIFO", Files{CAFile: fifo}, now, "etcd.tls.ca_file", "not a regular file"},
		{"CA file not PEM", Files{CAFile: notPEM}, now, "etcd.tls.ca_file", notPEM + " is not PEM"},
		{"CA file holds a key", Files{CAFile: k.client.KeyFile}, now, "etcd.tls.ca_file", "holds no certificate, only a private key"},
		{"CA file holds a key besides the CA", Files{CAFile: caWithKey}, now, "etcd.tls.ca_file", caWithKey + " holds a private key besides its certificates"},
		{"CA certificate that does not parse", Files{CAFile: badCert}, now, "etcd.tls.ca_file", "certificate 1 does not parse"},
		{"CA expired", Files{CAFile: oldCA.CertFile}, later, "etcd.tls.ca_file", `its certificate (CN "old") expired on`},
		{"cert without key", Files{CertFile: k.client.CertFile}, now, "etcd.tls.key_file", "required with etcd.tls.cert_file"},
		{"key without cert", Files{KeyFile: k.client.KeyFile}, now, "etcd.tls.cert_file", "required with etcd.tls.key_file"},
		{"key of another certificate", Files{CertFile: k.client.CertFile, KeyFile: other.KeyFile}, now, "etcd.tls.key_file",
			other.KeyFile + ": the key does not match the certificate in " + k.client.CertFile},
		{"client certificate expired", Files{CertFile: expired.CertFile, KeyFile: expired.KeyFile}, now, "etcd.tls.cert_file", `the certificate (CN "expired") expired on`},
		{"client certificate not yet valid", Files{CertFile: future.CertFile, KeyFile: future.KeyFile}, now, "etcd.tls.cert_file", `(CN "future") is not valid before`},
		{"server-only certificate", Files{CertFile: serverOnly.CertFile, KeyFile: serverOnly.KeyFile}, now, "etcd.tls.cert_file", "not for client authentication"},
		{"cert and key swapped", Files{CertFile: k.client.KeyFile, KeyFile: k.client.CertFile}, now, "etcd.tls.cert_file", "are cert_file and key_file swapped?"},
		{"key file not PEM", Files{CertFile: k.client.CertFile, KeyFile: notPEM}, now, "etcd.tls.key_file", notPEM + " is not PEM"},
		{"encrypted key", Files{CertFile: k.client.CertFile, KeyFile: encrypted}, now, "etcd.tls.key_file", "holds an encrypted key"},
		{"cert file missing", Files{CertFile: filepath.Join(k.dir, "gone.pem"), KeyFile: k.client.KeyFile}, now, "etcd.tls.cert_file", "no such file"},
		{"key file unreadable kind", Files{CertFile: k.client.CertFile, KeyFile: fifo}, now, "etcd.tls.key_file", "not a regular file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := Client("etcd.tls", c.f, c.now)
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Client blocked on a file")
			}
			var te *Error
			if !errors.As(err, &te) {
				t.Fatalf("error %T, want *Error: %v", err, err)
			}
			found := false
			for _, p := range te.Problems {
				found = found || p.Key == c.key && strings.Contains(p.Msg, c.msg)
			}
			if !found {
				t.Fatalf("no problem at %s containing %q; got: %v", c.key, c.msg, err)
			}
			if s := err.Error(); strings.Contains(s, secretText[:12]) || strings.Contains(s, string(keyPEM[40:60])) {
				t.Fatalf("the message quotes a file's content: %v", err)
			}
		})
	}
}

// TestEveryProblemAtOnce: a bad CA file and a bad key pair are both said.
func TestEveryProblemAtOnce(t *testing.T) {
	k := newKit(t)
	_, err := Client("api.tls", Files{CAFile: k.client.KeyFile, CertFile: k.client.CertFile, KeyFile: filepath.Join(k.dir, "none")}, time.Now())
	var te *Error
	if !errors.As(err, &te) || len(te.Problems) != 2 || te.Problems[0].Key != "api.tls.ca_file" || te.Problems[1].Key != "api.tls.key_file" {
		t.Fatalf("want a ca_file and a key_file problem, got %v", err)
	}
}

// TestClientConfig: TLS 1.2 at least; a CA file alone verifies servers
// and presents no certificate; a key pair is presented.
func TestClientConfig(t *testing.T) {
	k := newKit(t)
	c, err := Client("etcd.tls", Files{CAFile: k.ca.CertFile}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if cfg := c.Config; cfg.MinVersion != tls.VersionTLS12 || cfg.RootCAs == nil || cfg.GetClientCertificate != nil || c.Cert != nil {
		t.Fatalf("CA only: min version %x, roots %v, client certificate %v", cfg.MinVersion, cfg.RootCAs != nil, c.Cert)
	}
	if cas := c.CAs.Certs(); len(cas) != 1 || cas[0].Subject.CommonName != "tlsfiles-ca" || !c.CAs.Load().Equal(cfg0(c).RootCAs) {
		t.Fatalf("CA certificates %v, want the CA's, and its pool as the config's", cas)
	}
	c, err = Client("etcd.tls", Files{}, time.Now())
	if err != nil || c.Config.RootCAs != nil || c.Cert != nil || c.CAs.Certs() != nil {
		t.Fatalf("no files (the system's roots): %+v %v", c, err)
	}
	// A CA bundle mid-rotation (an expired CA beside a valid one) loads.
	old, err := testca.New(t.TempDir(), "old")
	if err != nil {
		t.Fatal(err)
	}
	bundle := file(t, k.dir, "bundle.pem", append(old.PEM(), k.ca.PEM()...))
	if _, err := Pool("etcd.tls", bundle, time.Now()); err != nil {
		t.Fatalf("bundle of two valid CAs: %v", err)
	}
}

// TestCertificateSwap: a handshake presents the certificate the holder has
// then; Store swaps it for the next handshakes without a new tls.Config
// (what a reload will do).
func TestCertificateSwap(t *testing.T) {
	k := newKit(t)
	server := k.ca.MustIssue(t, "server", testca.Options{Server: true})
	c, err := Client("etcd.tls", Files{CAFile: k.ca.CertFile, CertFile: k.client.CertFile, KeyFile: k.client.KeyFile}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg, holder := c.Config, c.Cert
	cfg.ServerName = "localhost"
	presented := func() string {
		t.Helper()
		c, s := net.Pipe()
		defer c.Close()
		defer s.Close()
		srv := tls.Server(s, &tls.Config{Certificates: []tls.Certificate{server.TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: k.ca.Pool()})
		got := make(chan string, 1)
		go func() {
			if err := srv.Handshake(); err != nil {
				got <- "server: " + err.Error()
				return
			}
			got <- srv.ConnectionState().PeerCertificates[0].Subject.CommonName
		}()
		if err := tls.Client(c, cfg).Handshake(); err != nil {
			t.Fatalf("client handshake: %v", err)
		}
		return <-got
	}
	if cn := presented(); cn != "client" {
		t.Fatalf("presented %q, want client", cn)
	}
	// A rotation: the files are reissued and loaded again.
	rotated := k.ca.MustIssue(t, "client-2", testca.Options{Client: true})
	next, err := KeyPair("etcd.tls", rotated.CertFile, rotated.KeyFile, time.Now(), ClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	holder.Store(next)
	if cn := presented(); cn != "client-2" {
		t.Fatalf("after the swap presented %q, want client-2", cn)
	}
	if holder.Load().Leaf.Subject.CommonName != "client-2" {
		t.Fatal("Load does not return the stored certificate with its leaf")
	}
	if chain := holder.Chain(); len(chain) != 1 || chain[0].Subject.CommonName != "client-2" {
		t.Fatalf("Chain after the swap: %v, want client-2's leaf", chain)
	}
}

// TestChain: the held certificate's leaf and intermediates, parsed, leaf
// first; nil when none is held, or without a holder.
func TestChain(t *testing.T) {
	k := newKit(t)
	var none *Cert // no client certificate configured
	if chain, empty := none.Chain(), (&Cert{}).Chain(); chain != nil || empty != nil {
		t.Fatalf("no holder: %v; an empty one: %v", chain, empty)
	}
	// The CA certificate stands in for an intermediate after the leaf.
	withChain := file(t, k.dir, "chain.pem", append(read(t, k.client.CertFile), k.ca.PEM()...))
	pair, err := KeyPair("etcd.tls", withChain, k.client.KeyFile, time.Now(), ClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	var h Cert
	h.Store(pair)
	chain := h.Chain()
	if len(chain) != 2 || chain[0].Subject.CommonName != "client" || chain[1].Subject.CommonName != "tlsfiles-ca" {
		t.Fatalf("chain %v, want client then tlsfiles-ca", chain)
	}
}

// TestServerAndDialFunc: a Server config serves its Cert and asks for
// client certificates from its CAs; DialFunc verifies the server for the
// host dialled (an IP address too) against the CAs held at each dial:
// after a swap to another CA, the next dial is refused; a host the
// certificate is not for is refused; the server's own certificate swap
// is served to the next connection.
func TestServerAndDialFunc(t *testing.T) {
	k := newKit(t)
	srvCert := k.ca.MustIssue(t, "node", testca.Options{Hosts: []string{"127.0.0.1"}})
	cfg, held, clientCAs, err := Server("api.tls", ServerFiles{CertFile: srvCert.CertFile, KeyFile: srvCert.KeyFile, ClientCAFile: k.ca.CertFile,
		ClientAuth: tls.RequireAndVerifyClientCert}, ServerAuth|ClientAuth, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if clientCAs == nil || cfg.MinVersion != tls.VersionTLS12 {
		t.Fatalf("server config: %+v", cfg)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
				_, _ = c.Write([]byte("x"))
			}()
		}
	}()
	cas := &CAs{}
	cas.Store(k.ca.Pool())
	client := &Cert{}
	client.Store(&k.client.TLS)
	dial := DialFunc(&tls.Config{MinVersion: tls.VersionTLS12, GetClientCertificate: client.GetClientCertificate}, cas)
	serial := func(addr string) (string, error) {
		c, err := dial(t.Context(), "tcp", addr)
		if err != nil {
			return "", err
		}
		defer c.Close()
		if _, err := c.Read(make([]byte, 1)); err != nil {
			return "", err
		}
		return c.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
	}
	addr := ln.Addr().String()
	if got, err := serial(addr); err != nil || got != srvCert.Cert.SerialNumber.String() {
		t.Fatalf("dial %s: serial %s, %v", addr, got, err)
	}
	// The server's certificate swapped: served to the next connection.
	rotated := k.ca.MustIssue(t, "node", testca.Options{Hosts: []string{"127.0.0.1"}})
	held.Store(&rotated.TLS)
	if got, err := serial(addr); err != nil || got != rotated.Cert.SerialNumber.String() {
		t.Fatalf("after the swap: serial %s, %v", got, err)
	}
	// A name the certificate is not for.
	_, port, _ := net.SplitHostPort(addr)
	if _, err := serial("localhost:" + port); err == nil {
		t.Fatalf("dial localhost with a certificate for 127.0.0.1 only: accepted")
	}
	// The client's CAs swapped to another CA: the next dial is refused.
	other, err := testca.New(k.dir, "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	cas.Store(other.Pool())
	if _, err := serial(addr); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("dial after a swap to another CA: %v, want unknown authority", err)
	}
	// The server's client CAs swapped: our client certificate is refused.
	cas.Store(k.ca.Pool())
	clientCAs.Store(other.Pool())
	if _, err := serial(addr); err == nil {
		t.Fatalf("dial after the server's client CAs changed: accepted")
	}
}

// TestDialFuncVerifiesAddresses: a node reached at an IP address (how
// nodes advertise themselves; TLS sends no address as the server name)
// is verified for that address through DialFunc; a certificate for
// another address is refused.
func TestDialFuncVerifiesAddresses(t *testing.T) {
	k := newKit(t)
	cas := &CAs{}
	cas.Store(k.ca.Pool())
	serve := func(hosts ...string) string {
		t.Helper()
		is := k.ca.MustIssue(t, "node-"+hosts[0], testca.Options{Server: true, Hosts: hosts})
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{is.TLS}}
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv.URL // https://127.0.0.1:PORT
	}
	get := func(tr *http.Transport, url string) error {
		t.Helper()
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	good, other := serve("127.0.0.1"), serve("127.0.0.2")
	base := &tls.Config{MinVersion: tls.VersionTLS12}
	if err := get(&http.Transport{DialTLSContext: DialFunc(base, cas)}, good); err != nil {
		t.Fatalf("a node at its certificate's address through DialFunc: %v", err)
	}
	if err := get(&http.Transport{DialTLSContext: DialFunc(base, cas)}, other); err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("a certificate for 127.0.0.2 served at 127.0.0.1: %v, want refused", err)
	}
}

func cfg0(c *ClientTLS) *tls.Config { return c.Config }

// TestGRPCDialer: the etcd client's dialer verifies each member for
// base's server name (etcd.tls.server_name) whatever address was dialled,
// or else for the address dialled (an IP address too, which TLS does not
// send as a server name), or a socket's file name; it offers HTTP/2; and a
// swap of the CAs applies to the next connection.
func TestGRPCDialer(t *testing.T) {
	k := newKit(t)
	other, err := testca.New(t.TempDir(), "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	serve := func(network, addr string, hosts ...string) string {
		t.Helper()
		is := k.ca.MustIssue(t, "member-"+hosts[0], testca.Options{Server: true, Hosts: hosts})
		ln, err := tls.Listen(network, addr, &tls.Config{Certificates: []tls.Certificate{is.TLS}, NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
			}
		}()
		return ln.Addr().String()
	}
	cas := &CAs{}
	cas.Store(k.ca.Pool())
	dial := func(base *tls.Config, addr string) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := GRPCDialer(base, cas)(ctx, addr)
		if err != nil {
			return err
		}
		defer c.Close()
		if p := c.(*tls.Conn).ConnectionState().NegotiatedProtocol; p != "h2" {
			return fmt.Errorf("negotiated %q, want h2", p)
		}
		return nil
	}
	plain := &tls.Config{MinVersion: tls.VersionTLS12}
	named := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: "etcd.internal"}
	byName, byIP := serve("tcp", "127.0.0.1:0", "etcd.internal"), serve("tcp", "127.0.0.1:0", "127.0.0.1")
	if err := dial(named, byName); err != nil {
		t.Fatalf("a member with a certificate for etcd.internal, dialled at its address, server_name etcd.internal: %v", err)
	}
	if err := dial(named, byIP); err == nil || !strings.Contains(err.Error(), "etcd.internal") {
		t.Fatalf("a member whose certificate is for its address only, server_name etcd.internal: %v, want refused", err)
	}
	if err := dial(plain, byIP); err != nil {
		t.Fatalf("a member with a certificate for its IP address, dialled at it: %v", err)
	}
	if err := dial(plain, byName); err == nil {
		t.Fatal("a member with a certificate for etcd.internal, dialled at 127.0.0.1 without server_name: accepted")
	}
	sock := filepath.Join(t.TempDir(), "etcd.sock")
	serve("unix", sock, "etcd.sock")
	if err := dial(plain, "unix://"+sock); err != nil {
		t.Fatalf("a member on a socket, verified as its file name: %v", err)
	}
	// The CAs swapped: the next connection is verified against them.
	cas.Store(other.Pool())
	if err := dial(plain, byIP); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("dial after a swap to another CA: %v, want unknown authority", err)
	}
	cas.Store(k.ca.Pool())
	if err := dial(plain, byIP); err != nil {
		t.Fatalf("dial after a swap back: %v", err)
	}
}
