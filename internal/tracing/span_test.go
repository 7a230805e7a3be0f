package tracing

import (
	"context"
	"errors"
	"testing"
)

// callerKey marks a context as the caller's own.
type callerKey struct{}

// Outside a sampled request, the spans of the store, the limiter and the
// batches cost nothing: no tracer is called, the context is the caller's,
// nothing is allocated.
func TestNoSpanOutsideASampledRequestCostsNothing(t *testing.T) {
	ctx := context.WithValue(context.Background(), callerKey{}, 1)
	failure := errors.New("the database is away")
	if n := testing.AllocsPerRun(100, func() {
		got, span := Child(ctx, "CreatePets")
		if got != ctx || span.On() {
			t.Fatal("a span outside a sampled request")
		}
		span.Failed(failure)
		span.End()
		EndIn(got, nil)
		var links Links
		links.Add(ctx)
		if links.Any() || Detached(ctx) != context.Background() {
			t.Fatal("links or a span outside a sampled request")
		}
	}); n != 0 {
		t.Errorf("%v allocations, want none", n)
	}
}
