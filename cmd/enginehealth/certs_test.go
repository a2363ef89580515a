package main

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/infra/certexpiry"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/testca"
)

// TestWatchCertificates: with etcd.tls, the daemon watches the client
// certificate and the CA file by their key paths; without it, nothing.
// runDaemon warns of a certificate that expires soon at once, before it
// connects to anything (here a database that never answers).
func TestWatchCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, err := testca.New(dir, "etcd-ca")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	client, err := ca.Issue("sidecar", testca.Options{Client: true, NotAfter: now.Add(3 * 24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	load := func(etcdTLS string) *configs.Config {
		t.Helper()
		path := filepath.Join(dir, "enginehealth.yaml")
		if err := os.WriteFile(path, []byte(`node: {name: certs, shutdown_timeout: 5s}
database: {dsn_env: CERTS_DSN}
etcd: {endpoints: ["127.0.0.1:1"]`+etcdTLS+`}
api: {listen: "127.0.0.1:0"}
`), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := configs.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	// A database that never answers: the daemon retries until stopped.
	t.Setenv("CERTS_DSN", "postgres://u@127.0.0.1:1/db?connect_timeout=1")

	if es := watchCertificates(load(""), certexpiry.Options{}).Expiries(); len(es) != 0 {
		t.Fatalf("without etcd.tls: %+v", es)
	}
	cfg := load(", tls: {ca_file: " + ca.CertFile + ", cert_file: " + client.CertFile + ", key_file: " + client.KeyFile + "}")
	es := watchCertificates(cfg, certexpiry.Options{Now: func() time.Time { return now }}).Expiries()
	days := func(e certexpiry.Expiry) float64 { return math.Round(e.Left.Hours() / 24) }
	if len(es) != 2 || es[0].Which != "etcd.tls.cert_file" || es[0].CN != "sidecar" || days(es[0]) != 3 ||
		es[1].Which != "etcd.tls.ca_file" || es[1].CN != "etcd-ca" || days(es[1]) != 3650 {
		t.Fatalf("expiries %+v, want the client certificate (3 days) and the CA (10 years)", es)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out logBuffer
	log, level, err := newLogger("json", "info", &out)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- runDaemon(ctx, cfg, log, level) }()
	testkit.Eventually(t, 10*time.Second, "the warning of the client certificate", func() (bool, error) {
		return len(out.records("certificate expires soon")) > 0, nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("runDaemon: %v", err)
	}
	recs := out.records("certificate expires soon")
	if r := recs[0]; len(recs) != 1 || r["level"] != "WARN" || r["which"] != "etcd.tls.cert_file" || r["cn"] != "sidecar" ||
		r["days_left"] != 3.0 || r["component"] != "certificates" || r["not_after"] == nil {
		t.Fatalf("warnings %v", recs)
	}
	if len(out.records("connected to PostgreSQL")) != 0 {
		t.Fatal("the database answered")
	}
}
