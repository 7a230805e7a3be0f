package webhook

// The span of each attempt (docs/observing.md, "Traces"): a client span,
// the root of a trace of its own, linked to what queued the event.

import (
	"context"
	"net/url"

	"petstore/internal/domain"
	"petstore/internal/tracing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the attempts' spans.
const tracerName = "petstore/internal/webhook"

// startAttempt starts the span of an attempt to deliver c and returns ctx
// holding it, whose traceparent the attempt sends. The span links to the
// event's cause rather than descending from it: an attempt may come hours
// later, from another server, and a trace that spans hours of retries
// would be read as one slow request. It holds the endpoint's id and host,
// never its URL's path or query (which may carry a receiver's secrets),
// nor the body or a key. With tracing off (no tracer) it returns ctx as it
// is and no span, and calls nothing.
func (w *Worker) startAttempt(ctx context.Context, c domain.ClaimedDelivery) (context.Context, trace.Span) {
	if w.tracer == nil {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		attribute.Int64("petstore.webhook.endpoint_id", c.EndpointID),
		attribute.String("petstore.webhook.event_type", c.Type),
		attribute.String("petstore.webhook.event_id", c.EventID),
		attribute.Int("petstore.webhook.attempt", c.Attempts+1),
		attribute.String("http.request.method", "POST"),
	}
	if u, err := url.Parse(c.URL); err == nil {
		attrs = append(attrs, attribute.String("server.address", u.Hostname()))
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...)}
	if cause := tracing.CauseOf(c.Cause); cause.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: cause}))
	}
	return w.tracer.Start(ctx, "webhook deliver", opts...)
}

// endAttempt ends an attempt's span (nil: tracing is off) with what came
// of it: the answer's status, and why it failed in the words the
// delivery's record keeps (attemptError's, which hold no URL or secret).
func endAttempt(span trace.Span, r attemptResult) {
	if span == nil {
		return
	}
	if r.Status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", r.Status))
	}
	if !r.Delivered() {
		span.SetStatus(codes.Error, r.Err)
	}
	span.End()
}
