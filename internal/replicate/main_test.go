package replicate

import (
	"testing"

	"petstore/internal/testkit"
)

// Litestream's S3 client reads its credentials from the environment: the
// tests' S3 servers' are set here once, so that the test that replicates in
// this process may run beside the others. Four run at once (testkit.Main):
// they wait on the servers they start, one of them through half a minute
// of outage.
func TestMain(m *testing.M) {
	testkit.SetS3Env()
	testkit.Main(m)
}
