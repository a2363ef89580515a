package tlsfiles

import (
	"crypto/tls"
	"errors"
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
	return kit{dir: dir, ca: ca, client: issue(t, ca, "client", testca.Options{Client: true})}
}

func issue(t *testing.T, ca *testca.CA, cn string, o testca.Options) *testca.Issued {
	t.Helper()
	is, err := ca.Issue(cn, o)
	if err != nil {
		t.Fatal(err)
	}
	return is
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
	other := issue(t, k.ca, "other", testca.Options{Client: true})
	expired := issue(t, k.ca, "expired", testca.Options{Client: true, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-24 * time.Hour)})
	future := issue(t, k.ca, "future", testca.Options{Client: true, NotBefore: now.Add(24 * time.Hour), NotAfter: now.Add(48 * time.Hour)})
	serverOnly := issue(t, k.ca, "server-only", testca.Options{Server: true})
	notPEM := file(t, k.dir, "not-pem", []byte(secretText+"\n"))
	keyPEM := read(t, k.client.KeyFile)
	encrypted := file(t, k.dir, "encrypted-key.pem", []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"))
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
				_, _, err := Client("etcd.tls", c.f, c.now)
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
	_, _, err := Client("api.tls", Files{CAFile: k.client.KeyFile, CertFile: k.client.CertFile, KeyFile: filepath.Join(k.dir, "none")}, time.Now())
	var te *Error
	if !errors.As(err, &te) || len(te.Problems) != 2 || te.Problems[0].Key != "api.tls.ca_file" || te.Problems[1].Key != "api.tls.key_file" {
		t.Fatalf("want a ca_file and a key_file problem, got %v", err)
	}
}

// TestClientConfig: TLS 1.2 at least; a CA file alone verifies servers
// and presents no certificate; a key pair is presented.
func TestClientConfig(t *testing.T) {
	k := newKit(t)
	cfg, cert, err := Client("etcd.tls", Files{CAFile: k.ca.CertFile}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 || cfg.RootCAs == nil || cfg.GetClientCertificate != nil || cert != nil {
		t.Fatalf("CA only: min version %x, roots %v, client certificate %v", cfg.MinVersion, cfg.RootCAs != nil, cert)
	}
	cfg, cert, err = Client("etcd.tls", Files{}, time.Now())
	if err != nil || cfg.RootCAs != nil || cert != nil {
		t.Fatalf("no files (the system's roots): %v %v %v", cfg, cert, err)
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
	server := issue(t, k.ca, "server", testca.Options{Server: true})
	cfg, holder, err := Client("etcd.tls", Files{CAFile: k.ca.CertFile, CertFile: k.client.CertFile, KeyFile: k.client.KeyFile}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
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
	rotated := issue(t, k.ca, "client-2", testca.Options{Client: true})
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
}

// TestDialTLSVerifiesAddresses: a node reached at an IP address (how
// nodes advertise themselves) is verified for that address through
// DialTLS; Verifying's config set as TLSClientConfig alone sees no server
// name in the handshake (no SNI for an address) and refuses it; a
// certificate for another address is refused.
func TestDialTLSVerifiesAddresses(t *testing.T) {
	k := newKit(t)
	cas := &CAs{}
	cas.Store(k.ca.Pool())
	serve := func(hosts ...string) string {
		t.Helper()
		is := issue(t, k.ca, "node-"+hosts[0], testca.Options{Server: true, Hosts: hosts})
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
	if err := get(&http.Transport{DialTLSContext: DialTLS(Verifying(cas, nil))}, good); err != nil {
		t.Fatalf("a node at its certificate's address through DialTLS: %v", err)
	}
	if err := get(&http.Transport{TLSClientConfig: Verifying(cas, nil)}, good); err == nil || !strings.Contains(err.Error(), "no server name") {
		t.Fatalf("Verifying as TLSClientConfig alone, to an address: %v, want refused for want of a server name", err)
	}
	if err := get(&http.Transport{DialTLSContext: DialTLS(Verifying(cas, nil))}, other); err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("a certificate for 127.0.0.2 served at 127.0.0.1: %v, want refused", err)
	}
}
