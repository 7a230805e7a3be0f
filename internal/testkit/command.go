package testkit

import (
	"strings"
	"testing"
)

// WantFailure checks a failed petstore command: its exit status code is
// want, nothing is on standard output, and standard error is one line
// that starts "petstore: " and names the problem, never a panic.
func WantFailure(t testing.TB, stdout, stderr string, code, want int) {
	t.Helper()
	if code != want {
		t.Errorf("exit status %d, want %d; stderr:\n%s", code, want, stderr)
	}
	if stdout != "" {
		t.Errorf("standard output %q, want nothing", stdout)
	}
	msg := strings.TrimSuffix(stderr, "\n")
	if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "petstore: ") || len(msg) == len("petstore: ") {
		t.Errorf("standard error %q, want one line starting \"petstore: \" that names the problem", stderr)
	}
	if strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine ") {
		t.Errorf("standard error holds a panic: %s", stderr)
	}
}
