package tracing

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// A request's trace context, as the outbox keeps it, reads back as the
// request's span, tracestate and all, even when it was written from within
// a store call (a child of the request's span); an unsampled request, or
// none, keeps nothing.
func TestACauseIsTheRequestsSpan(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	state, err := trace.ParseTraceState("vendor=a b,other=1")
	if err != nil {
		t.Fatal(err)
	}
	parent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, TraceState: state}))
	ctx, request := tp.Tracer("test").Start(parent, "POST /admin/v1/keys", trace.WithSpanKind(trace.SpanKindServer))
	defer request.End()
	call, child := Child(ctx, "CreateKey")
	defer child.End()
	for name, ctx := range map[string]context.Context{"the request": ctx, "a store call": call} {
		cause := Cause(ctx)
		if got := CauseOf(cause); got.TraceID() != request.SpanContext().TraceID() || got.SpanID() != request.SpanContext().SpanID() ||
			!got.IsSampled() || got.TraceState().String() != "vendor=a b,other=1" {
			t.Errorf("from %s: %q reads as %v, want the request's span %v", name, cause, got, request.SpanContext())
		}
	}
	unsampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}}))
	if c := Cause(unsampled) + Cause(context.Background()); c != "" {
		t.Errorf("an unsampled request, or none, keeps %q", c)
	}
	if allocs := testing.AllocsPerRun(100, func() { Cause(context.Background()) }); allocs != 0 {
		t.Errorf("with tracing off, Cause allocates %v times", allocs)
	}
}

// A trace's first span linked to a sampled span (a webhook attempt linked
// to its sampled request) is sampled whatever the ratio; any other span as
// the ratio says, here never.
func TestAnAttemptLinkedToASampledRequestIsSampled(t *testing.T) {
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSampler(followCause{sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))})).Tracer("test")
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{3}})
	for _, c := range []struct {
		name   string
		parent trace.SpanContext
		links  []trace.Link
		want   bool
	}{
		{"a root linked to a sampled span", trace.SpanContext{}, []trace.Link{{SpanContext: unsampled}, {SpanContext: sampled}}, true},
		{"a root linked to an unsampled span", trace.SpanContext{}, []trace.Link{{SpanContext: unsampled}}, false},
		{"a root without links", trace.SpanContext{}, nil, false},
		{"the child of an unsampled span, linked to a sampled one", unsampled, []trace.Link{{SpanContext: sampled}}, false},
	} {
		_, span := tracer.Start(trace.ContextWithRemoteSpanContext(context.Background(), c.parent), "webhook deliver", trace.WithLinks(c.links...))
		if got := span.SpanContext().IsSampled(); got != c.want {
			t.Errorf("%s: sampled %v, want %v", c.name, got, c.want)
		}
		span.End()
	}
}
