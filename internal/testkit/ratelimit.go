package testkit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// RateLimitBody is the body of GET /v1/rate_limit.
type RateLimitBody struct {
	Plan   string          `json:"plan"`
	Scopes ScopeList       `json:"scopes"`
	Minute RateLimitWindow `json:"minute"`
	Day    RateLimitWindow `json:"day"`
}

// ScopeList is a JSON array of scope names, held joined by commas so that
// a body can be compared with ==.
type ScopeList string

// UnmarshalJSON reads the array.
func (l *ScopeList) UnmarshalJSON(b []byte) error {
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return err
	}
	*l = ScopeList(strings.Join(names, ","))
	return nil
}

// RateLimitWindow is one window of a RateLimitBody.
type RateLimitWindow struct {
	Limit     int64 `json:"limit"`
	Remaining int64 `json:"remaining"`
	Reset     int64 `json:"reset"`
}

// RateLimitOf is the body of w, an answer to GET /v1/rate_limit, after
// checking that it is a 200 whose headers describe the window of its body
// with fewer requests left.
func RateLimitOf(t *testing.T, w *httptest.ResponseRecorder) RateLimitBody {
	t.Helper()
	WantStatus(t, w, http.StatusOK, "GET /v1/rate_limit")
	var body RateLimitBody
	dec := json.NewDecoder(w.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		t.Fatalf("GET /v1/rate_limit: %v", err)
	}
	binding, name := body.Minute, "minute"
	if body.Day.Remaining < body.Minute.Remaining {
		binding, name = body.Day, "day"
	}
	got := RateLimitWindow{IntHeader(t, w, "X-RateLimit-Limit"), IntHeader(t, w, "X-RateLimit-Remaining"), IntHeader(t, w, "X-RateLimit-Reset")}
	if got != binding {
		t.Errorf("headers say %+v, the body's %s window %+v", got, name, binding)
	}
	if rl := w.Header().Get("RateLimit"); !strings.HasPrefix(rl, `"`+name+`";r=`+strconv.FormatInt(binding.Remaining, 10)+";") {
		t.Errorf("RateLimit: %q, want the %s window with r=%d", rl, name, binding.Remaining)
	}
	return body
}
