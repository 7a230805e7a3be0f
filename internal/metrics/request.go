package metrics

import (
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Decision is the rate limiter's decision on a request, as
// petstore_ratelimit_decisions_total counts it; 0: the request was not
// limited (as /healthz).
type Decision uint8

const (
	Allowed      Decision = iota + 1
	Limited               // 429 rate_limited
	Banned                // 429 temporarily_banned
	numDecisions          // how many decisions there are, plus one
)

var decisionNames = [numDecisions]string{Allowed: "allowed", Limited: "limited", Banned: "banned"}

// requestSeries is one series of petstore_http_request_duration_seconds.
// pattern is r.Pattern as ServeMux set it; method is one of a fixed set.
type requestSeries struct {
	pattern string
	method  string
	code    int
}

// Answered is what the metrics count of one answered request, in plain
// values.
type Answered struct {
	Pattern     string // the ServeMux pattern that took it (r.Pattern)
	Method      string // as the client sent it
	Code        int    // the status recorded (0: nothing written, net/http's 200)
	Took        time.Duration
	Decision    Decision // the rate limiter's; 0 when not limited
	AuthFailure uint8    // why a 401 had no valid key, an index of Names.AuthReasons; 0 when not that
	DBFailure   uint8    // why a 503's database failed, an index of Names.DBCauses; 0 when not that
}

// ObserveRequest records one answered request: its duration, the rate
// limiter's decision, the reason of a 401 and the cause of a 503. a is
// read, never kept (it is taken by pointer only as its nine words and m
// would not all go in registers).
func (m *Metrics) ObserveRequest(a *Answered) {
	if m == nil {
		return
	}
	code := a.Code
	if code == 0 {
		code = http.StatusOK // nothing written: net/http answers 200
	}
	key := requestSeries{pattern: a.Pattern, method: methodLabel(a.Method), code: code}
	obs, ok := (*m.requests.Load())[key]
	if !ok {
		obs = m.resolve(key)
	}
	obs.Observe(a.Took.Seconds())
	if a.Decision != 0 {
		m.decisions[a.Decision].Inc()
	}
	if code == http.StatusUnauthorized && a.AuthFailure != 0 {
		m.authFailures[a.AuthFailure].Inc()
	}
	if code == http.StatusServiceUnavailable && a.DBFailure != 0 {
		m.dbUnavailable[a.DBFailure].Inc()
	}
}

// AdminAuthFailed counts a failed authentication on the admin API, by the
// index of its reason in Names.AuthReasons.
func (m *Metrics) AdminAuthFailed(reason uint8) {
	if m != nil {
		m.adminFailures[reason].Inc()
	}
}

// resolve makes the series of key and keeps it.
func (m *Metrics) resolve(key requestSeries) prometheus.Observer {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.requests.Load()
	if obs, ok := old[key]; ok {
		return obs
	}
	route := unmatchedRoute
	if key.pattern != "" {
		route = key.pattern
		if _, path, hasMethod := strings.Cut(key.pattern, " "); hasMethod {
			route = path // "GET /v1/pets/{petId}": the method is a label of its own
		}
	}
	obs := m.requestDuration.WithLabelValues(key.method, route, strconv.Itoa(key.code))
	resolved := maps.Clone(old)
	resolved[key] = obs
	m.requests.Store(&resolved)
	return obs
}

// methodLabel bounds the method label: a client may send any token as a
// method, and each would be a series.
func methodLabel(method string) string {
	for _, known := range labelledMethods {
		if method == known {
			return known
		}
	}
	return "other"
}

var labelledMethods = [...]string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions,
}
