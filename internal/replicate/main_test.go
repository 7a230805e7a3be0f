package replicate

import (
	"testing"

	"petstore/internal/testkit"
)

// Litestream's S3 client reads its credentials from the environment: the
// tests' S3 servers' are set here once, so that the test that replicates in
// this process may run beside the others, four at once (testkit.Main):
// they wait on the server, the S3 server and the commands far more than
// they work.
func TestMain(m *testing.M) {
	testkit.SetS3Env()
	testkit.Main(m)
}
