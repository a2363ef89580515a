package main

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/testkit"
)

// TestExplainSilentMember: a member that accepts connections and never
// answers (frozen, overloaded) is named as such, once: over TLS, the
// handshake it does not finish; without TLS, a read it does not answer
// while every member accepts connections. Never "context deadline
// exceeded (context deadline exceeded)" alone (outside review).
func TestExplainSilentMember(t *testing.T) {
	addr := testkit.SilentServer(t)
	for _, c := range []struct {
		name     string
		tls      *tls.Config
		endpoint string
		want     string
	}{
		{"TLS", &tls.Config{MinVersion: tls.VersionTLS12}, "https://" + addr, "it accepted the connection but did not finish the TLS handshake within 500ms (the member is frozen or overloaded)"},
		{"plain", nil, addr, "etcd did not answer within 500ms, though every member accepts connections: a member frozen or overloaded, or the cluster without quorum"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := &configs.Config{}
			cfg.Etcd.ClientTLS = c.tls
			cfg.Etcd.DialTimeout = 500 * time.Millisecond
			err := explainEtcd(context.Background(), cfg, []string{c.endpoint}, "", context.DeadlineExceeded)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Count(err.Error(), "context deadline exceeded") > 1 {
				t.Fatalf("%v, want %q, once", err, c.want)
			}
		})
	}
}

// TestExplainEveryEndpoint: when several endpoints fail, each is named
// with its cause (a node whose seeds were all replaced named only the
// first: outside review).
func TestExplainEveryEndpoint(t *testing.T) {
	var gone []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gone = append(gone, ln.Addr().String())
		ln.Close()
	}
	cfg := &configs.Config{}
	cfg.Etcd.DialTimeout = 500 * time.Millisecond
	err := explainEtcd(context.Background(), cfg, gone, "", context.DeadlineExceeded)
	if err == nil || !strings.Contains(err.Error(), "3 of 3 etcd endpoints fail") {
		t.Fatalf("%v, want the three named", err)
	}
	for _, g := range gone {
		if !strings.Contains(err.Error(), g) {
			t.Errorf("%v does not name %s", err, g)
		}
	}
	if strings.Count(err.Error(), "connection refused") != 3 {
		t.Errorf("%v: want each cause", err)
	}
}
