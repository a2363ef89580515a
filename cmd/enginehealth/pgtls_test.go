package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/testkit/leadertest"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
	"github.com/enginehealth/enginehealth/internal/testkit/testca"
)

// TestPostgresTLS: the daemon reaches a PostgreSQL that accepts only TLS
// with sslmode=verify-full (lib/pq reads sslmode, sslrootcert, sslcert and
// sslkey from the DSN), and a CA or host name that cannot verify the
// server stops the start at once with exit 2 and a message that names the
// DSN's host and the TLS reason, never the password, never a hang.
func TestPostgresTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := testca.New(dir, "pg-ca")
	if err != nil {
		t.Fatal(err)
	}
	// For the name localhost only: connecting to 127.0.0.1 is a host the
	// certificate is not for.
	srvCert, err := ca.Issue("pg-server", testca.Options{Server: true, Hosts: []string{"localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := testca.New(dir, "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "removed.pem"), ca.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := pgtest.NewTLS(t, pgtest.TLS{CertFile: srvCert.CertFile, KeyFile: srvCert.KeyFile})

	dsn := func(host, mode, root string) string {
		u, err := url.Parse(srv.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		u.Host = fmt.Sprintf("%s:%d", host, srv.Port)
		u.User = url.UserPassword("postgres", "hunter2")
		q := u.Query()
		q.Set("sslmode", mode)
		if root != "" {
			q.Set("sslrootcert", root)
		}
		q.Set("connect_timeout", "5")
		u.RawQuery = q.Encode()
		return u.String()
	}

	t.Run("verify-full", func(t *testing.T) {
		cfg := daemonConfig(t, "tls", dsn("localhost", "verify-full", ca.CertFile))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- runDaemon(ctx, cfg, leadertest.Quiet, nil) }()
		waitReadyMaster(t, cfg, done)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("runDaemon after cancel: %v", err)
		}
	})

	for _, tc := range []struct {
		name, dsn string
		want      []string
	}{
		{"unknown CA", dsn("localhost", "verify-full", other.CertFile), []string{"host localhost", "TLS", "unknown authority"}},
		{"unknown CA verify-ca", dsn("localhost", "verify-ca", other.CertFile), []string{"host localhost", "TLS", "unknown authority"}},
		{"wrong host", dsn("127.0.0.1", "verify-full", ca.CertFile), []string{"host 127.0.0.1", "TLS", "validate certificate for 127.0.0.1"}},
		{"plain refused", dsn("localhost", "disable", ""), []string{"host localhost", "no encryption"}},
		// config check reads it; removed after that, run still says why.
		{"root removed", dsn("localhost", "verify-full", filepath.Join(dir, "removed.pem")), []string{"sslrootcert", "removed.pem"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := daemonConfig(t, "tls", tc.dsn)
			if strings.Contains(tc.dsn, "removed.pem") {
				if err := os.Remove(filepath.Join(dir, "removed.pem")); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			err := runDaemon(ctx, cfg, leadertest.Quiet, nil)
			if err == nil || ctx.Err() != nil {
				t.Fatalf("runDaemon: %v after %s: want an error at once", err, time.Since(start))
			}
			if !errors.As(err, new(usageError)) {
				t.Errorf("error %q: want a usage error (exit 2)", err)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q: want it to name %q", msg, w)
				}
			}
			if strings.Contains(msg, "hunter2") {
				t.Errorf("error %q shows the password", msg)
			}
		})
	}
}
