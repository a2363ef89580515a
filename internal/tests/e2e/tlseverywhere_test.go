package e2e

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/demoengine"
	"github.com/enginehealth/enginehealth/internal/testkit/testca"
	"github.com/enginehealth/enginehealth/nodes"
)

// TestTLSEverywhere (issue 27's acceptance): three sidecars, as
// processes, on a cluster with TLS everywhere (newTLSCluster: etcd with
// client certificates and auth under a non-root user, PostgreSQL with
// verify-full, the API with client_auth require and named operators).
// A master is elected; SIGKILL of it puts another in office. A hold
// decision alice sends to a standby is forwarded to the master over TLS —
// the master takes no connection without a client certificate, so the
// standby presented its own — and recorded as "alice (operator)" via the
// standby; a read token is refused on a mutation (403 naming operate). On
// SIGHUP the master takes a rotated API certificate (reissued into the
// same files) and every node a changed tokens file, without a restart
// and in the same term; a broken certificate file on SIGHUP is refused
// and the last good certificate is still served.
func TestTLSEverywhere(t *testing.T) {
	t.Parallel()
	c := newTLSCluster(t)
	flows := replaceOnce(t, demoengine.WorkflowsYAML(time.Minute), "failed: ShipFailed\n", "failed: ShipFailed\n        on_interrupt: {strategy: hold}\n")
	cfg := func(name string) string {
		return c.configWith(name, cfgOpts{Schedule: "@every 1h", Extra: flows})
	}
	c.seed(cfg("seed"), 20)
	ds := map[string]*daemon{}
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		ds[name] = c.start(name, cfg(name))
	}
	for name, d := range ds {
		waitNodeStatus(t, c, name, nodes.StatusReady)
		if d.logLines(`"msg":"connected to etcd"`, `"tls":true,"client_certificate":true,"user":"`+etcdUser+`"`) == 0 {
			t.Fatalf("%s logged no etcd connection with TLS, its certificate and user %s:\n%s", name, etcdUser, d.stderr.String())
		}
		if n, _ := c.node(name); !strings.HasPrefix(n.APIAddress, "https://127.0.0.1:") {
			t.Fatalf("%s advertises %q, want https://127.0.0.1:PORT", name, n.APIAddress)
		}
	}
	first := c.waitTerm(t, 0, 30*time.Second)

	// SIGKILL of the master: another takes office, and acts once the
	// killed one's trust window has closed.
	ds[first.Node].signal(t, syscall.SIGKILL)
	term := c.waitTerm(t, first.Term, 30*time.Second)
	if term.Node == first.Node {
		t.Fatalf("the killed master %s in office again", term.Node)
	}
	master := apiOf(t, c, term.Node)
	hc := c.httpClient(5 * time.Second)
	eventually(t, 30*time.Second, term.Node+" acting", func() (bool, error) {
		resp, err := c.get(hc, master, "/v1/leader?local=true")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	var standby string
	for name := range ds {
		if name != first.Node && name != term.Node {
			standby = name
		}
	}
	via := apiOf(t, c, standby)
	incarnation := c.waitRegistered(ds[term.Node], time.Second).Incarnation

	// The master takes no connection without a client certificate: what
	// the standby forwards, it forwards with its own.
	if err := c.tlsWithoutCert(master); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("a connection to the master without a client certificate: %v, want it refused (certificate required)", err)
	}

	// Two shipments interrupted under a hold policy: held by a check
	// alice sends to the standby, one released by her through it.
	c.db.MustExec(`UPDATE demo.orders SET status = 'Shipping', last_error = 'carrier timeout' WHERE id IN (7, 8)`)
	alice, reader := c.operatorEnv(), c.cliEnv(readerToken)
	if out, errOut, code := cli(t, alice, "check", "--api", via); code != 0 {
		t.Fatalf("check by alice through %s: exit %d: %s%s", standby, code, out, errOut)
	}
	if out, errOut, code := cli(t, alice, "holds", "retry", "orders/7", "--reason", "carrier back", "--api", via); code != 0 ||
		!strings.Contains(out, "1 held instance sent back to begin") {
		t.Fatalf("holds retry by alice through %s: exit %d: %s%s", standby, code, out, errOut)
	}
	c.decidedBy(t, "7", "alice (operator)", standby)
	// A read token may not decide.
	if _, errOut, code := cli(t, reader, "holds", "retry", "orders/8", "--api", via); code != 1 || !strings.Contains(errOut, "403") ||
		!strings.Contains(errOut, "needs role operate") {
		t.Fatalf("holds retry with a read token: exit %d: %s", code, errOut)
	}

	// Rotation: the master's certificate reissued into its files, alice
	// replaced by bob in the tokens file; SIGHUP to every node.
	before := c.servedSerial(t, master)
	rotated := c.tls.ca.MustIssue(t, term.Node, testca.Options{})
	const bobToken = "bob-token-2Nv6"
	writeTestFile(t, filepath.Dir(c.tls.tokensFile), filepath.Base(c.tls.tokensFile),
		operatorEntry("bob", bobToken, "operate")+operatorEntry("reader", readerToken, "read"))
	for _, name := range []string{term.Node, standby} {
		reloaded(t, ds[name], `"msg":"configuration reloaded"`)
	}
	if ds[term.Node].logLines(`"msg":"reloaded"`, `"what":"api.tls.cert_file (CN \"`+term.Node+`\"`) == 0 {
		t.Errorf("%s logged no reload of api.tls.cert_file", term.Node)
	}
	if got := c.servedSerial(t, master); got == before || got != rotated.Cert.SerialNumber.String() {
		t.Fatalf("served serial %s after the reload (before %s, rotated %s)", got, before, rotated.Cert.SerialNumber)
	}
	if _, errOut, code := cli(t, alice, "holds", "retry", "orders/8", "--api", via); code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("holds retry by alice after her removal: exit %d: %s", code, errOut)
	}
	if out, errOut, code := cli(t, c.cliEnv(bobToken), "holds", "retry", "orders/8", "--reason", "bob's turn", "--api", via); code != 0 {
		t.Fatalf("holds retry by bob through %s after the reload: exit %d: %s%s", standby, code, out, errOut)
	}
	c.decidedBy(t, "8", "bob (operator)", standby)
	c.sameOffice(t, term.Node, term.Term, incarnation, ds[term.Node])

	// A broken certificate file: the reload fails, the daemon goes on
	// serving the last good certificate.
	writeTestFile(t, filepath.Dir(rotated.CertFile), filepath.Base(rotated.CertFile), "not a certificate\n")
	reloaded(t, ds[term.Node], `"level":"ERROR"`, `"msg":"reload`)
	if got := c.servedSerial(t, master); got != rotated.Cert.SerialNumber.String() {
		t.Fatalf("served serial %s after a broken certificate file, want the last good one %s", got, rotated.Cert.SerialNumber)
	}
	if out, errOut, code := cli(t, reader, "nodes", "--api", master); code != 0 || !strings.Contains(out, standby) {
		t.Fatalf("nodes from the master after the failed reload: exit %d: %s%s", code, out, errOut)
	}
	c.sameOffice(t, term.Node, term.Term, incarnation, ds[term.Node])
}

// reloaded sends d a SIGHUP and waits until its log has one more line
// with every one of parts than before.
func reloaded(t *testing.T, d *daemon, parts ...string) {
	t.Helper()
	n := d.logLines(parts...)
	d.signal(t, syscall.SIGHUP)
	eventually(t, 10*time.Second, d.name+" logged "+strings.Join(parts, " "), func() (bool, error) {
		return d.logLines(parts...) > n, nil
	})
}

// logLines counts the lines of d's log that hold every one of parts.
func (d *daemon) logLines(parts ...string) int {
	n := 0
	for _, l := range strings.Split(d.stderr.String(), "\n") {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(l, p) }) {
			n++
		}
	}
	return n
}

// decidedBy checks that the hold decision on orders/id was recorded with
// actor, via node via.
func (c *cluster) decidedBy(t *testing.T, id, actor, via string) {
	t.Helper()
	var got []string
	if err := c.db.Select(&got, `SELECT actor || ' via ' || coalesce(via, '-') FROM enginehealth.event_log
		WHERE workflow = 'orders' AND instance = $1 AND kind = 'hold_decided'`, id); err != nil {
		t.Fatal(err)
	}
	if want := actor + " via " + via; len(got) != 1 || got[0] != want {
		t.Fatalf("hold decisions on orders/%s: %q, want one by %s", id, got, want)
	}
}

// sameOffice checks that node is still the master of term, in the same
// incarnation, its process never restarted.
func (c *cluster) sameOffice(t *testing.T, node string, term int64, incarnation string, d *daemon) {
	t.Helper()
	now := c.term(t)
	n, err := c.node(node)
	if err != nil {
		t.Fatal(err)
	}
	if now.Term != term || now.Node != node || n.Incarnation != incarnation || !d.running() {
		t.Fatalf("master %s of term %d (incarnation %s, running %v): want %s still in office in term %d, incarnation %s",
			now.Node, now.Term, n.Incarnation, d.running(), node, term, incarnation)
	}
}

// servedSerial returns the serial of the certificate a new TLS connection
// to the API at addr is served.
func (c *cluster) servedSerial(t *testing.T, addr string) string {
	t.Helper()
	conn, err := c.dialAPI(addr, c.tls.clientTLS())
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// tlsWithoutCert connects to the API at addr trusting the cluster's CA and
// presenting no certificate, and returns the error of the handshake, or
// of the first read after it (TLS 1.3 refuses a client's certificate
// after the client's side of the handshake is done).
func (c *cluster) tlsWithoutCert(addr string) error {
	conn, err := c.dialAPI(addr, &tls.Config{RootCAs: c.tls.ca.Pool()})
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	return err
}

func (c *cluster) dialAPI(addr string, cfg *tls.Config) (*tls.Conn, error) {
	u, err := url.Parse(c.apiURL(addr))
	if err != nil {
		return nil, err
	}
	return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", u.Host, cfg)
}
