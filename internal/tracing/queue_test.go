package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// An endpoint that does not answer never holds a request up: while an
// export waits for it, the spans that find the queue full are dropped and
// counted, and ending a span stays quick.
func TestAFullQueueDropsAndCounts(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hung.Close()
	var dropped atomic.Int64
	tr, err := Start(Config{Endpoint: hung.URL + "/v1/traces", Sampler: "always_on", Delay: time.Millisecond},
		Hooks{Dropped: func(n int) { dropped.Add(int64(n)) }})
	if err != nil {
		t.Fatal(err)
	}
	const spans = 3 * queueSize
	start := time.Now()
	for i := 0; i < spans; i++ {
		_, span := tr.StartRequest(context.Background(), "GET", "", "")
		span.EndRequest("GET", "GET /v1/pets", 200, 0)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("%d requests' spans took %v with the endpoint hung", spans, took)
	}
	if got, least := dropped.Load(), int64(spans-queueSize-batchSize); got < least {
		t.Errorf("%d spans counted as dropped, want at least %d", got, least)
	}
	close(release) // else Shutdown waits its whole bound for the hung exports
	tr.Shutdown()
}
