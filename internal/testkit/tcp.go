package testkit

import (
	"net"
	"testing"
)

// ServeTCP listens on addr ("127.0.0.1:0" for any free port) and serves
// each connection with handle, closing it when handle returns, until the
// test ends. It returns the address it listens on.
func ServeTCP(t testing.TB, addr string, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}
