package replicate

import (
	"testing"

	"petstore/internal/testkit"
)

// Litestream's S3 client reads its credentials from the environment: the
// tests' S3 servers' are set here once, so that the test that replicates in
// this process may run beside the others. All of them start at once
// (testkit.Main): the half-minute outage, which waits far more than it
// works, must not wait for a free place behind the others.
func TestMain(m *testing.M) {
	testkit.SetS3Env()
	testkit.Main(m)
}
