package testkit

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A petstore server the test started from a built binary.

var (
	// AnyKey finds anything that looks like an API key or an admin token
	// in output.
	AnyKey = regexp.MustCompile(`ps[ka]_(?:live|test)_[0-9A-Za-z]+`)
	// serving is the log line that tells where the server listens.
	serving = regexp.MustCompile(`msg=serving addr=(https?://127\.0\.0\.1:[0-9]+)`)
	// AdminServing finds the admin listener's address on the serving line.
	AdminServing = regexp.MustCompile(`msg=serving .*admin=http://(127\.0\.0\.1:[0-9]+)`)
)

// Petstore is a petstore server the test started; it is killed when the
// test ends, and its output is checked for keys then.
type Petstore struct {
	t         *testing.T
	Cmd       *exec.Cmd
	Stdout    *SyncBuffer
	Stderr    *SyncBuffer
	URL       string // http://127.0.0.1:PORT
	Client    *http.Client
	Exited    chan struct{} // closed once the process has ended
	ExitCode  int           // set before Exited is closed; -1 for a signal
	Bootstrap string        // the key this start printed, if any
	KeysSent  []string      // keys sent to it, none of which it may print
}

// LaunchPetstore starts bin (PetstoreBinary, or another build of petstore:
// an older version) in dir with args, and --addr 127.0.0.1:0 unless args
// give one, with env as its only PETSTORE_* variables and the ones it
// changes; it returns at once (Served waits for it to serve).
func LaunchPetstore(t *testing.T, bin, dir string, env map[string]string, args ...string) *Petstore {
	t.Helper()
	if !slices.Contains(args, "--addr") {
		args = append(args, "--addr", "127.0.0.1:0")
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = CommandEnv(env)
	s := &Petstore{
		t: t, Cmd: cmd, Stdout: &SyncBuffer{}, Stderr: &SyncBuffer{},
		Client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}},
		Exited: make(chan struct{}),
	}
	cmd.Stdout, cmd.Stderr = s.Stdout, s.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			s.ExitCode = exit.ExitCode()
		} else if err != nil {
			s.ExitCode = -1
		}
		close(s.Exited)
	}()
	t.Cleanup(s.cleanup)
	return s
}

// Served waits for s's serving line, then for /healthz over plain HTTP
// (over https, the caller's client knows the root to trust).
func (s *Petstore) Served() *Petstore {
	t := s.t
	t.Helper()
	s.URL = WaitServing(t, s.Stderr, s.Exited)
	if strings.HasPrefix(s.URL, "http://") {
		WaitHealthy(t, s.Client, s.URL)
	}
	s.Bootstrap = BootstrapKeyIn(t, s.Stderr.String())
	return s
}

// BootstrapFile finds the file the first start wrote its key to, in its
// log line (text or JSON).
var BootstrapFile = regexp.MustCompile(`"?bootstrap_key_file"?[=:]"?([^"\s]+)`)

// BootstrapKeyIn is the key in the file that stderr's log names, or "" when
// the server wrote none.
func BootstrapKeyIn(t *testing.T, stderr string) string {
	t.Helper()
	m := BootstrapFile.FindStringSubmatch(stderr)
	if m == nil {
		return ""
	}
	b, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatalf("the bootstrap key's file: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// WaitServing returns the URL of the "serving" log line, http://HOST:PORT
// or https://HOST:PORT.
func WaitServing(t *testing.T, stderr *SyncBuffer, exited <-chan struct{}) string {
	t.Helper()
	var addr string
	Eventually(t, 10*time.Second, "a msg=serving line on standard error", func() bool {
		select {
		case <-exited:
			t.Fatalf("petstore ended before serving:\n%s", stderr)
		default:
		}
		m := serving.FindStringSubmatch(stderr.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	return addr
}

// WaitHealthy waits for GET /healthz at url to answer 200.
func WaitHealthy(t *testing.T, client *http.Client, url string) {
	t.Helper()
	Eventually(t, 5*time.Second, "GET /healthz answers 200", func() bool {
		resp, err := client.Get(url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func (s *Petstore) cleanup() {
	select {
	case <-s.Exited:
	default:
		s.Cmd.Process.Kill()
		<-s.Exited
	}
	s.Client.CloseIdleConnections()
	s.checkNoKeyPrinted()
	if s.t.Failed() {
		s.t.Logf("petstore's standard error:\n%s", s.Stderr)
	}
}

// checkNoKeyPrinted: log lines never hold a key; the only key the server
// may print is its bootstrap key, in the banner on standard error.
func (s *Petstore) checkNoKeyPrinted() {
	stderr := s.Stderr.String()
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "time=") && AnyKey.MatchString(line) {
			s.t.Errorf("a log line holds an API key: %s", line)
		}
	}
	if out := s.Stdout.String(); AnyKey.MatchString(out) {
		s.t.Errorf("the server printed a key on standard output:\n%s", out)
	}
	for _, key := range s.KeysSent {
		if key == s.Bootstrap {
			continue
		}
		sum := sha256.Sum256([]byte(key))
		if strings.Contains(stderr, key) || strings.Contains(strings.ToLower(stderr), hex.EncodeToString(sum[:])) {
			s.t.Errorf("standard error holds key %s or its hash:\n%s", key, stderr)
		}
	}
}

// Request sends one request; key "" sends no Authorization.
func (s *Petstore) Request(method, path, key, body string) (*http.Response, string) {
	s.t.Helper()
	if key != "" && !slices.Contains(s.KeysSent, key) {
		s.KeysSent = append(s.KeysSent, key)
	}
	return Fetch(s.t, s.Client, method, s.URL+path, key, body)
}

// WantStatus sends a request and fails the test unless it gets status.
func (s *Petstore) WantStatus(method, path, key, body string, status int) (*http.Response, string) {
	s.t.Helper()
	resp, got := s.Request(method, path, key, body)
	if resp.StatusCode != status {
		s.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, resp.StatusCode, status, got)
	}
	return resp, got
}

// Stop sends sig and returns the exit status.
func (s *Petstore) Stop(sig os.Signal) int {
	s.t.Helper()
	if err := s.Cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v: %v", sig, err)
	}
	return s.Wait()
}

// Wait returns the exit status once the process ends, failing the test
// after 15 s.
func (s *Petstore) Wait() int {
	s.t.Helper()
	select {
	case <-s.Exited:
		return s.ExitCode
	case <-time.After(15 * time.Second):
		s.t.Fatalf("petstore still running 15 s later:\n%s", s.Stderr)
		return 0
	}
}

// Kill9 ends the process the hard way: no shutdown, no flush.
func (s *Petstore) Kill9() {
	s.t.Helper()
	if err := s.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
	<-s.Exited
}
