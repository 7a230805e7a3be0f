package main

import (
	"path/filepath"
	"petstore/internal/testkit"
	"strings"
	"testing"
)

// The root's suites wait on the binary, servers and browsers they start:
// four run at once (testkit.Main).
func TestMain(m *testing.M) { testkit.Main(m) }

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
