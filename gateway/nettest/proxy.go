// Package nettest holds network helpers for tests of outages: a TCP proxy
// in front of a server that can cut every connection it carries and stop
// listening, then listen again on the same address. Tests put it between
// a client under test (the gateway's LAN driver, its MQTT bridge) and a
// real server to take the network away and give it back at chosen moments.
//
// It also runs grpcurl (Grpcurl), a real gRPC client no one here wrote,
// for tests of the gateway's gRPC services through reflection alone.
package nettest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from its address to a target.
type Proxy struct {
	t      testing.TB
	target string

	mu    sync.Mutex
	ln    net.Listener
	addr  string
	conns []net.Conn
	wg    sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to target
// (host:port). It is cut when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{t: t, target: target}
	p.listen("127.0.0.1:0")
	t.Cleanup(p.Cut)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

func (p *Proxy) listen(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	})
}

// Cut stops listening and closes every connection: clients see their
// connections end and new ones refused.
func (p *Proxy) Cut() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// Restore listens again on the same address (after Cut).
func (p *Proxy) Restore() {
	p.mu.Lock()
	up := p.ln != nil
	p.mu.Unlock()
	if !up {
		p.listen(p.Addr())
	}
}
