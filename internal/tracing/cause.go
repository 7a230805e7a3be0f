package tracing

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The cause of work done later for a request: a webhook event waits in the
// outbox, maybe for hours, and its attempts (internal/webhook), maybe on
// another server, start traces of their own linked to the request that
// queued it. The outbox keeps the request's W3C trace context as text
// (webhook_events.trace_context): its traceparent, then a space and its
// tracestate when it has one. A traceparent holds no space, so the first
// one parts them; the W3C propagator writes and reads each.

// Cause is the trace context, as the outbox keeps it, of the sampled
// request ctx belongs to: its server span, even when ctx is a store call's
// (whose span is the request's child, Child). "" when ctx has no sampled
// span, as when tracing is off: then it costs one lookup of ctx's values,
// and no allocation.
func Cause(ctx context.Context) string {
	span := trace.SpanFromContext(ctx)
	sc := span.SpanContext()
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	// The SDK's spans say their kind and parent (sdktrace.ReadOnlySpan).
	if s, ok := span.(interface {
		SpanKind() trace.SpanKind
		Parent() trace.SpanContext
	}); ok && s.SpanKind() != trace.SpanKindServer && s.Parent().IsValid() {
		sc = s.Parent()
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)
	if state := carrier["tracestate"]; state != "" {
		return carrier["traceparent"] + " " + state
	}
	return carrier["traceparent"]
}

// CauseOf reads what Cause wrote: an invalid span context when cause is
// "" or does not parse.
func CauseOf(cause string) trace.SpanContext {
	if cause == "" {
		return trace.SpanContext{}
	}
	carrier := propagation.MapCarrier{}
	carrier["traceparent"], carrier["tracestate"], _ = strings.Cut(cause, " ")
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
}

// followCause samples a trace's first span when it links to a sampled
// span, whatever its sampler says: a webhook attempt linked to the sampled
// request that queued its event is traced too, rather than one time in a
// hundred (a ratio sampler reads only the attempt's own trace id). Every
// other span is sampled as the sampler decides.
type followCause struct{ sdktrace.Sampler }

func (f followCause) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if !trace.SpanContextFromContext(p.ParentContext).IsValid() {
		for _, l := range p.Links {
			if l.SpanContext.IsSampled() {
				return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
			}
		}
	}
	return f.Sampler.ShouldSample(p)
}

func (f followCause) Description() string { return "FollowCause{" + f.Sampler.Description() + "}" }
