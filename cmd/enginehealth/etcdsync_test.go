package main

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/testkit"
)

// newTestSync is an etcdSync of a client of the in-process member given
// the endpoints eps, logging into the returned buffer.
func newTestSync(t *testing.T, tls bool, eps ...string) (*etcdSync, *clientv3.Client, *testkit.Buffer) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	var buf testkit.Buffer
	s := &etcdSync{cli: cli, every: time.Second, timeout: 2 * time.Second, tls: tls, log: slog.New(slog.NewJSONHandler(&buf, nil)),
		unused: map[uint64]string{}, probe: func([]string) error { return nil }}
	return s, cli, &buf
}

// TestEtcdSync against a real member: its advertised http://host:port is
// the configured host:port (no change, nothing logged); a configured
// endpoint that is no member is dropped, logged once; a member whose
// client URL the client cannot dial (http:// with etcd.tls) is not used,
// said once, and the endpoints are never left empty; members' addresses
// that do not answer from this node leave the endpoints as they are, with
// one warning.
func TestEtcdSync(t *testing.T) {
	ctx := context.Background()
	count := func(buf *testkit.Buffer, msg string) int { return strings.Count(buf.String(), `"msg":"`+msg) }
	// changedTwice reports whether the first of two syncs, or else the
	// second, changed the client's endpoints.
	changedTwice := func(s *etcdSync) bool {
		if s.Sync(ctx) {
			return true
		}
		return s.Sync(ctx)
	}

	s, cli, buf := newTestSync(t, false, etcd.Endpoint)
	if changedTwice(s) || buf.String() != "" || !slices.Equal(cli.Endpoints(), []string{etcd.Endpoint}) {
		t.Fatalf("the configured member: endpoints %v, log %s", cli.Endpoints(), buf.String())
	}

	const gone = "127.0.0.1:1"
	s, cli, buf = newTestSync(t, false, etcd.Endpoint, gone)
	s.probe = func([]string) error { return errors.New("refused") }
	if changedTwice(s) || !slices.Equal(cli.Endpoints(), []string{etcd.Endpoint, gone}) {
		t.Fatalf("members that do not answer: endpoints %v", cli.Endpoints())
	}
	if n := count(buf, "the etcd members' client URLs do not answer from this node"); n != 1 {
		t.Fatalf("%d warnings that the members do not answer, want 1:\n%s", n, buf.String())
	}
	s.probe = func([]string) error { return nil }
	if !s.Sync(ctx) || s.Sync(ctx) || !slices.Equal(cli.Endpoints(), []string{"http://" + etcd.Endpoint}) {
		t.Fatalf("a configured endpoint that is no member: endpoints %v", cli.Endpoints())
	}
	if n := count(buf, endpointsChangedMsg); n != 1 || !strings.Contains(buf.String(), `"added":[],"removed":["`+gone+`"]`) {
		t.Fatalf("%d changes logged, want 1 removing %s:\n%s", n, gone, buf.String())
	}

	s, cli, buf = newTestSync(t, true, etcd.Endpoint)
	if changedTwice(s) || !slices.Equal(cli.Endpoints(), []string{etcd.Endpoint}) {
		t.Fatalf("a member the client cannot dial: endpoints %v", cli.Endpoints())
	}
	if n := count(buf, "etcd member not used: its client URL http://"+etcd.Endpoint+" is of a scheme this node does not dial (etcd.tls is set)"); n != 1 {
		t.Fatalf("%d lines saying the member is not used, want 1:\n%s", n, buf.String())
	}
}

// TestDialable: what a member may advertise for this node to dial.
func TestDialable(t *testing.T) {
	for _, c := range []struct {
		url  string
		tls  bool
		want string // in the error; "" dialable
	}{
		{"http://10.0.0.1:2379", false, ""},
		{"10.0.0.1:2379", false, ""},
		{"https://etcd-1.example:2379", true, ""},
		{"unixs://etcd.sock", true, ""},
		{"unix://etcd.sock", false, ""},
		{"https://10.0.0.1:2379", false, "https://10.0.0.1:2379 is of a scheme this node does not dial (etcd.tls is not set)"},
		{"http://10.0.0.1:2379", true, "is of a scheme this node does not dial (etcd.tls is set)"},
		{"unix://etcd.sock", true, "is of a scheme this node does not dial (etcd.tls is set)"},
		{"grpc://10.0.0.1:2379", false, "grpc://10.0.0.1:2379 is of a scheme this node does not dial"},
		{"http://0.0.0.0:2379", false, "http://0.0.0.0:2379 is no address a client can dial"},
		{"http://[::]:2379", false, "is no address a client can dial"},
		{"http://127.0.0.1:0", false, "is no address a client can dial"},
		{"http://10.0.0.1", false, "is no address a client can dial"},
	} {
		err := (&etcdSync{tls: c.tls}).dialable(c.url)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s (tls %v): %v, want %q", c.url, c.tls, err, c.want)
		}
	}
}

// TestEndpointsNow: the endpoints the etcd check probes and names are
// written as configured (https:// with etcd.tls), whatever form the
// client holds them in.
func TestEndpointsNow(t *testing.T) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: dialledByUs([]string{"https://" + etcd.Endpoint, "unixs://etcd.sock"}), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var e configs.Etcd
	if eps := endpointsNow(cli, e); !slices.Equal(eps, []string{etcd.Endpoint, "unix://etcd.sock"}) {
		t.Fatalf("without TLS: %v", eps)
	}
	e.TLS = &configs.TLS{}
	if eps := endpointsNow(cli, e); !slices.Equal(eps, []string{"https://" + etcd.Endpoint, "unixs://etcd.sock"}) {
		t.Fatalf("with TLS: %v", eps)
	}
}
