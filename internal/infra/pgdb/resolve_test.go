package pgdb_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
)

// fakeDNS answers every A query with addrs, in that order, and every
// other query with nothing: a resolver for names this machine's
// /etc/hosts does not hold (and may not be edited).
func fakeDNS(addrs ...netip.Addr) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe() // not a PacketConn: queries are framed as over TCP
		go serveDNS(server, addrs)
		return client, nil
	}}
}

func serveDNS(c net.Conn, addrs []netip.Addr) {
	defer c.Close()
	for {
		var n uint16
		if err := binary.Read(c, binary.BigEndian, &n); err != nil {
			return
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		var q dnsmessage.Message
		if err := q.Unpack(buf); err != nil || len(q.Questions) != 1 {
			return
		}
		a := dnsmessage.Message{Header: dnsmessage.Header{ID: q.ID, Response: true, Authoritative: true}, Questions: q.Questions}
		if qq := q.Questions[0]; qq.Type == dnsmessage.TypeA {
			for _, ip := range addrs {
				a.Answers = append(a.Answers, dnsmessage.Resource{
					Header: dnsmessage.ResourceHeader{Name: qq.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
					Body:   &dnsmessage.AResource{A: ip.As4()}})
			}
		}
		out, err := a.Pack()
		if err != nil {
			return
		}
		if len(out) > math.MaxUint16 {
			return // no TCP frame holds it
		}
		if err := binary.Write(c, binary.BigEndian, uint16(len(out))); err != nil { //nolint:gosec // G115: bounded just above
			return
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// deadAddress listens on ip:port with a backlog it fills at once: the
// kernel then drops every new SYN, so a connection attempt there gets no
// answer at all (a host down, or a firewall that drops), as opposed to
// one refused at once.
func deadAddress(t *testing.T, ip string, port int) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	sa := &syscall.SockaddrInet4{Port: port, Addr: netip.MustParseAddr(ip).As4()}
	if err := syscall.Bind(fd, sa); err != nil {
		t.Fatalf("bind %s:%d: %v", ip, port, err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	filler, err := net.DialTimeout("tcp", addr, time.Second) // takes the one place in the queue
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filler.Close() })
	if c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond); err == nil {
		c.Close()
		t.Skipf("%s still accepts connections with a full backlog: cannot make an address that does not answer here", addr)
	}
}

// TestHostWithSeveralAddresses: a DSN's host whose first address does not
// answer connects through the next within the connect timeout (the
// first gets its share of it); when none answers, the error names every
// address tried.
func TestHostWithSeveralAddresses(t *testing.T) {
	dsn := pg.NewDatabase(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if u.Hostname() != "127.0.0.1" {
		t.Skipf("the test server is at %s, not on 127.0.0.1", u.Hostname())
	}
	port, _ := strconv.Atoi(u.Port())
	deadAddress(t, "127.0.0.2", port)
	deadAddress(t, "127.0.0.3", port)
	named := func(host string) string {
		v := *u
		v.Host = net.JoinHostPort(host, u.Port())
		return v.String()
	}
	const connect = 4 * time.Second

	t.Run("first does not answer", func(t *testing.T) {
		defer pgdb.SetResolver(fakeDNS(netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.1")))()
		db, err := pgdb.Open(pgdb.Config{DSN: named("db.multi.test"), ConnectTimeout: connect})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		start := time.Now()
		if err := pgdb.Ping(context.Background(), db, 3*connect); err != nil {
			t.Fatalf("no connection through the second address: %v", err)
		}
		// The first address had its share (half of the connect timeout
		// here), then the second answered.
		if took := time.Since(start); took < connect/2-100*time.Millisecond || took > connect {
			t.Fatalf("connected in %s, want about %s (the first address's share) and under the connect timeout %s", took, connect/2, connect)
		}
	})

	t.Run("none answers", func(t *testing.T) {
		defer pgdb.SetResolver(fakeDNS(netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")))()
		db, err := pgdb.Open(pgdb.Config{DSN: named("db.multi.test"), ConnectTimeout: connect})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		start := time.Now()
		err = pgdb.Ping(context.Background(), db, 3*connect)
		took := time.Since(start)
		if err == nil {
			t.Fatal("connected to addresses that do not answer")
		}
		t.Logf("the error: %v", err)
		if took > connect+time.Second {
			t.Fatalf("gave up after %s, want the connect timeout %s", took, connect)
		}
		for _, w := range []string{"no address of db.multi.test:" + u.Port(), "127.0.0.2:" + u.Port() + ", 127.0.0.3:" + u.Port(), "connect timeout 4s"} {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("the error does not say %q: %v", w, err)
			}
		}
		if s := pgdb.Summary(err); s != "database unavailable" && s != "timed out" {
			t.Fatalf("Summary: %q", s)
		}
		var netErr net.Error
		if !errors.As(err, &netErr) {
			t.Fatalf("%v: not a net.Error", err)
		}
	})
}
