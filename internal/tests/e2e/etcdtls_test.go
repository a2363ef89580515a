package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/testkit/etcdtest"
	"github.com/enginehealth/enginehealth/internal/testkit/testca"
)

// TestEtcdTLSAndAuth runs daemons against a 3-member etcd cluster (one
// process per member) that serves clients over TLS only, with
// --client-cert-auth --trusted-ca-file, and has auth enabled. The
// daemon's user has a role with readwrite on its prefix only, not root,
// and its certificate's CN is no etcd user (so the password is what
// authenticates it). It becomes master, and resigns cleanly. Daemons that cannot connect (a
// client certificate of another CA or none, a wrong password, a user
// without permission on the prefix, a CA file that does not verify the
// members, TLS on one side only) keep running
// and retrying, and log each attempt with its cause.
func TestEtcdTLSAndAuth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := testca.New(dir, "etcd-ca")
	if err != nil {
		t.Fatal(err)
	}
	const user, password = "enginehealth", "etcd-pw-4Kq9"
	// configWith's prefix is /TEST_SUBTEST/: the role's prefix holds
	// every subtest's.
	cl, err := etcdtest.StartCluster(etcdtest.ClusterConfig{Binary: memberBin, CA: ca, LogDir: t.ArtifactDir(),
		Auth: &etcdtest.Auth{RootPassword: "root-pw-7Hs2", Users: []etcdtest.User{{Name: user, Password: password, Prefix: "/" + t.Name()},
			{Name: "stranger", Password: password, Prefix: "/elsewhere/"}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	good := ca.MustIssue(t, "sidecar-cert", testca.Options{Client: true})
	rogueCA, err := testca.New(t.TempDir(), "rogue-ca")
	if err != nil {
		t.Fatal(err)
	}
	rogue := rogueCA.MustIssue(t, "sidecar-cert", testca.Options{Client: true})
	secret := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	goodPassword, wrongPassword := secret("password", password), secret("wrong-password", "not-"+password)
	// access is the etcd section's TLS and user (the CA that verifies the
	// members, the client certificate, the password file).
	access := func(caFile string, cert *testca.Issued, passwordFile string) string {
		return fmt.Sprintf("  tls:\n    ca_file: %s\n    cert_file: %s\n    key_file: %s\n  username: %s\n  password_file: %s\n",
			caFile, cert.CertFile, cert.KeyFile, user, passwordFile)
	}
	config := func(c *cluster, name string, endpoints []string, etcdLines string) string {
		return c.configWith(name, cfgOpts{Endpoints: endpoints, Etcd: "  dial_timeout: 1s\n" + etcdLines})
	}

	// With the CA, its certificate and the user's password, the daemon
	// becomes master (its lease, election keys, resignation all under
	// TLS and auth) and stops cleanly. Its certificate expires in 3
	// days: a warning in its log, its metric, its status.
	t.Run("master", func(t *testing.T) {
		t.Parallel()
		soon, err := ca.Issue("sidecar-soon", testca.Options{Client: true, NotAfter: time.Now().Add(3 * 24 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		c := newCluster(t)
		d := c.start("tls-a", config(c, "tls-a", cl.Endpoints(), access(ca.CertFile, soon, goodPassword)))
		if term := c.waitTerm(t, 0, 30*time.Second); term.Node != "tls-a" {
			t.Fatalf("master %s", term.Node)
		}
		l, err := api.NewClient(apiOf(t, c, "tls-a"), "").Leader(context.Background())
		if err != nil || l.Name != "tls-a" {
			t.Fatalf("GET /v1/leader: %+v %v", l, err)
		}
		// logged: a line of the log holds every part.
		logged := func(parts ...string) bool {
			return slices.ContainsFunc(strings.Split(d.stderr.String(), "\n"), func(l string) bool {
				for _, p := range parts {
					if !strings.Contains(l, p) {
						return false
					}
				}
				return true
			})
		}
		if !logged(`"msg":"connected to etcd"`, `"tls":true,"client_certificate":true,"user":"enginehealth"`) {
			t.Fatalf("no TLS connection logged:\n%s", d.stderr.String())
		}
		if !logged(`"level":"WARN"`, `"msg":"certificate expires soon"`, `"which":"etcd.tls.cert_file"`, `"cn":"sidecar-soon"`, `"days_left":3`) {
			t.Fatalf("no warning of the certificate logged:\n%s", d.stderr.String())
		}
		body := getBody(t, "http://"+apiOf(t, c, "tls-a")+"/metrics")
		for _, which := range []string{"etcd.tls.cert_file", "etcd.tls.ca_file"} {
			if !strings.Contains(string(body), `enginehealth_certificate_expiry_seconds{which="`+which+`"} `) {
				t.Errorf("/metrics lacks the expiry of %s", which)
			}
		}
		st, err := api.NewClient(apiOf(t, c, "tls-a"), "").Status(context.Background())
		if cs := st.Certificates; err != nil || len(cs) != 2 || cs[0].Which != "etcd.tls.cert_file" || !cs[0].ExpiringSoon ||
			cs[1].Which != "etcd.tls.ca_file" || cs[1].ExpiringSoon {
			t.Fatalf("status certificates %+v %v", st.Certificates, err)
		}
		d.signal(t, syscall.SIGTERM)
		if code := d.wait(t, 15*time.Second); code != 0 {
			t.Fatalf("exit %d after SIGTERM", code)
		}
		// Resigning revoked its lease and wrote the resignation marker.
		if log := d.stderr.String(); !strings.Contains(log, "revoking the etcd lease") || strings.Contains(log, "permission denied") {
			t.Fatalf("no lease revoked, or etcd refused a request:\n%s", log)
		}
	})

	// A refused connection is retried, each attempt logged with its cause,
	// the daemon never crashes, and SIGTERM still stops it cleanly.
	for _, c := range []struct {
		name, node string
		endpoints  []string
		etcd       string // lines under etcd:
		cause      string // in every failed attempt's log line
	}{
		{"certificate of another CA", "tls-rogue", cl.Endpoints(), access(ca.CertFile, rogue, goodPassword),
			"the member refused our client certificate (etcd.tls.cert_file: it must be signed by a CA in the members' --trusted-ca-file, and valid): remote error: tls: unknown certificate authority"},
		{"wrong password", "tls-wrong", cl.Endpoints(), access(ca.CertFile, good, wrongPassword),
			`etcd authentication failed: etcd refused user \"enginehealth\" and its password (etcd.username with etcd.password_file`},
		{"members' CA not trusted", "tls-untrusted", cl.Endpoints(), access(rogueCA.CertFile, good, goodPassword),
			"its certificate is not trusted (etcd.tls.ca_file must hold the CA that signed the members' certificates"},
		{"no etcd.tls", "tls-none", cl.Endpoints(), "  username: " + user + "\n  password_file: " + goodPassword + "\n",
			"the member speaks TLS, and etcd.tls is not set"},
		{"no permission on the prefix", "tls-stranger", cl.Endpoints(), strings.Replace(access(ca.CertFile, good, goodPassword), user, "stranger", 1),
			`etcd authorization: user \"stranger\" may not read /TestEtcdTLSAndAuth_no_permission_on_the_prefix/ (grant it a role with readwrite on the prefix`},
		{"no client certificate", "tls-nocert", cl.Endpoints(), "  tls: {ca_file: " + ca.CertFile + "}\n  username: " + user + "\n  password_file: " + goodPassword + "\n",
			"the member refused the TLS connection; it wants a client certificate (etcd.tls.cert_file and etcd.tls.key_file): remote error: tls: certificate required"},
		{"etcd.tls to a plain member", "tls-plain", []string{etcd.Endpoint}, access(ca.CertFile, good, goodPassword),
			"the member does not speak TLS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cc := newCluster(t)
			d := cc.start(c.node, config(cc, c.node, c.endpoints, c.etcd))
			eventually(t, 30*time.Second, "two failed attempts logged with their cause", func() (bool, error) {
				if !d.running() {
					t.Fatalf("%s exited: %v\n%s", c.node, d.err, d.stderr.String())
				}
				return strings.Count(d.stderr.String(), c.cause) >= 2, nil
			})
			if log := d.stderr.String(); strings.Contains(log, "panic") || strings.Contains(log, password) {
				t.Fatalf("a panic or the password in the log:\n%s", log)
			}
			d.signal(t, syscall.SIGTERM)
			if code := d.wait(t, 15*time.Second); code != 0 {
				t.Fatalf("exit %d after SIGTERM", code)
			}
		})
	}
}

// TestEtcdCAReload: etcd.tls.ca_file is reloaded without a restart, and a
// node that cannot reach etcd while it runs says so. A master runs
// against a one-member etcd that serves TLS and wants client
// certificates. Its CA file is replaced by another CA's and reloaded
// (SIGHUP); the member restarts, so the daemon must connect again, and the
// new CAs refuse the member: the node's status says etcd is not
// reachable and why (the member's certificate is not trusted), /metrics
// says 0. The right CA is put back and reloaded: the same process
// reaches etcd again and is master again.
func TestEtcdCAReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := testca.New(dir, "etcd-ca")
	if err != nil {
		t.Fatal(err)
	}
	rogueCA, err := testca.New(t.TempDir(), "rogue-ca")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := etcdtest.StartCluster(etcdtest.ClusterConfig{Binary: memberBin, CA: ca, Members: 1, LogDir: t.ArtifactDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	cert := ca.MustIssue(t, "sidecar-cert", testca.Options{Client: true})
	caFile := filepath.Join(dir, "members-ca.pem")
	useCA := func(from string) {
		t.Helper()
		pem, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		// Replaced as a renewal tool does: a new file renamed over.
		if err := os.WriteFile(caFile+".new", pem, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(caFile+".new", caFile); err != nil {
			t.Fatal(err)
		}
	}
	useCA(ca.CertFile)
	c := newCluster(t)
	d := c.start("ca-a", c.configWith("ca-a", cfgOpts{Endpoints: cl.Endpoints(),
		Etcd: fmt.Sprintf("  dial_timeout: 1s\n  tls:\n    ca_file: %s\n    cert_file: %s\n    key_file: %s\n", caFile, cert.CertFile, cert.KeyFile)}))
	first := c.waitTerm(t, 0, 30*time.Second)
	if first.Node != "ca-a" {
		t.Fatalf("master %s", first.Node)
	}
	cli := api.NewClient(apiOf(t, c, "ca-a"), "")
	etcdState := func() (*apitype.EtcdState, error) {
		st, err := cli.Status(context.Background())
		if err != nil {
			return nil, err
		}
		if st.Etcd == nil {
			t.Fatal("status without etcd")
		}
		return st.Etcd, nil
	}
	if e, err := etcdState(); err != nil || !e.Reachable || e.Error != "" {
		t.Fatalf("etcd state of a connected node: %+v %v", e, err)
	}

	useCA(rogueCA.CertFile)
	d.signal(t, syscall.SIGHUP)
	eventually(t, 10*time.Second, "the CA file reloaded", func() (bool, error) {
		return slices.ContainsFunc(strings.Split(d.stderr.String(), "\n"), func(l string) bool {
			return strings.Contains(l, `"msg":"reloaded"`) && strings.Contains(l, `"what":"etcd.tls.ca_file"`)
		}), nil
	})
	// Tried on the member at once: the new CA does not verify it.
	eventually(t, 10*time.Second, "a warning that the new CA does not verify the member", func() (bool, error) {
		return slices.ContainsFunc(strings.Split(d.stderr.String(), "\n"), func(l string) bool {
			return strings.Contains(l, `"msg":"the reloaded etcd TLS files do not work with a member`) && strings.Contains(l, "its certificate is not trusted")
		}), nil
	})
	// The connection open goes on: only new ones use the new CAs.
	m := cl.Members[0]
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	const cause = "its certificate is not trusted (etcd.tls.ca_file must hold the CA that signed the members' certificates"
	eventually(t, 30*time.Second, "the node's status saying etcd is not reachable, and why", func() (bool, error) {
		e, err := etcdState()
		if err != nil {
			return false, err
		}
		return !e.Reachable && strings.Contains(e.Error, cause) && strings.Contains(e.Error, "unknown authority"), fmt.Errorf("etcd state %+v", e)
	})
	if body := getBody(t, "http://"+apiOf(t, c, "ca-a")+"/metrics"); !strings.Contains(string(body), "\nenginehealth_etcd_reachable 0\n") {
		t.Fatalf("/metrics does not say etcd is unreachable:\n%s", body)
	}
	if n := strings.Count(d.stderr.String(), `"msg":"this node cannot use etcd`); n != 1 {
		t.Fatalf("%d log lines saying this node cannot use etcd, want 1 (each cause once):\n%s", n, d.stderr.String())
	}

	useCA(ca.CertFile)
	d.signal(t, syscall.SIGHUP)
	eventually(t, 30*time.Second, "the node reaching etcd again, and master again", func() (bool, error) {
		e, err := etcdState()
		if err != nil || !e.Reachable {
			return false, fmt.Errorf("etcd state %+v %v", e, err)
		}
		l, err := cli.Leader(context.Background())
		return err == nil && l.Name == "ca-a", err
	})
	if !d.running() || strings.Count(d.stderr.String(), `"msg":"starting enginehealth"`) != 1 {
		t.Fatalf("the daemon restarted or stopped:\n%s", d.stderr.String())
	}
	if !strings.Contains(d.stderr.String(), `"msg":"the reloaded etcd TLS files work with every member"`) {
		t.Fatalf("no log line saying the restored CA works:\n%s", d.stderr.String())
	}
	if !strings.Contains(d.stderr.String(), `"msg":"this node uses etcd again"`) {
		t.Fatalf("no log line saying this node uses etcd again:\n%s", d.stderr.String())
	}
}

// getBody returns the body of GET url (any status).
func getBody(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return body
}
