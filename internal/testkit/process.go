package testkit

import (
	"os"
	"os/exec"
	"testing"
)

// The other programs the end-to-end tests start beside petstore: a
// balancer and its Redis, installed on the machine, and Let's Encrypt's
// test CA, built from the Go module proxy.

// BalancerBinary is the path of a program the balanced tests need
// (haproxy, redis-server). It skips the test under -short, and when the
// program is missing, unless PETSTORE_TEST_BALANCER says the machine must
// have it (.ci/run does).
func BalancerBinary(t *testing.T, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts servers behind a balancer; skipped with -short")
	}
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("PETSTORE_TEST_BALANCER") != "" {
			t.Fatalf("PETSTORE_TEST_BALANCER is set and %s is missing: %v", name, err)
		}
		t.Skipf("%s is not installed: apt-get install haproxy redis-server, then set PETSTORE_TEST_BALANCER=1 (.ci/run does)", name)
	}
	return path
}

// Process is a helper program the test started.
type Process struct {
	Cmd  *exec.Cmd
	Out  *SyncBuffer   // its standard output and error
	done chan struct{} // closed once it has ended
}

// Kill ends it, if it still runs, and waits for that.
func (p *Process) Kill() {
	p.Cmd.Process.Kill()
	<-p.done
}

// StartProcess runs a helper program until the test ends; its output is
// logged if the test fails.
func StartProcess(t *testing.T, name, path string, args ...string) *Process {
	t.Helper()
	return StartProcessEnv(t, name, path, nil, args...)
}

// StartProcessEnv is StartProcess with env added to the test's
// environment.
func StartProcessEnv(t *testing.T, name, path string, env []string, args ...string) *Process {
	t.Helper()
	p := &Process{Cmd: exec.Command(path, args...), done: make(chan struct{}), Out: &SyncBuffer{}}
	if env != nil {
		p.Cmd.Env = append(os.Environ(), env...)
	}
	out := p.Out
	p.Cmd.Stdout, p.Cmd.Stderr = out, out
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.Cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out)
		}
	})
	return p
}

// Let's Encrypt's test CA, Pebble, with its DNS stand-in, built from the Go
// module proxy once per machine; a machine where they cannot be built fails
// the test, never skips it.

// PebbleModule is the Pebble built, the one docs/production.md's recipe
// installs.
const PebbleModule = "github.com/letsencrypt/pebble/v2@v2.10.1"

var pebbleBuild = proxyBuild{name: "Pebble", module: PebbleModule, cmds: []string{"pebble", "pebble-challtestsrv"}}

// PebbleBinaries is the directory of pebble and pebble-challtestsrv.
func PebbleBinaries(t testing.TB) string {
	t.Helper()
	return pebbleBuild.installed(t)
}
