package configs

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/testkit/testca"
)

// etcdFiles is a directory with a CA, client certificates and a password
// file, where the configurations of the etcd tests sit (their relative
// paths are relative to it).
type etcdFiles struct {
	dir                     string
	ca                      *testca.CA
	client, other           *testca.Issued
	expired, future         *testca.Issued
	notPEM, password, empty string
}

// etcdPassword is the password in the files: no message may show it.
const etcdPassword = "pw-Vt8Lq2Xz"

func newEtcdFiles(t *testing.T) etcdFiles {
	t.Helper()
	dir := t.TempDir()
	ca, err := testca.New(dir, "etcd-ca")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	f := etcdFiles{dir: dir, ca: ca,
		client:  ca.MustIssue(t, "enginehealth", testca.Options{Client: true}),
		other:   ca.MustIssue(t, "other", testca.Options{Client: true}),
		expired: ca.MustIssue(t, "expired", testca.Options{Client: true, NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Hour)}),
		future:  ca.MustIssue(t, "future", testca.Options{Client: true, NotBefore: now.Add(time.Hour), NotAfter: now.Add(2 * time.Hour)}),
	}
	write := func(name, data string) string {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return name
	}
	f.notPEM = write("not-pem.txt", etcdPassword+"\n")
	f.password = write("etcd-password", etcdPassword+"\n")
	f.empty = write("empty", "")
	return f
}

// parse parses yaml as a file in f.dir.
func (f etcdFiles) parse(yaml string, lookupEnv func(string) (string, bool)) (*Config, error) {
	return Parse([]byte(yaml), filepath.Join(f.dir, "enginehealth.yaml"), lookupEnv)
}

// rel is the name of a file of f.dir, as a relative path.
func rel(path string) string { return filepath.Base(path) }

// etcdYAML is a configuration whose etcd section ends with the lines of
// extra (indented under etcd:).
func etcdYAML(endpoints, extra string) string {
	return "database: {dsn_env: ENGINEHEALTH_DSN}\netcd:\n  endpoints: " + endpoints + "\n" + extra
}

const threeEndpoints = `["a:2379", "b:2379", "c:2379"]`

// TestEtcdAccessProblems: every bad etcd TLS or authentication setting is
// refused with its key path (and line), the file it is about, and never
// a file's content or the password.
func TestEtcdAccessProblems(t *testing.T) {
	f := newEtcdFiles(t)
	pair := func(is *testca.Issued) string {
		return "    cert_file: " + rel(is.CertFile) + "\n    key_file: " + rel(is.KeyFile) + "\n"
	}
	tlsWith := func(lines string) string { return "  tls:\n" + lines }
	withCA := func(lines string) string { return tlsWith("    ca_file: " + rel(f.ca.CertFile) + "\n" + lines) }
	user := "  username: enginehealth\n"
	cases := []struct {
		name      string
		endpoints string
		etcd      string // lines under etcd:
		env       func(string) (string, bool)
		path, msg string
		line      int
	}{
		{"CA file missing", threeEndpoints, tlsWith("    ca_file: nope.pem\n"), nil, "etcd.tls.ca_file", "cannot read " + filepath.Join(f.dir, "nope.pem") + ": no such file or directory", 5},
		{"CA file not PEM", threeEndpoints, tlsWith("    ca_file: " + f.notPEM + "\n"), nil, "etcd.tls.ca_file", filepath.Join(f.dir, f.notPEM) + " is not PEM", 5},
		{"CA file holds no certificate", threeEndpoints, tlsWith("    ca_file: " + rel(f.client.KeyFile) + "\n"), nil, "etcd.tls.ca_file", "holds no certificate, only a private key", 5},
		{"CA file empty", threeEndpoints, tlsWith("    ca_file: " + f.empty + "\n"), nil, "etcd.tls.ca_file", "is not PEM", 5},
		{"key of another certificate", threeEndpoints, withCA("    cert_file: " + rel(f.client.CertFile) + "\n    key_file: " + rel(f.other.KeyFile) + "\n"), nil,
			"etcd.tls.key_file", f.other.KeyFile + ": the key does not match the certificate in " + f.client.CertFile, 7},
		{"expired certificate", threeEndpoints, withCA(pair(f.expired)), nil, "etcd.tls.cert_file", `the certificate (CN "expired") expired on`, 6},
		{"certificate not valid yet", threeEndpoints, withCA(pair(f.future)), nil, "etcd.tls.cert_file", `(CN "future") is not valid before`, 6},
		{"cert_file without key_file", threeEndpoints, withCA("    cert_file: " + rel(f.client.CertFile) + "\n"), nil, "etcd.tls.key_file", "required with etcd.tls.cert_file", 5},
		{"key_file without cert_file", threeEndpoints, withCA("    key_file: " + rel(f.client.KeyFile) + "\n"), nil, "etcd.tls.cert_file", "required with etcd.tls.key_file", 5},
		{"cert and key swapped", threeEndpoints, withCA("    cert_file: " + rel(f.client.KeyFile) + "\n    key_file: " + rel(f.client.CertFile) + "\n"), nil,
			"etcd.tls.cert_file", "swapped?", 6},
		{"http endpoint with TLS", `["a:2379", "http://b:2379", "https://c:2379"]`, withCA(""), nil, "etcd.endpoints[1]", `"http://b:2379" is http://, without TLS, but etcd.tls is set`, 0},
		{"unix endpoint with TLS", `["a:2379", "b:2379", "unix://c:2379"]`, withCA(""), nil, "etcd.endpoints[2]", "is unix://, without TLS", 0},
		{"bad server name", threeEndpoints, withCA("    server_name: \"etcd server\"\n"), nil, "etcd.tls.server_name", "not an IP address or a DNS name", 6},
		{"unknown TLS key", threeEndpoints, tlsWith("    ca: x.pem\n"), nil, "etcd.tls.ca", "unknown key", 5},
		{"TLS as a string", threeEndpoints, "  tls: on\n", nil, "etcd.tls", "want a mapping", 4},
		{"username without password", threeEndpoints, user, nil, "etcd.username", "needs its password: set one of etcd.password_file or etcd.password_env", 4},
		{"both password sources", threeEndpoints, user + "  password_file: " + f.password + "\n  password_env: ETCD_PW\n", env("ENGINEHEALTH_DSN", "postgres://h/d", "ETCD_PW", "x"),
			"etcd.password_env", "set only one of etcd.password_file and etcd.password_env", 6},
		{"password file without username", threeEndpoints, "  password_file: " + f.password + "\n", nil, "etcd.password_file", "set, but etcd.username is not", 4},
		{"password env without username", threeEndpoints, "  password_env: ETCD_PW\n", nil, "etcd.password_env", "set, but etcd.username is not", 4},
		{"password file missing", threeEndpoints, user + "  password_file: gone\n", nil, "etcd.password_file", "cannot read password: " + filepath.Join(f.dir, "gone") + ": no such file", 5},
		{"password file empty", threeEndpoints, user + "  password_file: " + f.empty + "\n", nil, "etcd.password_file", "is empty", 5},
		{"password env unset", threeEndpoints, user + "  password_env: ETCD_PW\n", nil, "etcd.password_env", "ETCD_PW is not set or empty", 5},
		{"username and credentials in an endpoint", `["a:2379", "http://root:` + etcdPassword + `@b:2379"]`, user + "  password_file: " + f.password + "\n", nil,
			"etcd.endpoints[1]", "carries user:password@, and etcd.username is set too", 0},
		{"username and credentials in an https endpoint", `["https://root:` + etcdPassword + `@a:2379", "https://b:2379"]`, user + "  password_file: " + f.password + "\n", nil,
			"etcd.endpoints[0]", "carries user:password@, and etcd.username is set too", 0},
		{"HTTP in capitals with TLS", `["a:2379", "HTTP://b:2379"]`, withCA(""), nil, "etcd.endpoints[1]", "is http://, without TLS, but etcd.tls is set", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := c.env
			if e == nil {
				e = testEnv
			}
			yaml := etcdYAML(c.endpoints, c.etcd)
			_, err := f.parse(yaml, e)
			if err == nil {
				t.Fatalf("accepted:\n%s", yaml)
			}
			problemAt(t, err, c.path, c.msg, c.line)
			if strings.Contains(err.Error(), etcdPassword) || strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), "BEGIN") && !strings.Contains(err.Error(), "-----BEGIN block") {
				t.Fatalf("a secret or a file's content shows: %v", err)
			}
		})
	}
}

// TestEtcdTLSAndAuth: a CA, a client certificate and a user with a
// password file give the client its TLS configuration (TLS 1.2 at least,
// the CA, the certificate from the holder, the server name), https
// endpoints, and the credentials; no warning.
func TestEtcdTLSAndAuth(t *testing.T) {
	f := newEtcdFiles(t)
	yaml := etcdYAML(`["a:2379", "https://b:2379", "c:2379"]`, fmt.Sprintf(`  tls:
    ca_file: %s
    cert_file: %s
    key_file: %s
    server_name: etcd.example
  username: enginehealth
  password_file: %s
`, rel(f.ca.CertFile), f.client.CertFile, rel(f.client.KeyFile), f.password))
	cfg, err := f.parse(yaml, testEnv)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 0 {
		t.Fatalf("warnings: %v", cfg.Warnings)
	}
	ct := cfg.Etcd.ClientTLS
	if ct == nil || ct.MinVersion != tls.VersionTLS12 || ct.RootCAs == nil || ct.ServerName != "etcd.example" || ct.GetClientCertificate == nil {
		t.Fatalf("client TLS %+v", ct)
	}
	presented, err := ct.GetClientCertificate(nil)
	if err != nil || presented.Leaf.Subject.CommonName != "enginehealth" || cfg.Etcd.ClientCert.Load() != presented {
		t.Fatalf("client certificate %v, %v", presented, err)
	}
	if cas := cfg.Etcd.CAs.Certs(); len(cas) != 1 || cas[0].Subject.CommonName != "etcd-ca" {
		t.Fatalf("CA certificates %v, want the CA file's", cas)
	}
	eps, user, pw := cfg.Etcd.ClientEndpoints()
	if strings.Join(eps, ",") != "https://a:2379,https://b:2379,https://c:2379" || user != "enginehealth" || pw != etcdPassword {
		t.Fatalf("endpoints %v, user %q, password set %v", eps, user, pw == etcdPassword)
	}
	if shown := fmt.Sprint(cfg.Etcd.RedactedEndpoints()); strings.Contains(shown, etcdPassword) {
		t.Fatalf("endpoints shown with the password: %s", shown)
	}

	// The password from the environment; the CA alone: the server is
	// verified, no certificate presented.
	cfg, err = f.parse(etcdYAML(threeEndpoints, "  tls: {ca_file: "+rel(f.ca.CertFile)+"}\n  username: eh\n  password_env: ETCD_PW\n"),
		env("ENGINEHEALTH_DSN", "postgres://h/d", "ETCD_PW", " "+etcdPassword+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Etcd.ClientCert != nil || cfg.Etcd.ClientTLS.GetClientCertificate != nil || cfg.Etcd.Password != etcdPassword {
		t.Fatalf("CA alone: client certificate %v, password from the environment %v", cfg.Etcd.ClientCert, cfg.Etcd.Password == etcdPassword)
	}
	// An empty tls mapping: TLS with the system's roots.
	cfg, err = f.parse(etcdYAML(threeEndpoints, "  tls: {}\n"), testEnv)
	if err != nil || cfg.Etcd.ClientTLS == nil || cfg.Etcd.ClientTLS.RootCAs != nil {
		t.Fatalf("tls: {}: %v %+v", err, cfg.Etcd.ClientTLS)
	}
	// Without tls: plain, as before.
	cfg, err = f.parse(etcdYAML(threeEndpoints, ""), testEnv)
	if eps, _, _ := cfg.Etcd.ClientEndpoints(); err != nil || cfg.Etcd.ClientTLS != nil || eps[0] != "a:2379" {
		t.Fatalf("no tls: %v %v %v", err, cfg.Etcd.ClientTLS, eps)
	}
}

// TestEtcdCredentialWarnings: user:password@ in an endpoint still works,
// with a warning naming its key path and why (without the password); a
// password without TLS is warned about.
func TestEtcdCredentialWarnings(t *testing.T) {
	f := newEtcdFiles(t)
	cfg, err := f.parse(etcdYAML(`["a:2379", "http://root:`+etcdPassword+`@b:2379", "http://root:`+etcdPassword+`@c:2379"]`, ""), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	if eps, user, pw := cfg.Etcd.ClientEndpoints(); eps[1] != "http://b:2379" || user != "root" || pw != etcdPassword {
		t.Fatalf("credentials in endpoints no longer reach the client: %v %q", eps, user)
	}
	want := []struct{ path, msg string }{
		{"etcd.endpoints[1]", "user:password@ puts a secret in the configuration file: use etcd.username with etcd.password_file or etcd.password_env"},
		{"etcd.endpoints[1]", "the etcd password travels unencrypted: set etcd.tls"},
	}
	if len(cfg.Warnings) != len(want) {
		t.Fatalf("warnings %v", cfg.Warnings)
	}
	for i, w := range want {
		if got := cfg.Warnings[i]; got.Path != w.path || !strings.Contains(got.Msg, w.msg) || got.Line != 3 {
			t.Errorf("warning %d: %v, want %s: %s (line 3)", i, got, w.path, w.msg)
		}
	}
	if strings.Contains(fmt.Sprint(cfg.Warnings), etcdPassword) {
		t.Fatalf("a warning shows the password: %v", cfg.Warnings)
	}
	cfg, err = f.parse(etcdYAML(threeEndpoints, "  username: eh\n  password_file: "+f.password+"\n"), testEnv)
	if err != nil || len(cfg.Warnings) != 1 || cfg.Warnings[0].Path != "etcd.username" || !strings.Contains(cfg.Warnings[0].Msg, "travels unencrypted") {
		t.Fatalf("a user without TLS: %v %v", err, cfg.Warnings)
	}
	// https endpoints (the system's roots) encrypt without etcd.tls.
	cfg, err = f.parse(etcdYAML(`["https://a:2379", "https://b:2379", "https://c:2379"]`, "  username: eh\n  password_file: "+f.password+"\n"), testEnv)
	if err != nil || len(cfg.Warnings) != 0 {
		t.Fatalf("a user over https: %v %v", err, cfg.Warnings)
	}
	// Credentials in an https endpoint: a secret in the file, encrypted.
	cfg, err = f.parse(etcdYAML(`["https://a:2379", "HTTPS://root:`+etcdPassword+`@b:2379", "https://c:2379"]`, ""), testEnv)
	if err != nil || len(cfg.Warnings) != 1 || cfg.Warnings[0].Path != "etcd.endpoints[1]" || !strings.Contains(cfg.Warnings[0].Msg, "puts a secret") {
		t.Fatalf("credentials in an https endpoint: %v %v", err, cfg.Warnings)
	}
}

// TestEtcdTLSProblemsAllAtOnce: a bad CA file, a bad key and a missing
// password are all reported in one go.
func TestEtcdTLSProblemsAllAtOnce(t *testing.T) {
	f := newEtcdFiles(t)
	_, err := f.parse(etcdYAML(threeEndpoints, "  tls: {ca_file: "+f.notPEM+", cert_file: "+rel(f.client.CertFile)+", key_file: "+rel(f.other.KeyFile)+"}\n  username: eh\n"), testEnv)
	var cerr *Error
	if !errors.As(err, &cerr) || len(cerr.Problems) != 3 {
		t.Fatalf("want 3 problems, got %v", err)
	}
	problemAt(t, err, "etcd.tls.ca_file", "is not PEM", 4)
	problemAt(t, err, "etcd.tls.key_file", "does not match", 4)
	problemAt(t, err, "etcd.username", "needs its password", 5)
}

// TestAutoSyncInterval: absent, the default; 0 is a setting (off), not
// the default; a value outside [1s, 24h] is refused at its key, naming the
// value and the range.
func TestAutoSyncInterval(t *testing.T) {
	for _, c := range []struct {
		value string
		want  time.Duration
		err   string
	}{
		{"0", 0, ""},
		{"0s", 0, ""},
		{"1s", time.Second, ""},
		{"24h", 24 * time.Hour, ""},
		{"500ms", 0, "etcd.auto_sync_interval: must be 0 (off) or in [1s, 24h0m0s], got 500ms"},
		{"-1s", 0, "etcd.auto_sync_interval: must be 0 (off) or in [1s, 24h0m0s], got -1s"},
		{"25h", 0, "etcd.auto_sync_interval: must be 0 (off) or in [1s, 24h0m0s], got 25h0m0s"},
		{"soon", 0, `etcd.auto_sync_interval: "soon" is not a duration`},
	} {
		cfg, err := Parse([]byte(minimal+"  auto_sync_interval: "+c.value+"\n"), "sync.yaml", testEnv)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.value, err)
		case c.err == "" && *cfg.Etcd.AutoSyncInterval != c.want:
			t.Errorf("%s: loaded as %s", c.value, *cfg.Etcd.AutoSyncInterval)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want %q", c.value, err, c.err)
		}
	}
}

// TestEtcdEndpointSpellings: one member written twice in two spellings
// (with and without http://, a host in capitals, a port with a leading
// zero) is refused like a plain repeat, naming both entries; distinct
// members are not.
func TestEtcdEndpointSpellings(t *testing.T) {
	for _, c := range []struct{ endpoints, want string }{
		{`["127.0.0.1:2379", "http://127.0.0.1:02379"]`, `the same member as etcd.endpoints[0], "127.0.0.1:2379"`},
		{`["etcd1.example:2379", "ETCD1.example:2379"]`, "the same member as etcd.endpoints[0]"},
		{`["etcd1.example:2379", "etcd1.example:2379"]`, "the same as etcd.endpoints[0]"},
	} {
		_, err := Parse([]byte("database: {dsn_env: ENGINEHEALTH_DSN}\netcd: {endpoints: "+c.endpoints+"}\n"), "e.yaml", testEnv)
		if err == nil || !strings.Contains(err.Error(), "etcd.endpoints[1]") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want etcd.endpoints[1] refused: %q", c.endpoints, err, c.want)
		}
	}
	if _, err := Parse([]byte("database: {dsn_env: ENGINEHEALTH_DSN}\netcd: {endpoints: [\"etcd1.example:2379\", \"etcd1.example:2380\", \"etcd2.example:2379\"]}\n"), "e.yaml", testEnv); err != nil {
		t.Errorf("three distinct members: %v", err)
	}
}
