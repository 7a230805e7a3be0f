package testkit_test

import (
	"testing"
	"time"

	"petstore/internal/testkit"
)

// Until says whether cond came to hold: at its third call here, or never
// within the time given.
func TestUntilSaysWhetherTheConditionHeld(t *testing.T) {
	calls := 0
	if !testkit.Until(time.Minute, time.Millisecond, func() bool { calls++; return calls == 3 }) || calls != 3 {
		t.Errorf("a condition that holds at the third call: %d calls, want Until true after 3", calls)
	}
	calls = 0
	if testkit.Until(20*time.Millisecond, time.Millisecond, func() bool { calls++; return false }) || calls < 2 {
		t.Errorf("a condition that never holds: Until true, or %d calls, want false after more than one", calls)
	}
}
