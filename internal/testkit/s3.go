package testkit

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// An S3-compatible server of the tests' own: versitygw, with its posix
// backend on a temporary directory (a bucket is a directory of it). It is
// built from the Go module proxy once per machine, into the temporary
// directory; a machine where it cannot be built fails the test, never
// skips it.

const versitygwModule = "github.com/versity/versitygw@v1.8.0"

var versitygwBuild = proxyBuild{name: "versitygw", module: versitygwModule, cmds: []string{"versitygw"}, env: []string{"CGO_ENABLED=0"}}

// versitygwBinary is the path of the versitygw command, built on first use.
func versitygwBinary(t testing.TB) string {
	t.Helper()
	return filepath.Join(versitygwBuild.installed(t), "versitygw")
}

// The credentials of every tests' S3 server.
const s3AccessKey, s3SecretKey = "petstoretest", "petstoretestsecret"

// S3 is a running versitygw on a loopback port.
type S3 struct {
	Endpoint  string // http://127.0.0.1:PORT, for ?endpoint=
	AccessKey string
	SecretKey string
	Dir       string // the posix backend's directory: a bucket is a directory in it

	bin, addr string
	mu        sync.Mutex
	cmd       *exec.Cmd
	out       *bytes.Buffer
}

// StartS3 starts a versitygw of the test's own, stopped when it ends.
func StartS3(t testing.TB) *S3 {
	t.Helper()
	s := &S3{AccessKey: s3AccessKey, SecretKey: s3SecretKey, Dir: t.TempDir(), bin: versitygwBinary(t), addr: FreeAddr(t)}
	s.Endpoint = "http://" + s.addr
	t.Cleanup(s.Stop)
	s.Start(t)
	return s
}

// Start starts the server (again) on its address and directory, and
// returns once it takes connections.
func (s *S3) Start(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		t.Fatal("versitygw is already running")
	}
	s.out = new(bytes.Buffer)
	cmd := exec.Command(s.bin, "--access", s.AccessKey, "--secret", s.SecretKey, "--port", s.addr, "--quiet", "posix", s.Dir)
	cmd.Stdout, cmd.Stderr = s.out, s.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	s.cmd = cmd
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw did not take connections on %s within 20 s:\n%s", s.addr, s.out)
		}
	}
}

// Stop kills the server: the store is away until Start.
func (s *S3) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Bucket makes a bucket of the given name and returns it.
func (s *S3) Bucket(t testing.TB, name string) string {
	t.Helper()
	if err := os.Mkdir(filepath.Join(s.Dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	return name
}

// URL is the s3:// URL of path in bucket on this server.
func (s *S3) URL(bucket, path string) string {
	return "s3://" + bucket + "/" + path + "?endpoint=" + s.Endpoint
}

// Env is the environment a command needs to reach the server: its
// credentials, and AWS_CA_BUNDLE emptied: Litestream's S3 client brings
// its own HTTP transport, to which the AWS SDK cannot add that bundle's
// roots, so it refuses to start with one. A test that passes it to the
// commands it runs, rather than setting it in this process, may run in
// parallel with others.
func (s *S3) Env() map[string]string {
	return map[string]string{
		"AWS_ACCESS_KEY_ID":     s.AccessKey,
		"AWS_SECRET_ACCESS_KEY": s.SecretKey,
		"AWS_REGION":            "us-east-1",
		"AWS_CA_BUNDLE":         "",
	}
}

// SetS3Env puts the environment every tests' S3 server takes (Env: they
// share their credentials) in this process's, for a test binary whose tests
// reach the servers in process; its TestMain calls it, so that those tests
// may run in parallel, as a test that sets a variable may not.
func SetS3Env() {
	for k, v := range (&S3{AccessKey: s3AccessKey, SecretKey: s3SecretKey}).Env() {
		os.Setenv(k, v)
	}
}
