package testkit

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The servers of the tests' own: when no PETSTORE_TEST_REDIS or
// PETSTORE_TEST_POSTGRES names one, this test binary starts a private
// redis-server or PostgreSQL on first use, on a free loopback port, and a
// watcher stops it when the binary exits.

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

// freeLoopbackPort is a TCP port of 127.0.0.1 that was free a moment ago.
func freeLoopbackPort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), nil
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
