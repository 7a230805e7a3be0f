package server

import (
	"testing"

	"petstore/internal/testkit"
)

// The server's suites wait on the databases, Redis and browsers they use:
// four run at once (testkit.Main). The browser tests share one Chromium,
// stopped once they have all run.
func TestMain(m *testing.M) { testkit.Main(m, stopChromium) }
