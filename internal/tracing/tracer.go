package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Tracer is the server's: nil when tracing is off, which every caller
// checks before anything else.
type Tracer struct {
	provider    *sdktrace.TracerProvider
	tracer      trace.Tracer
	trustParent bool
	roots       rootSampler
}

// Hooks are what the tracer tells the rest of the server.
type Hooks struct {
	// Dropped is told of spans that never reached the endpoint (may be nil).
	Dropped func(n int)
	Logger  *slog.Logger
}

// started is set once a tracer has started in this process: until then
// the spans under a request's (Child, Links, Detached) are one load of it,
// not a walk up the request's context.
var started atomic.Bool

// exportTimeout bounds one export: an endpoint that is away costs the
// exporter's goroutine this much, never a request.
const exportTimeout = 5 * time.Second

// ShutdownTimeout bounds the flush of the spans still queued when the
// server stops.
const ShutdownTimeout = 3 * time.Second

// Start starts the SDK that c asks for: nil when tracing is off, and then
// nothing is started at all. The exporter is the SDK's OTLP/HTTP one
// (docs/development.md says why builds add the grpcnotrace tag).
func Start(c Config, h Hooks) (*Tracer, error) {
	if !c.On() {
		return nil, nil
	}
	exporter, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(c.Endpoint), otlptracehttp.WithHeaders(c.Headers),
		otlptracehttp.WithTimeout(exportTimeout),
		// A failed export is dropped, counted and not tried again: the
		// queue behind it would fill while it waited.
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %w", err)
	}
	started.Store(true)
	// The SDK reports failures to the global handler, which would log
	// each one: the counting exporter logs the first.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	counted := &countingExporter{SpanExporter: exporter, hooks: h, endpoint: c.Endpoint}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(c.Resource...)),
		sdktrace.WithSampler(followCause{samplerOf(c.Sampler, c.Ratio)}),
		sdktrace.WithIDGenerator(presetIDs{}),
		sdktrace.WithSpanProcessor(newQueue(counted, c.Delay)),
	)
	return &Tracer{provider: provider, tracer: provider.Tracer("petstore"), trustParent: c.TrustParent,
		roots: rootSamplerOf(c.Sampler, c.Ratio)}, nil
}

func samplerOf(name string, ratio float64) sdktrace.Sampler {
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio)
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample())
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	}
	return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))
}

// Provider is the SDK's tracer provider, for work that starts traces of its
// own (a webhook's attempts, internal/webhook); nil when tracing is off.
func (t *Tracer) Provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.provider
}

// Shutdown sends the spans still queued, within ShutdownTimeout, and stops
// the SDK. Nil: nothing to do.
func (t *Tracer) Shutdown() error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	return t.provider.Shutdown(ctx)
}

// countingExporter counts the spans of each failed export, and those the
// queue had no room for, as dropped, and logs the first loss, once: an
// endpoint that is away would otherwise fill the log.
type countingExporter struct {
	sdktrace.SpanExporter
	hooks    Hooks
	endpoint string
	warned   atomic.Bool
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		e.dropped(len(spans), err)
	}
	return err
}

var errQueueFull = errors.New("the queue of spans waiting to be sent is full")

// dropped counts n spans lost for err, and logs the first loss.
func (e *countingExporter) dropped(n int, err error) {
	if e.hooks.Dropped != nil {
		e.hooks.Dropped(n)
	}
	if e.hooks.Logger != nil && e.warned.CompareAndSwap(false, true) {
		e.hooks.Logger.Warn("traces do not reach the OTLP endpoint: spans are dropped and counted in petstore_trace_spans_dropped_total; said once",
			"endpoint", e.endpoint, "err", err.Error())
	}
}
