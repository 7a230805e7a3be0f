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
			if !strings.Contains(res.Stderr, tt.flag) || !strings.Contains(res.Stderr, tt.want) {
				t.Errorf("standard error %q, want it to name %s and say %q", res.Stderr, tt.flag, tt.want)
			}
		})
	}
}

// A bad OTEL_* value is a usage mistake naming the variable, never a
// silent default (docs/observing.md, "Traces"): the SDK would fall back.
func TestServeRefusesABadTracingVariable(t *testing.T) {
	t.Parallel()
	tests := []struct{ variable, value string }{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector:4318"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "not a url"},
		{"OTEL_TRACES_SAMPLER_ARG", "2"},
		{"OTEL_TRACES_SAMPLER_ARG", "half"},
		{"OTEL_TRACES_SAMPLER", "sometimes"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "authorization"},
		{"OTEL_RESOURCE_ATTRIBUTES", "deployment=%zz"},
		{"OTEL_BSP_SCHEDULE_DELAY", "soon"},
	}
	for _, tt := range tests {
		t.Run(tt.variable+"="+tt.value, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", tt.variable: tt.value}
			res := viaRun(t, env, "serve", "--db", filepath.Join(t.TempDir(), "petstore.db"), "--addr", "127.0.0.1:0")
			wantFailure(t, res, 2)
			if !strings.Contains(res.Stderr, tt.variable) {
				t.Errorf("standard error %q does not name %s", res.Stderr, tt.variable)
			}
		})
	}
}
