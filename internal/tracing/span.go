package tracing

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Span is a span of a sampled request, or of work done for one; the zero
// Span is none, and its methods do nothing.
type Span struct{ s trace.Span }

// On says whether s is a span: the request is sampled.
func (s Span) On() bool { return s.s != nil }

func (s Span) End() {
	if s.s != nil {
		s.s.End()
	}
}

// SetString and SetInt add an attribute; call them only when On, so that
// an unsampled request builds none.
func (s Span) SetString(k, v string)    { s.s.SetAttributes(attribute.String(k, v)) }
func (s Span) SetInt(k string, v int64) { s.s.SetAttributes(attribute.Int64(k, v)) }

// Failed marks s as failed with err's text (an error of ours, never a
// value the caller sent).
func (s Span) Failed(err error) {
	if s.s != nil && err != nil {
		s.s.SetStatus(codes.Error, err.Error())
	}
}

// IDs are s's trace and span ids in hex, for the request's log line and
// the latency histogram's exemplar.
func (s Span) IDs() (traceID, spanID string) {
	sc := s.s.SpanContext()
	return sc.TraceID().String(), sc.SpanID().String()
}

// StartRequest starts the server span of a request, named by its method
// until EndRequest knows its route. Its parent is the caller's
// traceparent only when the tracer trusts it (--trust-traceparent), so
// that a public client cannot force sampling. An unsampled request gets
// ctx back and no span.
func (t *Tracer) StartRequest(ctx context.Context, method, traceparent, tracestate string) (context.Context, Span) {
	// net/http's context of a request holds no span, so it is not searched
	// for one: a parent comes only from a trusted traceparent.
	var parent context.Context
	if t.trustParent && traceparent != "" {
		parent = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent, "tracestate": tracestate})
		if !trace.SpanContextFromContext(parent).IsValid() {
			parent = nil
		}
	}
	if parent == nil {
		var sampled bool
		if parent, sampled = t.roots.start(ctx); !sampled {
			return ctx, Span{}
		}
	}
	method = knownMethod(method)
	sctx, s := t.tracer.Start(parent, method, trace.WithSpanKind(trace.SpanKindServer))
	if !s.IsRecording() {
		return ctx, Span{}
	}
	s.SetAttributes(attribute.String("http.request.method", method))
	return sctx, Span{s}
}

// EndRequest names the server span by the route pattern that took the
// request ("POST /v1/pets"; none: its method alone), adds its status and
// the caller's key id (0: none), and ends it.
func (s Span) EndRequest(method, pattern string, status int, keyID int64) {
	method = knownMethod(method)
	name := method
	if pattern != "" {
		route := pattern
		if m, path, ok := strings.Cut(pattern, " "); ok && !strings.Contains(m, "/") {
			route = path
		}
		name = method + " " + route
		s.s.SetAttributes(attribute.String("http.route", route))
	}
	s.s.SetName(name)
	s.s.SetAttributes(attribute.Int("http.response.status_code", status))
	if keyID != 0 {
		s.s.SetAttributes(attribute.Int64("petstore.key.id", keyID))
	}
	if status >= 500 {
		s.s.SetStatus(codes.Error, "")
	}
	s.s.End()
}

// knownMethod is the method as the span names it: any other than HTTP's
// own is _OTHER, as OpenTelemetry's conventions ask, so that a client
// cannot write what it likes into a span.
func knownMethod(m string) string {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE":
		return m
	}
	return "_OTHER"
}

// Child starts a span named name under ctx's span, when ctx carries a
// sampled request's; otherwise it returns ctx and no span, having called
// no tracer.
func Child(ctx context.Context, name string) (context.Context, Span) {
	if !started.Load() {
		return ctx, Span{}
	}
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, Span{}
	}
	ctx, s := parent.TracerProvider().Tracer("petstore").Start(ctx, name)
	return ctx, Span{s}
}

// EndIn ends the span Child put in ctx, failed by err when err is not nil.
// A ctx without one is left alone.
func EndIn(ctx context.Context, err error) {
	if !started.Load() {
		return
	}
	s := trace.SpanFromContext(ctx)
	if !s.IsRecording() {
		return
	}
	if err != nil {
		s.SetStatus(codes.Error, err.Error())
	}
	s.End()
}

// Detached is a context without ctx's deadline or cancellation that
// carries its sampled span, for work done for a request in a batch that
// others share; context.Background when it has none.
func Detached(ctx context.Context) context.Context {
	if !started.Load() {
		return context.Background()
	}
	s := trace.SpanFromContext(ctx)
	if !s.IsRecording() {
		return context.Background()
	}
	return trace.ContextWithSpan(context.Background(), s)
}

// Links are the spans of the sampled calls that share one batch; the
// zero Links is none, and costs nothing.
type Links struct {
	first trace.Span
	links []trace.Link
}

// Add adds ctx's span when it is a sampled request's.
func (l *Links) Add(ctx context.Context) {
	if !started.Load() {
		return
	}
	s := trace.SpanFromContext(ctx)
	if !s.IsRecording() {
		return
	}
	if l.first == nil {
		l.first = s
	}
	l.links = append(l.links, trace.Link{SpanContext: s.SpanContext()})
}

// Any says whether a sampled call is among them.
func (l *Links) Any() bool { return l.first != nil }

// Batch starts the span of a batch run of n calls among which l's (not
// empty): a commit or a round trip that serves many requests. It is a
// child of the first sampled call's span and linked to every sampled
// call's, so that each request's trace leads to it; ctx gives it its
// deadline.
func Batch(ctx context.Context, name string, n int, l *Links) (context.Context, Span) {
	parent := trace.ContextWithSpan(ctx, l.first)
	ctx, s := l.first.TracerProvider().Tracer("petstore").Start(parent, name, trace.WithLinks(l.links...))
	s.SetAttributes(attribute.Int("petstore.batch.size", n))
	return ctx, Span{s}
}
