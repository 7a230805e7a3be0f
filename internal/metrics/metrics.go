// Package metrics is what the admin listener's GET /metrics reports
// (docs/observing.md): the Prometheus registry of one server, its
// collectors, and the handler that serves them. A leaf: it imports nothing
// of the project, and it is told plain values (a status, a route, a
// duration, an index into the names it was given), never a request's
// record; httpapi.LogRequests turns its records into them.
//
// Each server has its own Metrics, with its own registry: no package
// globals. A server started without --admin-addr has none, and every method
// of a nil *Metrics does nothing.
package metrics

import (
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are one server's. Recording an unsampled request allocates
// nothing; a sampled one's exemplar does.
type Metrics struct {
	registry *prometheus.Registry

	requestDuration *prometheus.HistogramVec
	// requests holds the series of requestDuration by route, method and
	// status, each resolved the first time it is seen. It is copied on
	// write: a request reads it without a lock, and only a combination
	// never seen before (a few dozen in a server's life) takes mu.
	requests atomic.Pointer[map[requestSeries]prometheus.Observer]
	mu       sync.Mutex

	decisions     [numDecisions]prometheus.Counter
	authFailures  []prometheus.Counter // by reason, as Names.AuthReasons
	adminFailures []prometheus.Counter
	dbUnavailable []prometheus.Counter // by cause, as Names.DBCauses
	fallback      prometheus.Gauge
	dbDown        prometheus.Gauge
	dbCalls       *prometheus.HistogramVec
	redisCalls    *prometheus.HistogramVec
	deliveries    map[string]prometheus.Counter // webhook deliveries by state
	// The certificates served (docs/observing.md): when each expires, and
	// what came of each change.
	certExpiry  *prometheus.GaugeVec
	certChanges *prometheus.CounterVec
	// spansDropped counts the trace spans that never reached the OTLP
	// endpoint (docs/observing.md, "Traces").
	spansDropped prometheus.Counter
}

// Build is what petstore_build_info's labels say of the running binary.
type Build struct{ Version, GoVersion, Revision string }

// Names are the label values of the counters whose series are fixed. The
// index of a name (from 1; index 0 is none) is the plain value the caller
// passes for it: Answered.AuthFailure, AdminAuthFailed, Answered.DBFailure.
type Names struct {
	AuthReasons []string          // the reason of petstore_auth_failures_total (and the admin API's)
	DBCauses    []string          // the cause of petstore_database_unavailable_total
	Deliveries  map[string]string // a webhook delivery's state → the outcome of petstore_webhook_deliveries_total
}

// RequestBuckets are OpenTelemetry's default histogram boundaries (in
// milliseconds there), in seconds.
var RequestBuckets = []float64{0, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// callBuckets time database and Redis calls, most of which take well under
// OpenTelemetry's first 5 ms: 100 µs to 5 s.
var callBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// unmatchedRoute is the route of a request that no ServeMux pattern took
// (OPTIONS *, answered by ServeMux itself); an unclean path that ServeMux
// redirects has the pattern of its clean form.
const unmatchedRoute = "unmatched"

func New(build Build, names Names) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "petstore_http_request_duration_seconds",
			Help:    "Time from a request's arrival at the service to its answer, by method, route (the ServeMux pattern's path) and HTTP status.",
			Buckets: RequestBuckets,
		}, []string{"method", "route", "code"}),
		fallback: prometheus.NewGauge(prometheus.GaugeOpts{Name: "petstore_ratelimit_fallback",
			Help: "1 while Redis is unreachable and each server limits on its own, else 0."}),
		dbDown: prometheus.NewGauge(prometheus.GaugeOpts{Name: "petstore_database_down",
			Help: "1 while the health probe finds the database unreachable (/readyz answers 503), else 0."}),
		dbCalls:    callHistogram("petstore_database_call_duration_seconds", "the database"),
		redisCalls: callHistogram("petstore_redis_call_duration_seconds", "Redis"),
		certExpiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "petstore_tls_certificate_expiry_timestamp_seconds",
			Help: "When the certificate served for a name expires (NotAfter, Unix seconds), by its first name."}, []string{"name"}),
		certChanges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "petstore_tls_certificate_changes_total",
			Help: "Certificates taken up or not, by source (files: --tls-cert and --admin-tls-cert; acme: --acme-domain) " +
				"and outcome (files: reloaded, failed; acme: obtained, renewed, failed)."}, []string{"source", "outcome"}),
		spansDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "petstore_trace_spans_dropped_total",
			Help: "Trace spans sampled but never sent to the OTLP endpoint: their export failed (the endpoint down or refusing), or the queue waiting for it was full."}),
	}
	m.requests.Store(&map[requestSeries]prometheus.Observer{})
	m.registry.MustRegister(m.newCounters(names)...)
	m.registry.MustRegister(
		m.requestDuration, m.fallback, m.dbDown, m.dbCalls, m.redisCalls, m.certExpiry, m.certChanges, m.spansDropped,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "petstore_build_info", Help: "Always 1; the labels say which build is running.",
			ConstLabels: prometheus.Labels{"version": build.Version, "goversion": build.GoVersion, "revision": build.Revision},
		}, func() float64 { return 1 }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// newCounters makes the counters of a fixed set of series, resolved once:
// the rate limiter's decisions, the 401s by reason, the 503s by cause, the
// webhook deliveries by outcome. It returns them to be registered.
func (m *Metrics) newCounters(names Names) []prometheus.Collector {
	decisions := counterVec("petstore_ratelimit_decisions_total", "decision",
		"Rate-limit decisions: allowed, limited (429 rate_limited) or banned (429 temporarily_banned).")
	for d := Allowed; d < numDecisions; d++ {
		m.decisions[d] = decisions.WithLabelValues(decisionNames[d])
	}
	authFailures := counterVec("petstore_auth_failures_total", "reason",
		"Requests answered 401, by reason: missing, malformed, invalid, revoked, wrong_environment, expired.")
	m.authFailures = resolveAll(authFailures, names.AuthReasons)
	adminFailures := counterVec("petstore_admin_auth_failures_total", "reason",
		"Requests to the admin API answered 401 (or 429 once their client address is limited), by reason: missing, malformed, invalid, revoked, wrong_environment.")
	m.adminFailures = resolveAll(adminFailures, names.AuthReasons)
	dbUnavailable := counterVec("petstore_database_unavailable_total", "cause",
		"Requests answered 503 because the database could not serve them, by cause: timeout (no answer by --db-timeout), "+
			"pool_exhausted (no connection free by then, or too many creates waiting for a commit), refused (the connection refused or cut, the disk refusing the write).")
	m.dbUnavailable = resolveAll(dbUnavailable, names.DBCauses)
	deliveries := counterVec("petstore_webhook_deliveries_total", "outcome",
		"Webhook attempts by what came of them: delivered (a 2xx), retried (to be tried again), failed (the last attempt, or a 410).")
	m.deliveries = make(map[string]prometheus.Counter)
	for state, outcome := range names.Deliveries {
		m.deliveries[state] = deliveries.WithLabelValues(outcome)
	}
	return []prometheus.Collector{deliveries, decisions, authFailures, adminFailures, dbUnavailable}
}

// callHistogram times the calls to what, by operation.
func callHistogram(name, what string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: name, Help: "Duration of the calls to " + what + ", by operation.", Buckets: callBuckets,
	}, []string{"operation"})
}

func counterVec(name, label, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
}

// resolveAll is v's series of each name, by the name's index; index 0 (and
// any name left empty) has none.
func resolveAll(v *prometheus.CounterVec, names []string) []prometheus.Counter {
	counters := make([]prometheus.Counter, len(names))
	for i, name := range names {
		if i > 0 && name != "" {
			counters[i] = v.WithLabelValues(name)
		}
	}
	return counters
}

// Handler serves the registry in Prometheus's text format: GET /metrics.
func (m *Metrics) Handler() http.Handler {
	// OpenMetrics, to a scraper that asks for it, carries the latency
	// histogram's exemplars: the trace ids of sampled requests.
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

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
	TraceID     string   // the request's trace when it is sampled, for the exemplar; "" otherwise
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
	if a.TraceID == "" {
		obs.Observe(a.Took.Seconds())
	} else {
		obs.(prometheus.ExemplarObserver).ObserveWithExemplar(a.Took.Seconds(), prometheus.Labels{"trace_id": a.TraceID})
	}
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

// SpansDropped counts n trace spans that never reached the OTLP endpoint.
func (m *Metrics) SpansDropped(n int) {
	if m != nil {
		m.spansDropped.Add(float64(n))
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
