package publicapi_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/limits"
	"petstore/internal/publicapi"
	"petstore/internal/servertest"
)

// Whatever a decision holds, the headers written from it are counts of 0 or
// more.
func TestRateLimitHeadersAreNeverNegative(t *testing.T) {
	t.Parallel()
	d := limits.Decision{Policy: "60;w=60", Window: "minute", Limit: -1, Remaining: math.MinInt64, Reset: time.Unix(1700000000, 0), ResetIn: -time.Second}
	h := publicapi.RateLimitHeaders(&d)
	for name, v := range h {
		if strings.Contains(fmt.Sprint(v), "-") && name != "Ratelimit-Policy" {
			t.Errorf("%s: %q", name, v)
		}
	}
	if got := h.Get("X-Ratelimit-Remaining"); got != "0" {
		t.Errorf("X-RateLimit-Remaining %q, want 0", got)
	}
}

// A key stored before the figures were capped, with the largest an int64
// holds: both limiters count it at the cap, and no header is negative.
func TestAKeyWithTheLargestFiguresGetsNoNegativeHeader(t *testing.T) {
	t.Parallel()
	for _, engine := range []struct {
		name string
		opts servertest.Options
	}{{"in process", servertest.Options{}}, {"redis", servertest.Options{Redis: true}}} {
		t.Run(engine.name, func(t *testing.T) {
			s := servertest.Start(t, engine.opts)
			_, key := s.MustCreate(s.KeyTerms("enterprise", domain.Limits{PerMinute: math.MaxInt64, PerDay: math.MaxInt64}))
			figure := regexp.MustCompile(`^[0-9]+$`)
			for i := range 3 {
				w := s.Do("GET", "/v1/pets", key, "")
				if w.Code != http.StatusOK {
					t.Fatalf("request %d: HTTP status %d; body: %s", i+1, w.Code, w.Body)
				}
				for _, h := range []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"} {
					if v := w.Header().Get(h); !figure.MatchString(v) {
						t.Errorf("request %d: %s %q, want a count of 0 or more", i+1, h, v)
					}
				}
				if got := w.Header().Get("X-Ratelimit-Limit"); got != strconv.Itoa(domain.MaxLimit) {
					t.Errorf("X-RateLimit-Limit %s, want the cap %d", got, domain.MaxLimit)
				}
				if rl := w.Header().Get("Ratelimit"); strings.Contains(rl, "=-") {
					t.Errorf("RateLimit %q holds a negative figure", rl)
				}
				s.Clock.Advance(time.Second)
			}
			var status struct {
				Minute, Day struct{ Limit, Remaining int64 }
			}
			if err := json.Unmarshal(s.Do("GET", "/v1/rate_limit", key, "").Body.Bytes(), &status); err != nil {
				t.Fatal(err)
			}
			if status.Minute.Remaining < 0 || status.Day.Remaining < 0 || status.Minute.Limit != domain.MaxLimit || status.Day.Limit != domain.MaxLimit {
				t.Errorf("GET /v1/rate_limit: %+v, want the cap as limits and nothing negative", status)
			}
		})
	}
}
