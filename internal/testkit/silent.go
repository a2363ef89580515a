package testkit

import (
	"io"
	"net"
	"sync"
	"testing"
)

// SilentServer listens on a loopback port and returns its address: it
// accepts every connection and reads what is sent, but never answers (a
// frozen or overloaded server, a middlebox). Each connection lasts until
// the client closes it; the listener and every connection are gone when
// the test ends.
func SilentServer(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		held  sync.WaitGroup
	)
	held.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			held.Go(func() { _, _ = io.Copy(io.Discard, c); _ = c.Close() })
		}
	})
	tb.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		held.Wait()
	})
	return ln.Addr().String()
}
