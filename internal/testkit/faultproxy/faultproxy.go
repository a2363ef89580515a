// Package faultproxy puts a TCP proxy between a test's client and a server
// (toxiproxy, in process) that can cut the path without closing it: what a
// partition or a frozen peer looks like to the client.
package faultproxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/rs/zerolog"
)

// Proxy forwards a loopback port to an upstream address.
type Proxy struct {
	// Addr is where clients connect, host:port.
	Addr string
	p    *toxiproxy.Proxy
	// sent counts the writes (chunks read) clients sent through the
	// proxy.
	sent atomic.Int64
}

// New starts a proxy to upstream, stopped when the test ends.
func New(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "proxy-"+strings.ReplaceAll(tb.Name(), "/", "_"), "127.0.0.1:0", upstream)
	fp := &Proxy{p: p}
	// The counter goes first in the upstream chain, before any
	// connection exists: it sees every byte a client sends.
	w, err := p.Toxics.AddToxicJson(strings.NewReader(`{"name": "count", "type": "` + counterType + `", "stream": "upstream"}`))
	if err != nil {
		tb.Fatalf("faultproxy: %v", err)
	}
	w.Toxic.(*counter).n = &fp.sent
	if err := p.Start(); err != nil {
		tb.Fatalf("faultproxy: %v", err)
	}
	tb.Cleanup(p.Stop)
	fp.Addr = p.Listen
	return fp
}

// Sent returns how many writes clients have sent through the proxy (the
// chunks it read; also while it is cut: they are counted, then dropped).
// A gRPC client sends about one per message.
func (p *Proxy) Sent() int64 { return p.sent.Load() }

const counterType = "faultproxy_count"

func init() { toxics.Register(counterType, new(counter)) }

// counter is a toxic that passes everything on and counts its chunks.
type counter struct{ n *atomic.Int64 }

func (c *counter) Pipe(stub *toxics.ToxicStub) {
	for {
		select {
		case <-stub.Interrupt:
			return
		case ch := <-stub.Input:
			if ch == nil {
				stub.Close()
				return
			}
			if c.n != nil {
				c.n.Add(1)
			}
			stub.Output <- ch
		}
	}
}

const blackhole = "blackhole"

// Blackhole stops every byte in both directions; connections stay open
// and new ones are accepted but answered by nothing. Data sent meanwhile is
// lost, so a connection usually breaks once the path is restored.
func (p *Proxy) Blackhole() error {
	for _, dir := range []string{"upstream", "downstream"} {
		js := fmt.Sprintf(`{"name": %q, "type": "timeout", "stream": %q, "attributes": {"timeout": 0}}`, blackhole+"_"+dir, dir)
		if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			return fmt.Errorf("faultproxy: blackhole %s: %w", dir, err)
		}
	}
	return nil
}

// Restore lets traffic through again.
func (p *Proxy) Restore() error {
	for _, dir := range []string{"upstream", "downstream"} {
		if err := p.p.Toxics.RemoveToxic(context.Background(), blackhole+"_"+dir); err != nil {
			return fmt.Errorf("faultproxy: restore %s: %w", dir, err)
		}
	}
	return nil
}

// Switch forwards a loopback port to a target that can be changed, as a
// virtual IP, a DNS name or a proxy (HAProxy, PgBouncer) moved by a
// failover manager: SetTarget closes the connections open now (their
// server is gone, or fenced off) and sends the next ones to the new
// target. Put a Proxy in front of it to cut the path too.
type Switch struct {
	// Addr is where clients connect, host:port.
	Addr string
	ln   net.Listener

	mu     sync.Mutex
	target string
	conns  map[net.Conn]struct{}
}

// NewSwitch starts a switch to target, stopped when the test ends.
func NewSwitch(tb testing.TB, target string) *Switch {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("faultproxy: switch: %v", err)
	}
	s := &Switch{Addr: ln.Addr().String(), ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.serve()
	}()
	tb.Cleanup(func() {
		_ = ln.Close()
		<-done
		s.closeAll()
	})
	return s
}

// SetTarget sends the next connections to addr and closes the open ones.
func (s *Switch) SetTarget(addr string) {
	s.mu.Lock()
	s.target = addr
	s.mu.Unlock()
	s.closeAll()
}

// Target returns the address connections go to.
func (s *Switch) Target() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.target
}

func (s *Switch) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.Close()
		delete(s.conns, c)
	}
}

func (s *Switch) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		go s.forward(c)
	}
}

// forward joins client c to the target of the moment; either side's end
// ends both.
func (s *Switch) forward(c net.Conn) {
	s.mu.Lock()
	target := s.target
	s.mu.Unlock()
	u, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	s.mu.Lock()
	if s.target != target {
		// Switched while dialling: this connection belongs to the old
		// target.
		s.mu.Unlock()
		_ = c.Close()
		_ = u.Close()
		return
	}
	s.conns[c], s.conns[u] = struct{}{}, struct{}{}
	s.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(u, c)
	go pipe(c, u)
	<-done
	s.mu.Lock()
	delete(s.conns, c)
	delete(s.conns, u)
	s.mu.Unlock()
	_ = c.Close()
	_ = u.Close()
	<-done
}
