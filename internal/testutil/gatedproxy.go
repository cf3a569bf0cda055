package testutil

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// GatedProxy is a TCP proxy to a real service (an emulator) whose
// client-to-service bytes can be held at a gate: a dependency that turns
// slow on cue, so a test can keep a real binary's work in flight at a known
// point (e.g. a publish) for as long as it needs, without timing.
type GatedProxy struct {
	// Addr is the proxy's host:port, to give the binary instead of target's.
	Addr string

	mu      sync.Mutex
	gate    chan struct{} // non-nil while held; closed to release
	waiting int           // reads held at the gate
	conns   []net.Conn
}

// NewGatedProxy listens on loopback and forwards to target; it is closed
// (gate released, every connection closed) when the test ends.
func NewGatedProxy(t testing.TB, target string) *GatedProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &GatedProxy{Addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go p.pipe(s, c, true)
			go p.pipe(c, s, false)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		p.Release()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.Close()
		}
	})
	return p
}

// Hold stops forwarding what clients send, from their next read on.
func (p *GatedProxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate == nil {
		p.gate = make(chan struct{})
	}
}

// Release forwards again, what was held first.
func (p *GatedProxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
}

// Waiting reports how many client sends are held at the gate now.
func (p *GatedProxy) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting
}

// pipe copies src to dst; gated, each chunk waits at the gate first.
func (p *GatedProxy) pipe(dst, src net.Conn, gated bool) {
	defer func() { _ = dst.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if gated {
				p.wait()
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = src.Close()
			}
			return
		}
	}
}

func (p *GatedProxy) wait() {
	p.mu.Lock()
	g := p.gate
	if g != nil {
		p.waiting++
	}
	p.mu.Unlock()
	if g == nil {
		return
	}
	<-g
	p.mu.Lock()
	p.waiting--
	p.mu.Unlock()
}
