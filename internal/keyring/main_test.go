package keyring_test

import (
	"testing"

	"petstore/internal/testkit"
)

// The keyring's suites wait on the servers and databases they start:
// four run at once (testkit.Main).
func TestMain(m *testing.M) { testkit.Main(m) }
