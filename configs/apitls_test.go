package configs

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/testkit/testca"
)

// TestAPITLS: api.tls loads into a server configuration (TLS 1.2 at
// least, client certificates required with a client CA) and the client
// side between nodes; every bad file or mode is refused at its key path,
// naming the file, never its content.
func TestAPITLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := testca.New(dir, "api-ca")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	both := ca.MustIssue(t, "node", testca.Options{})
	server := ca.MustIssue(t, "server-only", testca.Options{Server: true})
	client := ca.MustIssue(t, "client-only", testca.Options{Client: true})
	expired := ca.MustIssue(t, "expired", testca.Options{NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Hour)})
	notPEM := filepath.Join(dir, "not-pem")
	if err := os.WriteFile(notPEM, []byte("SECRET-CONTENT\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := func(tlsYAML string, more ...string) []byte {
		return []byte("database: {dsn_env: ENGINEHEALTH_DSN}\netcd: {endpoints: [\"h:2379\"]}\napi:\n  tls: " + tlsYAML + "\n" + strings.Join(more, ""))
	}
	files := func(is *testca.Issued, extra string) string {
		return "{cert_file: " + is.CertFile + ", key_file: " + is.KeyFile + extra + "}"
	}

	cfg, err := Parse(doc(files(both, ", client_ca_file: "+ca.CertFile), "  advertise: https://node1.example:8642\n"), "c.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	srv := cfg.API.ServerTLS
	if srv == nil || srv.MinVersion != tls.VersionTLS12 || cfg.API.TLS.ClientAuth != ClientAuthRequire || cfg.API.ClientCAs == nil || cfg.API.PeerCAs != cfg.API.ClientCAs || cfg.API.PeerTLS == nil {
		t.Fatalf("api.tls with a client CA: %+v", cfg.API)
	}
	if per, err := srv.GetConfigForClient(nil); err != nil || per.ClientAuth != tls.RequireAndVerifyClientCert || per.ClientCAs == nil {
		t.Fatalf("per-connection config: %+v %v", per, err)
	}
	if got := cfg.API.AdvertiseURL("127.0.0.1:1"); got != "https://node1.example:8642" {
		t.Fatalf("advertise %q", got)
	}
	// The certificate is for localhost and 127.0.0.1, not node1.example:
	// a warning (the other nodes would refuse it).
	if w := strings.Join(problemTexts(cfg.Warnings), "\n"); !strings.Contains(w, `is not for "node1.example"`) {
		t.Fatalf("no warning about a certificate not for the advertised host: %q", w)
	}
	cfg, err = Parse(doc(files(server, "")), "c.yaml", testEnv)
	if err != nil || cfg.API.TLS.ClientAuth != ClientAuthNone || cfg.API.AdvertiseURL("127.0.0.1:8642") != "https://127.0.0.1:8642" {
		t.Fatalf("server-only api.tls: %v %+v", err, cfg)
	}

	for _, c := range []struct{ name, tls, more, key, want string }{
		{"no certificate", "{client_ca_file: " + ca.CertFile + "}", "", "api.tls.cert_file", "required"},
		{"no key", "{cert_file: " + both.CertFile + "}", "", "api.tls.key_file", "required with api.tls.cert_file"},
		{"key of another certificate", "{cert_file: " + both.CertFile + ", key_file: " + server.KeyFile + "}", "", "api.tls.key_file", "does not match"},
		{"client certificate as the server's", files(client, ""), "", "api.tls.cert_file", "not for server authentication"},
		{"server-only certificate under require", files(server, ", client_ca_file: "+ca.CertFile), "", "api.tls.cert_file", "not for client authentication"},
		{"expired", files(expired, ""), "", "api.tls.cert_file", "expired"},
		{"client CA not PEM", files(both, ", client_ca_file: "+notPEM), "", "api.tls.client_ca_file", "not PEM"},
		{"peer CA missing", files(both, ", ca_file: "+filepath.Join(dir, "absent.pem")), "", "api.tls.ca_file", "absent.pem"},
		{"unknown mode", files(both, ", client_ca_file: "+ca.CertFile+", client_auth: always"), "", "api.tls.client_auth", "want none, request or require"},
		{"require without a client CA", files(both, ", client_auth: require"), "", "api.tls.client_auth", "needs api.tls.client_ca_file"},
		{"http advertise", files(both, ""), "  advertise: http://node1.example:8642\n", "api.advertise", "write https://"},
		{"credential without systemd", "{cert_file: \"credential:api-cert\", key_file: \"credential:api-key\"}", "", "api.tls.cert_file", "CREDENTIALS_DIRECTORY is not set"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(doc(c.tls, c.more), "c.yaml", testEnv)
			if err == nil {
				t.Fatalf("accepted")
			}
			problemAt(t, err, c.key, c.want, 0)
			if strings.Contains(err.Error(), "SECRET-CONTENT") || strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Fatalf("a file's content is shown: %v", err)
			}
		})
	}
}
