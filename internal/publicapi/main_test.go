package publicapi_test

import (
	"testing"

	"petstore/internal/testkit"
)

// The /v1 API's suites wait on the databases and Redis they use: four run
// at once (testkit.Main).
func TestMain(m *testing.M) { testkit.Main(m) }
