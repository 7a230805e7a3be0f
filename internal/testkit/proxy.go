package testkit

// FaultProxy breaks the network between the servers and PostgreSQL or Redis
// for the outage tests, as a partition or a stalled primary does.

import (
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// FaultProxy stands between the servers and PostgreSQL or Redis, as the
// network does, so that a test can break it: "pass" forwards both ways;
// "stall" forwards nothing on any connection, old or new, and holds what
// it was sent, which is delivered once it passes again (a stalled primary,
// a partition that heals); "drop" cuts every connection and each new one
// at once (a server gone, or restarting).
type FaultProxy struct {
	ln       net.Listener
	target   string
	Accepted atomic.Int64 // connections taken

	mu     sync.Mutex
	mode   string
	resume chan struct{} // closed when a stall ends
	conns  map[net.Conn]bool
}

// StartFaultProxy forwards a new local address to target (HOST:PORT).
func StartFaultProxy(t testing.TB, target string) *FaultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{ln: ln, target: target, mode: "pass", conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.Set("drop")
	})
	return p
}

// Via is rawURL (postgres:// or redis://) with its host this proxy.
func (p *FaultProxy) Via(t testing.TB, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

// FaultProxyTo starts a proxy to the host of rawURL, and returns rawURL
// through it.
func FaultProxyTo(t testing.TB, rawURL string) (*FaultProxy, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p := StartFaultProxy(t, u.Host)
	return p, p.Via(t, rawURL)
}

func (p *FaultProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.Accepted.Add(1)
		go p.forward(c)
	}
}

// forward pumps c to the target and back until either side closes or the
// proxy drops them.
func (p *FaultProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.mode == "drop" {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { p.pump(up, c) })
	wg.Go(func() { p.pump(c, up) })
	wg.Wait()
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// pump copies from src to dst, each chunk once the proxy passes, and
// closes dst's writing side when src ends.
func (p *FaultProxy) pump(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.passes() {
				dst.Close()
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			if tcp, ok := dst.(*net.TCPConn); ok {
				tcp.CloseWrite()
			}
			return
		}
	}
}

// passes waits while the proxy stalls; false when it drops.
func (p *FaultProxy) passes() bool {
	for {
		p.mu.Lock()
		mode, resume := p.mode, p.resume
		p.mu.Unlock()
		switch mode {
		case "pass":
			return true
		case "drop":
			return false
		}
		<-resume
	}
}

// Set switches the mode: "pass", "stall" or "drop".
func (p *FaultProxy) Set(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == "stall" && mode != "stall" {
		close(p.resume)
	}
	if mode == "stall" && p.mode != "stall" {
		p.resume = make(chan struct{})
	}
	p.mode = mode
	if mode == "drop" {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}
