package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testParallel is how many of the tests marked parallel run at once unless
// -parallel says otherwise. They spend most of their time waiting on the
// servers, commands and browsers they start, not on a core: the default,
// one per core, left the two cores of CI half idle (docs/development.md,
// "Tests"). Under the race detector they do use the cores, and more at once
// gained little and squeezed the tests with deadlines: there the default
// stays.
const testParallel = "4"

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given && !raceDetector {
		flag.Set("test.parallel", testParallel)
	}
	os.Exit(m.Run())
}

func TestServeRefusesAnAddressWithoutAHostAsAUsageMistake(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, flag, addr, want string
	}{
		{"a bare port", "--addr", "8081", "give :8081"},
		{"not an address", "--addr", "localhost", "must be HOST:PORT"},
		{"a bare admin port", "--admin-addr", "9090", "give :9090"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := viaRun(t, nil, "serve", "--db", filepath.Join(t.TempDir(), "petstore.db"), tt.flag, tt.addr)
			wantFailure(t, res, 2)
			if !strings.Contains(res.stderr, tt.flag) || !strings.Contains(res.stderr, tt.want) {
				t.Errorf("standard error %q, want it to name %s and say %q", res.stderr, tt.flag, tt.want)
			}
		})
	}
}
