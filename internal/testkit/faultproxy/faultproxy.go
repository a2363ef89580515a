// Package faultproxy puts a TCP proxy between a test's client and a server
// (toxiproxy, in process) that can cut the path without closing it: what a
// partition or a frozen peer looks like to the client.
package faultproxy

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

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

// SetUpstream makes new connections go to addr and closes the existing
// ones (the proxy stops and listens again on Addr; its faults stay): what
// a VIP, a DNS name or a proxy moved to another server looks like to the
// client.
func (p *Proxy) SetUpstream(addr string) error {
	if err := p.p.Update(&toxiproxy.Proxy{Listen: p.Addr, Upstream: addr, Enabled: true}); err != nil {
		return fmt.Errorf("faultproxy: upstream %s: %w", addr, err)
	}
	return nil
}
