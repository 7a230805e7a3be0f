package webhook_test

import (
	"testing"

	"petstore/internal/testkit"
)

// The webhooks' suites wait on the receivers, servers and databases they start:
// four run at once (testkit.Main).
func TestMain(m *testing.M) { testkit.Main(m) }
