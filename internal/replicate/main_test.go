package replicate

import (
	"os"
	"testing"

	"petstore/internal/testkit"
)

// Litestream's S3 client reads its credentials from the environment: the
// tests' S3 servers' are set here once, so that the test that replicates in
// this process may run beside the others. Two run at once, the default: four
// at once put a CPU's worth more beside the root's suites with deadlines.
func TestMain(m *testing.M) {
	testkit.SetS3Env()
	os.Exit(m.Run())
}
