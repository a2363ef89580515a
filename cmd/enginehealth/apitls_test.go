package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/testca"
)

// TestAPIOverTLS: the daemon serves its API over TLS and requires client
// certificates from its client CA. The CLI reaches it with --cacert,
// --cert and --key (a certificate names a reader); without a client
// certificate, or with one of another CA, the handshake is refused; plain
// HTTP sent to the port gets a 400. An operator's token over TLS pauses
// (recorded under their name). On SIGHUP, a rotated server certificate is
// served to the next connections and a rotated tokens file replaces the
// operators, without a restart and in the same term; a broken
// certificate file is refused and the old one kept.
func TestAPIOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := testca.New(dir, "api-ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testca.New(dir, "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	node := ca.MustIssue(t, "tls-node", testca.Options{}) // server and client
	carol := ca.MustIssue(t, "carol", testca.Options{Client: true})
	mallory := other.MustIssue(t, "mallory", testca.Options{Client: true})
	hash := func(token string) string {
		sum := sha256.Sum256([]byte(token))
		return hex.EncodeToString(sum[:])
	}
	tokens := filepath.Join(dir, "tokens.yaml")
	writeFile(t, tokens, "- {name: alice, sha256: "+hash("alice-token")+", role: operate}\n")
	cfg := daemonConfig(t, "tls-node", pg.NewDatabase(t),
		"tokens_file: "+tokens, "auth_reads: true",
		"tls: {cert_file: "+node.CertFile+", key_file: "+node.KeyFile+", client_ca_file: "+ca.CertFile+"}")

	var out logBuffer
	log, level, err := newLogger("json", "info", &out)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runDaemon(ctx, cfg, log, level) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runDaemon after cancel: %v", err)
		}
	}()
	rec, store := waitReadyMaster(t, cfg, done)
	if !strings.HasPrefix(rec.APIAddress, "https://127.0.0.1:") {
		t.Fatalf("advertised address %q, want https://127.0.0.1:PORT", rec.APIAddress)
	}
	addr := rec.APIAddress
	hostPort := strings.TrimPrefix(addr, "https://")

	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, append(args, "--api", addr)...)
	}
	withCert := func(is *testca.Issued) []string {
		return []string{"--cacert", ca.CertFile, "--cert", is.CertFile, "--key", is.KeyFile}
	}

	// A reader by certificate.
	if o, e, code := cli(append([]string{"nodes"}, withCert(carol)...)...); code != exitOK || !strings.Contains(o, "tls-node") {
		t.Fatalf("nodes with carol's certificate: exit %d: %s%s", code, o, e)
	}
	// The environment instead of flags.
	t.Setenv("ENGINEHEALTH_CACERT", ca.CertFile)
	t.Setenv("ENGINEHEALTH_CERT", carol.CertFile)
	t.Setenv("ENGINEHEALTH_KEY", carol.KeyFile)
	if o, e, code := cli("nodes"); code != exitOK {
		t.Fatalf("nodes with ENGINEHEALTH_CACERT/CERT/KEY: exit %d: %s%s", code, o, e)
	}
	t.Setenv("ENGINEHEALTH_CERT", "")
	t.Setenv("ENGINEHEALTH_KEY", "")
	// No client certificate, or one of another CA: refused in the handshake.
	if _, e, code := cli("nodes", "--cacert", ca.CertFile); code != exitUnreachable {
		t.Fatalf("nodes without a client certificate: exit %d: %s", code, e)
	}
	// The daemon answered: the CLI says it refused, not that nobody answered.
	if _, e, code := cli(append([]string{"nodes"}, "--cacert", ca.CertFile, "--cert", mallory.CertFile, "--key", mallory.KeyFile)...); code != exitUnreachable ||
		!strings.Contains(e, "refused the TLS connection") || strings.Contains(e, "no enginehealth daemon answered") {
		t.Fatalf("nodes with a certificate of another CA: exit %d: %s", code, e)
	}
	// The daemon's certificate verified: a CLI that trusts another CA
	// does not talk to it.
	if _, e, code := cli(append([]string{"nodes"}, "--cacert", other.CertFile, "--cert", carol.CertFile, "--key", carol.KeyFile)...); code != exitUnreachable || !strings.Contains(e, "certificate") {
		t.Fatalf("nodes trusting another CA: exit %d: %s", code, e)
	}
	// An expired client certificate: refused in the handshake (the CLI
	// refuses to load it at all, so dialled by hand).
	expired := ca.MustIssue(t, "carol-expired", testca.Options{Client: true, NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	if err := handshake(hostPort, ca, expired); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("handshake with an expired client certificate: %v, want refused as expired", err)
	}
	if _, e, code := cli("nodes", "--cacert", ca.CertFile, "--cert", expired.CertFile, "--key", expired.KeyFile); code != exitUsage || !strings.Contains(e, "--cert") || !strings.Contains(e, "expired") {
		t.Fatalf("nodes --cert expired: exit %d: %s", code, e)
	}
	// The address without https://: told to give it.
	if _, e, code := runCLI(t, "nodes", "--api", hostPort); code == exitOK || !strings.Contains(e, "https://"+hostPort) {
		t.Fatalf("nodes --api %s (no scheme) against HTTPS: exit %d: %s", hostPort, code, e)
	}
	// A file from the environment is named by its variable.
	t.Setenv("ENGINEHEALTH_CACERT", filepath.Join(dir, "absent.pem"))
	if _, e, code := cli("nodes"); code != exitUsage || !strings.Contains(e, "$ENGINEHEALTH_CACERT") {
		t.Fatalf("nodes with ENGINEHEALTH_CACERT absent: exit %d: %s", code, e)
	}
	t.Setenv("ENGINEHEALTH_CACERT", "")
	// A bad flag is a usage error naming it.
	if _, e, code := cli("nodes", "--cacert", filepath.Join(dir, "absent.pem")); code != exitUsage || !strings.Contains(e, "--cacert") {
		t.Fatalf("nodes --cacert absent: exit %d: %s", code, e)
	}

	// Plain HTTP to the TLS port: Go's 400, at once.
	c, err := net.DialTimeout("tcp", hostPort, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	c.Close()
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("plain HTTP to the TLS port: %v %v, want 400", resp, err)
	}

	// An operator acts over TLS.
	aliceToken := filepath.Join(dir, "alice.token")
	writeFile(t, aliceToken, "alice-token\n")
	if o, e, code := cli(append([]string{"pause", "--reason", "rotation drill", "--token-file", aliceToken}, withCert(carol)...)...); code != exitOK {
		t.Fatalf("pause by alice over TLS: exit %d: %s%s", code, o, e)
	}
	reader := tlsClient(addr, ca, carol)
	events, err := reader.Events(ctx, audit.ListParams{Kind: audit.KindPaused})
	if err != nil || len(events) != 1 || events[0].Actor != "alice (operator)" {
		t.Fatalf("pause events %+v %v, want one by alice (operator)", events, err)
	}
	term := leaderTerm(t, reader)
	// The API's certificate and client CA are watched for their expiry.
	st, err := reader.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watched := map[string]bool{}
	for _, c := range st.Certificates {
		watched[c.Which] = true
	}
	if !watched["api.tls.cert_file"] || !watched["api.tls.client_ca_file"] {
		t.Fatalf("status certificates %+v, want api.tls.cert_file and api.tls.client_ca_file", st.Certificates)
	}

	// Rotation: a new server certificate and a new tokens file, SIGHUP.
	before := servedSerial(t, hostPort, ca, carol)
	rotated := ca.MustIssue(t, "tls-node", testca.Options{}) // same files, new serial
	writeFile(t, tokens, "- {name: bob, sha256: "+hash("bob-token")+", role: operate}\n")
	reloads := len(out.records("configuration reloaded"))
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "a reload", func() (bool, error) {
		return len(out.records("configuration reloaded")) > reloads, nil
	})
	said := false
	for _, r := range out.records("reloaded") {
		w, _ := r["what"].(string)
		said = said || strings.HasPrefix(w, "api.tls.cert_file (CN \"tls-node\"")
	}
	if !said {
		t.Errorf("no log record names the reloaded api.tls.cert_file")
	}
	if got := servedSerial(t, hostPort, ca, carol); got == before || got != rotated.Cert.SerialNumber.String() {
		t.Fatalf("served certificate serial %s after the reload (before %s, rotated %s)", got, before, rotated.Cert.SerialNumber)
	}
	if _, e, code := cli(append([]string{"resume", "--token-file", aliceToken}, withCert(carol)...)...); code != exitFailure || !strings.Contains(e, "401") {
		t.Fatalf("resume with alice's token after her removal: exit %d: %s", code, e)
	}
	bobToken := filepath.Join(dir, "bob.token")
	writeFile(t, bobToken, "bob-token\n")
	if o, e, code := cli(append([]string{"resume", "--token-file", bobToken}, withCert(carol)...)...); code != exitOK {
		t.Fatalf("resume by bob after the reload: exit %d: %s%s", code, o, e)
	}
	if got := leaderTerm(t, reader); got != term {
		t.Fatalf("term %d after the reload, was %d: the master must stay in office", got, term)
	}

	// A broken certificate file: the reload fails, the old one is served.
	writeFile(t, rotated.CertFile, "not a certificate\n")
	failures := len(out.records("failed"))
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the failed reload logged", func() (bool, error) {
		return len(out.records("failed")) > failures, nil
	})
	if got := servedSerial(t, hostPort, ca, carol); got != rotated.Cert.SerialNumber.String() {
		t.Fatalf("served serial %s after a broken certificate file, want the last good one %s", got, rotated.Cert.SerialNumber)
	}
	if _, err := store.Get(ctx, "tls-node"); err != nil {
		t.Fatalf("node record: %v", err)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// tlsClient is an API client of addr that trusts ca and presents is.
func tlsClient(addr string, ca *testca.CA, is *testca.Issued) *api.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{is.TLS}}
	cl := api.NewClient(addr, "")
	cl.HTTP.Transport = tr
	return cl
}

func leaderTerm(t *testing.T, cl *api.Client) int64 {
	t.Helper()
	l, err := cl.Leader(context.Background())
	if err != nil {
		t.Fatalf("/v1/leader: %v", err)
	}
	return l.Term
}

// handshake completes a TLS handshake with hostPort presenting is, and a
// read: a client certificate the server refuses fails one or the other
// (TLS 1.3 reports it after the handshake).
func handshake(hostPort string, ca *testca.CA, is *testca.Issued) error {
	host, _, _ := net.SplitHostPort(hostPort)
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", hostPort,
		&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{is.TLS}, ServerName: host})
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		return err
	}
	_, err = c.Read(make([]byte, 1))
	return err
}

// servedSerial returns the serial of the certificate a new TLS
// connection to hostPort is served.
func servedSerial(t *testing.T, hostPort string, ca *testca.CA, is *testca.Issued) string {
	t.Helper()
	host, _, _ := net.SplitHostPort(hostPort)
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", hostPort,
		&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{is.TLS}, ServerName: host})
	if err != nil {
		t.Fatalf("TLS dial %s: %v", hostPort, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}
