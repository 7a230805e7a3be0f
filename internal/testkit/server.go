package testkit

import (
	"errors"
	mathrand "math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The servers of the tests' own: when no PETSTORE_TEST_REDIS or
// PETSTORE_TEST_POSTGRES names one, this test binary starts a private
// redis-server or PostgreSQL on first use, on a free loopback port, and a
// watcher stops it when the binary exits.

// withQuery is the URL raw with the query parameters of set, each
// replacing any of its name.
func withQuery(t testing.TB, raw string, set map[string]string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for name, value := range set {
		q.Set(name, value)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// privateServer is a server this test binary started, if any.
type privateServer struct {
	what string // what it is, as a failure to start it says
	once sync.Once
	url  string
	err  error
	// stop is the watcher's standard input: when this binary exits, by
	// any means, it closes, and the watcher stops the server and removes
	// its directory. Held here so that it is never collected and closed.
	stop *os.File
}

// started is the server's URL, started by start on first use; t fails
// when it could not be.
func (p *privateServer) started(t testing.TB, start func() (string, error)) string {
	t.Helper()
	p.once.Do(func() { p.url, p.err = start() })
	if p.err != nil {
		t.Fatalf("a private %s for the tests: %v", p.what, p.err)
	}
	return p.url
}

// watch runs script under sh, with args, as the server's watcher (as the
// user of as, when not nil): the script starts the server in the
// background, reads its standard input, which ends only when this binary
// exits, then stops the server and removes its directory.
func (p *privateServer) watch(script string, as *syscall.SysProcAttr, args ...string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	watcher := exec.Command("sh", append([]string{"-c", script, "sh"}, args...)...)
	watcher.Stdin = r
	watcher.SysProcAttr = as
	if err := watcher.Start(); err != nil {
		w.Close()
		return err
	}
	p.stop = w
	return nil
}

// freeLoopbackPort is a TCP port of 127.0.0.1 that was free a moment ago,
// for a program the test starts to listen on. It is picked at random below
// the kernel's ephemeral range, never in it: a port the kernel handed out
// for a listen on :0 is given again to the next outgoing connection of any
// test, which then holds it when the program tries to listen (bind:
// address already in use). Each port is handed out once in this binary.
func freeLoopbackPort() (string, error) {
	lo := ephemeralStart()
	for range 100 {
		port := belowEphemeral + mathrand.IntN(lo-belowEphemeral)
		if _, taken := handedOut.LoadOrStore(port, true); taken {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		ln.Close()
		return strconv.Itoa(port), nil
	}
	return "", errors.New("no free loopback port below the ephemeral range after 100 tries")
}

// belowEphemeral is the lowest port freeLoopbackPort picks: above the
// well-known and usual service ports.
const belowEphemeral = 10000

// handedOut are the ports freeLoopbackPort gave in this binary.
var handedOut sync.Map

// ephemeralStart is the first port of the kernel's ephemeral range
// (Linux's ip_local_port_range; 32768, its default, elsewhere).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= belowEphemeral+1000 {
		return 32768
	}
	return lo
}

// FreeAddr is a loopback address (HOST:PORT) where nothing listened a
// moment ago; t fails when there is none.
func FreeAddr(t testing.TB) string {
	t.Helper()
	port, err := freeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + port
}

// waitAnswering calls ping every 20 ms until it succeeds or within has
// passed, and returns its last error.
func waitAnswering(within time.Duration, ping func() error) error {
	var err error
	Until(within, 20*time.Millisecond, func() bool {
		err = ping()
		return err == nil
	})
	return err
}

// Eventually polls cond until it holds, and fails the test when it does
// not within the time given; what names what the test waits for.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(within, 10*time.Millisecond, cond) {
		t.Fatalf("waited %v for this, in vain: %s", within, what)
	}
}

// Until calls cond every interval until it holds or within has passed, and
// says whether it held: Eventually's loop, for a wait whose failure says
// more than Eventually's, or that must not fail a test (a goroutine's).
func Until(within, every time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(within); ; time.Sleep(every) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

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
