package testkit

import (
	"testing"
	"time"
)

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
