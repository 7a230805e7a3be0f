package testkit

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// OTLP is an OpenTelemetry collector for the tests: a real HTTP server
// that takes OTLP/HTTP exports (protobuf on POST /v1/traces), decodes them
// with the protocol's own types rather than the SDK under test, and keeps
// every span. Point a server at it with OTEL_EXPORTER_OTLP_ENDPOINT=Endpoint().
type OTLP struct {
	t      testing.TB
	server *httptest.Server

	mu      sync.Mutex
	spans   []Span
	headers []http.Header // of every export, in arrival order
	status  int           // the answer to every export; 0 is 200
}

// Span is one span the receiver got: ids in hex as traceparent writes
// them, every attribute's value as text.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          string // SPAN_KIND_SERVER, SPAN_KIND_INTERNAL, ...
	Start, End                    time.Time
	Attributes                    map[string]string
	Links                         []SpanLink
	Resource                      map[string]string // the exporting service's, service.name among them
	Status                        string            // STATUS_CODE_UNSET, STATUS_CODE_ERROR, ...
}

// SpanLink is a link of a span to another span, maybe of another trace.
type SpanLink struct{ TraceID, SpanID string }

func (s Span) Duration() time.Duration { return s.End.Sub(s.Start) }

// LinksTo says whether s has a link to the span other.
func (s Span) LinksTo(other Span) bool {
	for _, l := range s.Links {
		if l.TraceID == other.TraceID && l.SpanID == other.SpanID {
			return true
		}
	}
	return false
}

// StartOTLP starts a receiver that answers 200 to every export until told otherwise.
func StartOTLP(t testing.TB) *OTLP {
	o := &OTLP{t: t}
	o.server = httptest.NewServer(http.HandlerFunc(o.serve))
	t.Cleanup(o.server.Close)
	return o
}

// Endpoint is the value of OTEL_EXPORTER_OTLP_ENDPOINT that reaches the
// receiver (the exporter adds /v1/traces).
func (o *OTLP) Endpoint() string { return o.server.URL }

// AnswerWith makes every export from now on get status (503 for a
// collector that is overloaded); 0 or 200 accepts them again.
func (o *OTLP) AnswerWith(status int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.status = status
}

// Close takes the receiver down: its port refuses connections from now on.
func (o *OTLP) Close() { o.server.Close() }

func (o *OTLP) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a protobuf POST to /v1/traces", http.StatusNotFound)
		return
	}
	o.mu.Lock()
	status := o.status
	o.headers = append(o.headers, r.Header.Clone())
	o.mu.Unlock()
	if status != 0 && status != http.StatusOK {
		w.WriteHeader(status)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	var req collector.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(raw, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.keep(&req)
	answer, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(answer)
}

func (o *OTLP) keep(req *collector.ExportTraceServiceRequest) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		resource := attributeText(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				o.spans = append(o.spans, spanOf(s, resource))
			}
		}
	}
}

func spanOf(s *tracepb.Span, resource map[string]string) Span {
	span := Span{
		TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
		ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind().String(),
		Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
		Attributes: attributeText(s.GetAttributes()), Resource: resource, Status: s.GetStatus().GetCode().String(),
	}
	for _, l := range s.GetLinks() {
		span.Links = append(span.Links, SpanLink{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId())})
	}
	return span
}

func attributeText(kvs []*common.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = valueText(kv.GetValue())
	}
	return m
}

func valueText(v *common.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *common.AnyValue_StringValue:
		return x.StringValue
	case *common.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *common.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *common.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *common.AnyValue_BytesValue:
		return string(x.BytesValue)
	case *common.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, valueText(e))
		}
		return strings.Join(parts, ",")
	}
	return v.String()
}

// Spans are every span received so far.
func (o *OTLP) Spans() []Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Span(nil), o.spans...)
}

// Exports are the headers of every export that arrived, accepted or not.
func (o *OTLP) Exports() []http.Header {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]http.Header(nil), o.headers...)
}

// WaitFor waits until the spans received include one named each of names,
// and returns every span received.
func (o *OTLP) WaitFor(within time.Duration, names ...string) []Span {
	o.t.Helper()
	Eventually(o.t, within, fmt.Sprintf("spans named %q at the OTLP receiver", names), func() bool {
		got := map[string]bool{}
		for _, s := range o.Spans() {
			got[s.Name] = true
		}
		for _, n := range names {
			if !got[n] {
				return false
			}
		}
		return true
	})
	return o.Spans()
}

// Trace is the spans of one trace, in the order they arrived.
func Trace(spans []Span, traceID string) []Span {
	var out []Span
	for _, s := range spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// Named is the first span of spans named name, and whether there is one.
func Named(spans []Span, name string) (Span, bool) {
	for _, s := range spans {
		if s.Name == name {
			return s, true
		}
	}
	return Span{}, false
}
