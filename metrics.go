package main

import (
	"context"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"petstore/internal/domain"
	"petstore/internal/limits"
	"petstore/internal/webhook"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are what the admin listener's GET /metrics reports (docs/observing.md,
// "Observing it"). Each server has its own, with its own registry: no package
// globals. A server started without --admin-addr has none, and every method
// of a nil *metrics does nothing.
//
// Recording a request allocates nothing: its series (route, method, status)
// is resolved once, the first time that combination is seen, and kept.
type metrics struct {
	registry *prometheus.Registry

	requestDuration *prometheus.HistogramVec
	// requests holds the resolved series of requestDuration. It is copied
	// on write: a request reads it without a lock, and only a combination
	// never seen before (a few dozen in a server's life) takes mu.
	requests atomic.Pointer[map[requestSeries]prometheus.Observer]
	mu       sync.Mutex

	decisions     [limitOutcomes]prometheus.Counter
	authFailures  [authReasons]prometheus.Counter
	adminFailures [authReasons]prometheus.Counter
	dbUnavailable [domain.DBFailures]prometheus.Counter
	fallback      prometheus.Gauge
	dbDown        prometheus.Gauge
	dbCalls       *prometheus.HistogramVec
	redisCalls    *prometheus.HistogramVec
	deliveries    map[string]prometheus.Counter // webhook deliveries by outcome
	tls           *tlsMetrics
}

// requestBuckets are OpenTelemetry's default histogram boundaries (in
// milliseconds there), in seconds.
var requestBuckets = []float64{0, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// callBuckets time database and Redis calls, most of which take well under
// OpenTelemetry's first 5 ms: 100 µs to 5 s.
var callBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// unmatchedRoute is the route of a request that no ServeMux pattern took
// (OPTIONS *, answered by ServeMux itself); an unclean path that ServeMux
// redirects has the pattern of its clean form.
const unmatchedRoute = "unmatched"

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "petstore_http_request_duration_seconds",
			Help:    "Time from a request's arrival at the service to its answer, by method, route (the ServeMux pattern's path) and HTTP status.",
			Buckets: requestBuckets,
		}, []string{"method", "route", "code"}),
		fallback: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "petstore_ratelimit_fallback",
			Help: "1 while Redis is unreachable and each server limits on its own, else 0.",
		}),
		dbDown: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "petstore_database_down",
			Help: "1 while the health probe finds the database unreachable (/readyz answers 503), else 0.",
		}),
		dbCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "petstore_database_call_duration_seconds",
			Help:    "Duration of the calls to the database, by operation.",
			Buckets: callBuckets,
		}, []string{"operation"}),
		redisCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "petstore_redis_call_duration_seconds",
			Help:    "Duration of the calls to Redis, by operation.",
			Buckets: callBuckets,
		}, []string{"operation"}),
	}
	m.requests.Store(&map[requestSeries]prometheus.Observer{})

	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "petstore_ratelimit_decisions_total",
		Help: "Rate-limit decisions: allowed, limited (429 rate_limited) or banned (429 temporarily_banned).",
	}, []string{"decision"})
	for o := limitAllowed; o < limitOutcomes; o++ {
		m.decisions[o] = decisions.WithLabelValues(limitOutcomeNames[o])
	}
	authFailures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "petstore_auth_failures_total",
		Help: "Requests answered 401, by reason: missing, malformed, invalid, revoked, wrong_environment, expired.",
	}, []string{"reason"})
	for r := authMissing; r < authReasons; r++ {
		m.authFailures[r] = authFailures.WithLabelValues(authReasonNames[r])
	}
	adminFailures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "petstore_admin_auth_failures_total",
		Help: "Requests to the admin API answered 401 (or 429 once their client address is limited), by reason: missing, malformed, invalid, revoked, wrong_environment.",
	}, []string{"reason"})
	for r := authMissing; r < authReasons; r++ {
		m.adminFailures[r] = adminFailures.WithLabelValues(authReasonNames[r])
	}
	dbUnavailable := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "petstore_database_unavailable_total",
		Help: "Requests answered 503 because the database could not serve them, by cause: timeout (no answer by --db-timeout), " +
			"pool_exhausted (no connection free by then, or too many creates waiting for a commit), refused (the connection refused or cut, the disk refusing the write).",
	}, []string{"cause"})
	for f := domain.DBTimeout; f < domain.DBFailures; f++ {
		m.dbUnavailable[f] = dbUnavailable.WithLabelValues(domain.DBFailureNames[f])
	}

	deliveries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "petstore_webhook_deliveries_total",
		Help: "Webhook attempts by what came of them: delivered (a 2xx), retried (to be tried again), failed (the last attempt, or a 410).",
	}, []string{"outcome"})
	m.deliveries = make(map[string]prometheus.Counter)
	for state, outcome := range webhook.DeliveryOutcomeNames {
		m.deliveries[state] = deliveries.WithLabelValues(outcome)
	}

	m.tls = newTLSMetrics(m.registry)
	build := readBuildInfo()
	m.registry.MustRegister(
		deliveries,
		m.requestDuration, decisions, authFailures, adminFailures, dbUnavailable, m.fallback, m.dbDown, m.dbCalls, m.redisCalls,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "petstore_build_info",
			Help: "Always 1; the labels say which build is running.",
			ConstLabels: prometheus.Labels{
				"version": build.version, "goversion": build.goVersion, "revision": build.revision,
			},
		}, func() float64 { return 1 }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// requestSeries is one series of petstore_http_request_duration_seconds.
// pattern is r.Pattern as ServeMux set it; method is one of a fixed set.
type requestSeries struct {
	pattern string
	method  string
	code    int
}

// answered is what the metrics count of one answered request, in plain
// values.
type answered struct {
	pattern     string // the ServeMux pattern that took it (r.Pattern)
	method      string // as the client sent it
	code        int    // the status recorded (0: nothing written, net/http's 200)
	took        time.Duration
	decision    limitOutcome     // the rate limiter's; 0 when not limited
	authFailure authReason       // why a 401 had no valid key; 0 when not that
	dbFailure   domain.DBFailure // why a 503's database failed; 0 when not that
}

// observeRequest records one answered request: its duration, the rate
// limiter's decision, the reason of a 401 and the cause of a 503. a is
// read, never kept (it is taken by pointer only as its nine words and m
// would not all go in registers).
func (m *metrics) observeRequest(a *answered) {
	if m == nil {
		return
	}
	code := a.code
	if code == 0 {
		code = http.StatusOK // nothing written: net/http answers 200
	}
	key := requestSeries{pattern: a.pattern, method: methodLabel(a.method), code: code}
	obs, ok := (*m.requests.Load())[key]
	if !ok {
		obs = m.resolve(key)
	}
	obs.Observe(a.took.Seconds())
	if a.decision != 0 {
		m.decisions[a.decision].Inc()
	}
	if code == http.StatusUnauthorized && a.authFailure != 0 {
		m.authFailures[a.authFailure].Inc()
	}
	if code == http.StatusServiceUnavailable && a.dbFailure != 0 {
		m.dbUnavailable[a.dbFailure].Inc()
	}
}

// adminAuthFailed counts a failed authentication on the admin API.
func (m *metrics) adminAuthFailed(reason authReason) {
	if m != nil {
		m.adminFailures[reason].Inc()
	}
}

// resolve makes the series of key and keeps it.
func (m *metrics) resolve(key requestSeries) prometheus.Observer {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.requests.Load()
	if obs, ok := old[key]; ok {
		return obs
	}
	route := unmatchedRoute
	if key.pattern != "" {
		// "GET /v1/pets/{petId}": the method is a label of its own.
		_, path, hasMethod := strings.Cut(key.pattern, " ")
		if !hasMethod {
			path = key.pattern
		}
		route = path
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

// limitOutcome is the rate limiter's decision on a request, kept on its
// record by limit and counted when the request ends.
type limitOutcome uint8

const (
	limitAllowed limitOutcome = iota + 1
	limitLimited
	limitBanned
	limitOutcomes // how many outcomes there are, plus one
)

var limitOutcomeNames = [limitOutcomes]string{limitAllowed: "allowed", limitLimited: "limited", limitBanned: "banned"}

// limitOutcomeOf is how d counts in petstore_ratelimit_decisions_total.
func limitOutcomeOf(d *limits.Decision) limitOutcome {
	switch {
	case d.Allowed:
		return limitAllowed
	case d.Code == codeTemporarilyBanned:
		return limitBanned
	}
	return limitLimited
}

// countPets makes petstore_pets report count's answer; ok false (the
// in-memory copy is still being made) leaves it out of a scrape.
func (m *metrics) countPets(count func() (n int, ok bool)) {
	if m == nil {
		return
	}
	m.registry.MustRegister(petsCollector{
		desc:  prometheus.NewDesc("petstore_pets", "Pets in the store.", nil, nil),
		count: count,
	})
}

// auditScrapeTimeout bounds the count of the audit trail at a scrape.
const auditScrapeTimeout = 2 * time.Second

// countAuditEvents makes petstore_audit_events_total report the events of
// the audit trail by action, as count reads them from the database at each
// scrape: every server and every command writes to the trail, and it is
// append only, so the count only grows, and every server sharing a database
// reports the same. A database that does not answer leaves it out of that
// scrape.
func (m *metrics) countAuditEvents(count func(context.Context) (map[string]int64, error)) {
	if m == nil {
		return
	}
	m.registry.MustRegister(auditCollector{
		desc: prometheus.NewDesc("petstore_audit_events_total",
			"Events of the audit trail (key.created, key.revoked, key.rolled, key.banned, keys.copied), by action, written by any server or command; each server sharing a database reports the same.",
			[]string{"action"}, nil),
		count: count,
	})
}

type auditCollector struct {
	desc  *prometheus.Desc
	count func(context.Context) (map[string]int64, error)
}

func (c auditCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c auditCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), auditScrapeTimeout)
	defer cancel()
	counts, err := c.count(ctx)
	if err != nil {
		return
	}
	for _, action := range domain.AuditActions {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(counts[action]), action)
	}
}

type petsCollector struct {
	desc  *prometheus.Desc
	count func() (int, bool)
}

func (c petsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c petsCollector) Collect(ch chan<- prometheus.Metric) {
	if n, ok := c.count(); ok {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
	}
}

// callTimer times one kind of call (a database or Redis operation) into its
// histogram. The zero callTimer, from a nil *metrics, does nothing.
type callTimer struct{ obs prometheus.Observer }

// since records a call that began at start: defer timer.since(time.Now()).
func (t callTimer) since(start time.Time) {
	if t.obs != nil {
		t.obs.Observe(time.Since(start).Seconds())
	}
}

// databaseCall returns the timer of a database operation (a method of the
// storage, such as "CreatePets"). Resolve it once, not per call.
func (m *metrics) databaseCall(operation string) callTimer {
	if m == nil {
		return callTimer{}
	}
	return callTimer{m.dbCalls.WithLabelValues(operation)}
}

// redisCall returns the timer of a Redis operation (a script, PING ...), for
// the Redis rate limiter. Resolve it once, not per call.
func (m *metrics) redisCall(operation string) callTimer {
	if m == nil {
		return callTimer{}
	}
	return callTimer{m.redisCalls.WithLabelValues(operation)}
}

// redisHooks are what the Redis limiter tells the metrics: each run of its
// script, timed, and when it falls back to limiting in process and back.
// Without metrics, nothing.
func (m *metrics) redisHooks() limits.RedisHooks {
	if m == nil {
		return limits.RedisHooks{}
	}
	return limits.RedisHooks{Fallback: m.setRateLimitFallback, Call: m.redisCall("limit_script").since}
}

// setRateLimitFallback sets petstore_ratelimit_fallback: on while Redis is
// unreachable and limits are kept in process.
func (m *metrics) setRateLimitFallback(on bool) {
	if m != nil {
		setFlag(m.fallback, on)
	}
}

// setDatabaseDown sets petstore_database_down: on while the health probe
// finds the database unreachable.
func (m *metrics) setDatabaseDown(down bool) {
	if m != nil {
		setFlag(m.dbDown, down)
	}
}

// setFlag sets a gauge that is 1 while something holds, else 0.
func setFlag(g prometheus.Gauge, on bool) {
	v := 0.0
	if on {
		v = 1
	}
	g.Set(v)
}
