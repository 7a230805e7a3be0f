package tracing

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
)

// rootSampler decides whether a request that starts a trace of its own is
// sampled before the SDK is called, so that an unsampled request, 99 in a
// hundred at the default ratio, costs a random number rather than the
// SDK's non-recording span, its context and its sampling parameters. Its
// rule is the SDK's TraceIDRatioBased on a trace id drawn here, which the
// SDK is then given (presetIDs) and samples the same way.
type rootSampler struct {
	always, never bool
	bound         uint64 // of the trace id's last 63 bits, as the SDK reads them
}

func rootSamplerOf(name string, ratio float64) rootSampler {
	switch {
	case name == "always_on" || name == "parentbased_always_on" || ratio >= 1:
		return rootSampler{always: true}
	case name == "always_off" || name == "parentbased_always_off" || ratio <= 0:
		return rootSampler{never: true}
	}
	return rootSampler{bound: uint64(ratio * (1 << 63))}
}

// presetTraceID carries the trace id a sampled root request drew to the
// SDK's id generator.
type presetTraceID struct{}

// start gives the context to start a root request's span in, and whether
// it is sampled at all; only a sampled one's context differs from ctx.
func (r rootSampler) start(ctx context.Context) (context.Context, bool) {
	if r.always || r.never {
		return ctx, r.always
	}
	var id trace.TraceID
	binary.BigEndian.PutUint64(id[:8], rand.Uint64())
	binary.BigEndian.PutUint64(id[8:], rand.Uint64())
	if binary.BigEndian.Uint64(id[8:])>>1 >= r.bound {
		return ctx, false
	}
	return context.WithValue(ctx, presetTraceID{}, id), true
}

// presetIDs is the SDK's id generator: a root request's span takes the
// trace id its sampling drew; every other id is random.
type presetIDs struct{}

func (presetIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	id, ok := ctx.Value(presetTraceID{}).(trace.TraceID)
	if !ok {
		binary.BigEndian.PutUint64(id[:8], rand.Uint64())
		binary.BigEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id, newSpanID()
}

func (presetIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() (s trace.SpanID) {
	for s == (trace.SpanID{}) {
		binary.BigEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}
