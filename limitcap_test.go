package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/limits"
)

func TestEnterpriseFiguresAboveTheMaximumAreRefusedNamingTheField(t *testing.T) {
	over := strconv.Itoa(domain.MaxLimit + 1)
	s := newTestServer(t)
	admin := s.mustCreateAdmin("portal", domain.AllAdminScopes)
	k, _ := s.mustCreate(s.keyTerms("enterprise", domain.Limits{PerMinute: 100, PerDay: 1000}))
	path := "/admin/v1/keys/" + strconv.FormatInt(k.ID, 10)
	for _, c := range []struct{ method, target, body, field string }{
		{"POST", "/admin/v1/keys", `{"plan":"enterprise","perMinute":` + over + `,"perDay":5}`, "perMinute"},
		{"POST", "/admin/v1/keys", `{"plan":"enterprise","perMinute":5,"perDay":` + over + `}`, "perDay"},
		{"POST", "/admin/v1/keys", `{"plan":"enterprise","perMinute":9223372036854775807,"perDay":9223372036854775807}`, "perMinute"},
		{"PATCH", path, `{"perMinute":` + over + `}`, "perMinute"},
		{"PATCH", path, `{"perDay":` + over + `}`, "perDay"},
	} {
		wantError(t, s.admin(c.method, c.target, admin, c.body), 400, httpapi.CodeInvalidRequest, c.field+" must be at most 1000000000")
	}
	at := strconv.Itoa(domain.MaxLimit)
	if w := s.admin("POST", "/admin/v1/keys", admin, `{"plan":"enterprise","perMinute":`+at+`,"perDay":`+at+`}`); w.Code != 201 {
		t.Errorf("the maximum itself: HTTP status %d, want 201; body: %s", w.Code, w.Body)
	}

	db := filepath.Join(t.TempDir(), "keys.db")
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"keys", "create", "--db", db, "--plan", "enterprise", "--rpm", over, "--rpd", "5"}, 2, "--rpm must be at most 1000000000"},
		{[]string{"keys", "create", "--db", db, "--plan", "enterprise", "--rpm", "5", "--rpd", over}, 2, "--rpd must be at most 1000000000"},
		{[]string{"keys", "create", "--db", db, "--plan", "enterprise", "--rpm", at, "--rpd", at}, 0, ""},
		{[]string{"keys", "update", "--db", db, "1", "--rpm", over}, 2, "--rpm must be at most 1000000000"},
		{[]string{"keys", "update", "--db", db, "1", "--rpd", over}, 2, "--rpd must be at most 1000000000"},
	} {
		res := viaRun(t, nil, c.args...)
		if res.code != c.code || !strings.Contains(res.stderr, c.says) {
			t.Errorf("%s: exit status %d, %q; want %d saying %q", c.args[:2], res.code, res.stderr, c.code, c.says)
		}
	}
}

// A key stored before the figures were capped, with the largest an int64
// holds: both limiters count it at the cap, and no header is negative.
func TestAKeyWithTheLargestFiguresGetsNoNegativeHeader(t *testing.T) {
	for _, engine := range []struct {
		name string
		opts testOptions
	}{{"in process", testOptions{}}, {"redis", testOptions{redis: true}}} {
		t.Run(engine.name, func(t *testing.T) {
			s := newTestServerWith(t, engine.opts)
			_, key := s.mustCreate(s.keyTerms("enterprise", domain.Limits{PerMinute: math.MaxInt64, PerDay: math.MaxInt64}))
			figure := regexp.MustCompile(`^[0-9]+$`)
			for i := range 3 {
				w := s.do("GET", "/v1/pets", key, "")
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
				s.clock.advance(time.Second)
			}
			var status struct {
				Minute, Day struct{ Limit, Remaining int64 }
			}
			if err := json.Unmarshal(s.do("GET", "/v1/rate_limit", key, "").Body.Bytes(), &status); err != nil {
				t.Fatal(err)
			}
			if status.Minute.Remaining < 0 || status.Day.Remaining < 0 || status.Minute.Limit != domain.MaxLimit || status.Day.Limit != domain.MaxLimit {
				t.Errorf("GET /v1/rate_limit: %+v, want the cap as limits and nothing negative", status)
			}
		})
	}
}

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
