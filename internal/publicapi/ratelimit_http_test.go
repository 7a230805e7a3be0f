package publicapi

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"petstore/internal/httpapi"
	"petstore/internal/limits"
)

// Whatever a decision holds, the headers written from it are counts of 0 or
// more.
func TestRateLimitHeadersAreNeverNegative(t *testing.T) {
	d := limits.Decision{Policy: "60;w=60", Window: "minute", Limit: -1, Remaining: math.MinInt64, Reset: time.Unix(1700000000, 0), ResetIn: -time.Second}
	h := http.Header{}
	setRateLimitHeaders(h, &httpapi.Record{}, &d)
	for name, v := range h {
		if strings.Contains(fmt.Sprint(v), "-") && name != "Ratelimit-Policy" {
			t.Errorf("%s: %q", name, v)
		}
	}
	if got := h.Get("X-Ratelimit-Remaining"); got != "0" {
		t.Errorf("X-RateLimit-Remaining %q, want 0", got)
	}
}
