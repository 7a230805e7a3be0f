package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"petstore/internal/testkit"
)

// The binary reads the OTEL_* variables of its environment: its spans
// reach the OTLP endpoint with the headers asked for, under the service's
// name, and those still queued when it stops are sent before it exits;
// the request's log line carries its trace id.
func TestServeSendsItsTracesWhereTheVariablesSay(t *testing.T) {
	t.Parallel()
	receiver := testkit.StartOTLP(t)
	dir := t.TempDir()
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.Endpoint(), "OTEL_TRACES_SAMPLER": "always_on",
		"OTEL_SERVICE_NAME": "petstore-binary", "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20otlp-secret",
		// Nothing is sent before the stop, so only the flush at the stop sends it.
		"OTEL_BSP_SCHEDULE_DELAY": "600000",
	}
	s := launchPetstoreBinary(t, testkit.PetstoreBinary(t), dir, env, "serve", "--db", filepath.Join(dir, "petstore.db")).Served()
	s.WantStatus("GET", "/v1/pets", s.Bootstrap, "", 200)
	if code := s.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d after SIGTERM:\n%s", code, s.Stderr)
	}
	spans := receiver.WaitFor(5*time.Second, "GET /v1/pets")
	server, _ := testkit.Named(spans, "GET /v1/pets")
	if server.Resource["service.name"] != "petstore-binary" {
		t.Errorf("service.name %q", server.Resource["service.name"])
	}
	for _, h := range receiver.Exports() {
		if h.Get("Authorization") != "Bearer otlp-secret" {
			t.Errorf("an export's Authorization is %q", h.Get("Authorization"))
		}
	}
	if log := s.Stderr.String(); !strings.Contains(log, "trace_id="+server.TraceID) || strings.Contains(log, "otlp-secret") {
		t.Errorf("the log has no trace_id %s, or holds the OTLP header's secret:\n%s", server.TraceID, log)
	}
}
