package testkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The petstore binary as a user runs it, for the end-to-end tests of any
// package: built once per test binary from the module's root, which is
// found from the package's own directory.

const buildDirPrefix = "petstore-cli-test-"

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
	b.once.Do(func() {
		removeOldBuilds()
		b.path, b.err = buildPetstore()
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// buildPetstore runs go build of the module's root into a directory named
// for this process.
func buildPetstore() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", buildDirPrefix, os.Getpid()))
	if err != nil {
		return "", err
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

// removeOldBuilds deletes the binaries of earlier test processes that
// have ended: without a TestMain, a process cannot remove its own. Each
// directory is named for the process that built it.
func removeOldBuilds() {
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), buildDirPrefix+"*"))
	for _, dir := range old {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), buildDirPrefix), "-")
		n, err := strconv.Atoi(pid)
		if err != nil {
			continue
		}
		if p, err := os.FindProcess(n); err == nil && errors.Is(p.Signal(syscall.Signal(0)), os.ErrProcessDone) {
			os.RemoveAll(dir)
		}
	}
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
