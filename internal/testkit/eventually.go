package testkit

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds, and fails the test when it does
// not within the time given; what names what the test waits for.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for this, in vain: %s", within, what)
		}
	}
}
