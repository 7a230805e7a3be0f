package tracing

import (
	"context"
	"testing"
)

func startedTracer(t *testing.T, sampler string, ratio float64) *Tracer {
	t.Helper()
	tr, err := Start(Config{Endpoint: "http://127.0.0.1:1/v1/traces", Sampler: sampler, Ratio: ratio}, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Shutdown() })
	return tr
}

// A request that starts its own trace is sampled at the configured ratio,
// decided before the SDK is called, and the SDK's own sampler agrees with
// every decision: a sampled root is a recording span.
func TestRootRequestsAreSampledAtTheirRatio(t *testing.T) {
	const requests = 20000
	for _, tc := range []struct {
		name     string
		sampler  string
		ratio    float64
		min, max int
	}{
		{"one in a hundred by default", DefaultSampler, 0.01, 140, 260},
		{"a quarter without parent-based", "traceidratio", 0.25, 4700, 5300},
		{"every one at a ratio of 1", DefaultSampler, 1, requests, requests},
		{"none at a ratio of 0", DefaultSampler, 0, 0, 0},
		{"every one with always_on", "always_on", 0, requests, requests},
		{"none with parentbased_always_off", "parentbased_always_off", 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := startedTracer(t, tc.sampler, tc.ratio)
			sampled := 0
			for range requests {
				ctx, span := tr.StartRequest(context.Background(), "GET", "", "")
				if !span.On() {
					if ctx != context.Background() {
						t.Fatal("an unsampled request got a context of its own")
					}
					continue
				}
				sampled++
				span.EndRequest("GET", "GET /v1/pets", 200, 0)
			}
			if sampled < tc.min || sampled > tc.max {
				t.Errorf("%d of %d sampled, want %d to %d", sampled, requests, tc.min, tc.max)
			}
		})
	}
}

// An unsampled root request costs no allocation: the SDK is not called.
func TestAnUnsampledRootRequestAllocatesNothing(t *testing.T) {
	tr := startedTracer(t, DefaultSampler, 1e-12)
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		if _, span := tr.StartRequest(ctx, "GET", "", ""); span.On() {
			t.Fatal("sampled at a ratio of 1e-12")
		}
	}); n != 0 {
		t.Errorf("an unsampled request allocated %v times", n)
	}
}
