package testkit

import (
	"flag"
	"os"
	"testing"
)

// testParallel is how many of the tests marked parallel run at once unless
// -parallel says otherwise. The suites that start servers spend most of
// their time waiting on the servers, commands and browsers they start, not
// on a core: the default, one per core, left the two cores of CI half
// idle, and four still left the root's binary waiting 49.5 s where eight
// take 40.6 s (docs/development.md, "Tests"). Eight at once need more than
// the 100 connections of a PostgreSQL as Debian installs it: on a shared
// server (PETSTORE_TEST_POSTGRES) four run at once, on the private cluster,
// which takes 300, eight. Under the race detector the tests do use the
// cores, and more at once gained little and squeezed the tests with
// deadlines: there the default stays.
func testParallel() string {
	if os.Getenv("PETSTORE_TEST_POSTGRES") != "" {
		return "4"
	}
	return "8"
}

// Main runs a test binary's tests with testParallel's tests at once,
// unless -parallel or the race detector says otherwise, then drops the
// schemas ServerPostgresURL kept and calls each of after; a package's
// TestMain calls it.
func Main(m *testing.M, after ...func()) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given && !RaceDetector {
		flag.Set("test.parallel", testParallel())
	}
	usedSchemas.mu.Lock()
	usedSchemas.keeping = true
	usedSchemas.mu.Unlock()
	code := m.Run()
	usedSchemas.dropShelved()
	for _, f := range after {
		f()
	}
	os.Exit(code)
}
