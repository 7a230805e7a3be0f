package tracing

import (
	"context"
	"errors"
	"testing"
	"time"

	"petstore/internal/testkit"
)

// The exporter's posts are what an OTLP receiver decodes with the
// collector's own types: ids, parents, kinds, times, attributes of each
// type, links, failures and the resource.
func TestTheExporterSpeaksOTLPOverHTTP(t *testing.T) {
	receiver := testkit.StartOTLP(t)
	c, err := FromEnv(func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.Endpoint(), "OTEL_TRACES_SAMPLER": "always_on",
			"OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=pets", "OTEL_RESOURCE_ATTRIBUTES": "region=eu"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Start(c, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, server := tr.StartRequest(context.Background(), "POST", "", "")
	_, child := Child(ctx, "CreatePets")
	child.SetString("db.system", "sqlite")
	child.Failed(errors.New("database is locked"))
	child.End()
	var links Links
	links.Add(ctx)
	_, batch := Batch(context.Background(), "group commit", 3, &links)
	batch.End()
	server.EndRequest("POST", "POST /v1/pets", 503, 7)
	if err := tr.Shutdown(); err != nil {
		t.Fatal(err)
	}
	spans := receiver.WaitFor(5*time.Second, "POST /v1/pets", "CreatePets", "group commit")
	s, _ := testkit.Named(spans, "POST /v1/pets")
	db, _ := testkit.Named(spans, "CreatePets")
	commit, _ := testkit.Named(spans, "group commit")
	if s.Kind != "SPAN_KIND_SERVER" || s.Status != "STATUS_CODE_ERROR" || s.Attributes["http.response.status_code"] != "503" ||
		s.Attributes["petstore.key.id"] != "7" || s.Attributes["http.route"] != "/v1/pets" || s.Duration() <= 0 {
		t.Errorf("server span %+v", s)
	}
	if db.ParentSpanID != s.SpanID || db.TraceID != s.TraceID || db.Kind != "SPAN_KIND_INTERNAL" || db.Status != "STATUS_CODE_ERROR" || db.Attributes["db.system"] != "sqlite" {
		t.Errorf("child span %+v", db)
	}
	if commit.ParentSpanID != s.SpanID || !commit.LinksTo(s) || commit.Attributes["petstore.batch.size"] != "3" {
		t.Errorf("batch span %+v", commit)
	}
	if s.Resource["service.name"] != DefaultService || s.Resource["region"] != "eu" {
		t.Errorf("resource %v", s.Resource)
	}
	for _, h := range receiver.Exports() {
		if h.Get("X-Tenant") != "pets" {
			t.Errorf("an export without the header asked for: %v", h)
		}
	}
}
