// Package tracing is the service's OpenTelemetry traces (docs/observing.md,
// "Traces"): it reads the standard OTEL_* variables itself, so that a bad
// value is a usage mistake naming the variable rather than a silent
// default; it starts the SDK and its OTLP/HTTP exporter only when an
// endpoint is set; and it gives the request path spans that cost nothing
// when tracing is off or the request is not sampled: a nil *Tracer, and a
// zero Span, are checked by one comparison and call no tracer at all.
//
// A leaf: it imports nothing of the project, only the OpenTelemetry API and
// SDK and the SDK's OTLP/HTTP exporter, otlptracehttp (not autoexport:
// docs/development.md, "Dependencies", says why, and why builds add the
// grpcnotrace tag).
package tracing
