package testkit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The petstore binary as a user runs it, for the end-to-end tests of any
// package: built from the module's root, which is found from the package's
// own directory, into a directory of the temporary directory named for
// that root. Every test binary of one checkout shares it: go build leaves
// a binary that is up to date as it is, so only the first of them links.

var petstoreBuild struct {
	once sync.Once
	path string
	err  error
}

// PetstoreBinary builds the binary the way a user does, on the first call,
// and returns its path. It skips the test under -short, and under -race:
// the binary is built without the race detector, so the race run would only
// repeat what the plain go test already proves.
func PetstoreBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the petstore binary; skipped with -short")
	}
	if RaceDetector {
		t.Skip("drives the petstore binary, which is built without the race detector; run by the plain go test ./...")
	}
	b := &petstoreBuild
	b.once.Do(func() { b.path, b.err = buildPetstore() })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// buildPetstore runs go build of the module's root into the checkout's
// directory, holding a lock on it: the test binaries of one go test ./...
// build at the same time, and none may run a binary another is writing.
func buildPetstore() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "petstore-cli-test-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close() // and with it the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", dir, err)
	}
	path := filepath.Join(dir, "petstore")
	cmd := exec.Command("go", "build", "-o", path, ".")
	cmd.Dir = root
	// The same settings as the test build, so the build cache is shared.
	// GIT_OPTIONAL_LOCKS=0: the version stamp's git status must not
	// write the index of a tree others are working in.
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return path, nil
}

// moduleRoot is the directory of the go.mod of the package under test: a
// test runs in its package's directory, at any depth below the root.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside a module")
	}
	return filepath.Dir(mod), nil
}

// Result is what one petstore command did.
type Result struct {
	Stdout, Stderr string
	Code           int // exit status
}

// RunPetstore runs the built binary once in dir with args, env as its only
// PETSTORE_* variables, and returns what it did.
func RunPetstore(t *testing.T, dir string, env map[string]string, args ...string) Result {
	t.Helper()
	bin := PetstoreBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = CommandEnv(env)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("petstore %s: %v", strings.Join(args, " "), err)
	}
	return Result{stdout.String(), stderr.String(), code}
}

// CommandEnv is this process's environment without its PETSTORE_*
// variables, plus env: a command sees only the settings its test gives.
func CommandEnv(env map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PETSTORE_") {
			out = append(out, kv)
		}
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// WantNoFile fails the test if path exists: a command that failed must
// not have created it.
func WantNoFile(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists (stat: %v); the command must not create it", path, err)
	}
}
