package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/keyring"
	"petstore/internal/limits"
	"petstore/internal/metrics"
	"petstore/internal/store"
	"petstore/internal/store/bounded"
	"petstore/internal/testkit"

	dto "github.com/prometheus/client_model/go"
)

func TestMetricsFollowPrometheusConventionsAndNeverNameACaller(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	m.DatabaseCall("GetPet").Since(time.Now())
	m.RedisCall("allow").Since(time.Now())
	s := newTestServerWith(t, testOptions{metrics: m})
	key := s.mustCreateKey("free")
	s.do("GET", "/v1/pets", key, "")
	s.do("GET", "/v1/pets", "psk_live_guess", "")
	families := testkit.Scrape(t, m.Handler())

	want := map[string]dto.MetricType{
		"petstore_http_request_duration_seconds":  dto.MetricType_HISTOGRAM,
		"petstore_ratelimit_decisions_total":      dto.MetricType_COUNTER,
		"petstore_auth_failures_total":            dto.MetricType_COUNTER,
		"petstore_pets":                           dto.MetricType_GAUGE,
		"petstore_audit_events_total":             dto.MetricType_COUNTER,
		"petstore_database_call_duration_seconds": dto.MetricType_HISTOGRAM,
		"petstore_redis_call_duration_seconds":    dto.MetricType_HISTOGRAM,
		"petstore_ratelimit_fallback":             dto.MetricType_GAUGE,
		"petstore_database_unavailable_total":     dto.MetricType_COUNTER,
		"petstore_database_down":                  dto.MetricType_GAUGE,
		"petstore_build_info":                     dto.MetricType_GAUGE,
		"go_goroutines":                           dto.MetricType_GAUGE,
		"go_memstats_heap_alloc_bytes":            dto.MetricType_GAUGE,
		"process_cpu_seconds_total":               dto.MetricType_COUNTER,
		"process_resident_memory_bytes":           dto.MetricType_GAUGE,
	}
	for name, typ := range want {
		f := families[name]
		if f == nil {
			t.Errorf("no %s in /metrics", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("%s is a %v, want a %v", name, f.GetType(), typ)
		}
		if f.GetHelp() == "" {
			t.Errorf("%s has no HELP", name)
		}
	}

	allowedLabels := []string{"method", "route", "code", "decision", "reason", "cause", "operation", "action", "outcome", "version", "goversion", "revision"}
	for name, f := range families {
		if !strings.HasPrefix(name, "petstore_") {
			continue
		}
		for _, metric := range f.GetMetric() {
			for label, value := range testkit.LabelsOf(metric) {
				if !slices.Contains(allowedLabels, label) {
					t.Errorf("%s has a label %q: only %v may be labels", name, label, allowedLabels)
				}
				if strings.Contains(value, "psk_") || strings.Contains(value, "192.0.2.1") || strings.Contains(value, "?") {
					t.Errorf("%s{%s=%q} names a key, an address or a raw URL", name, label, value)
				}
			}
		}
	}

	var bounds []float64
	for _, b := range families["petstore_http_request_duration_seconds"].GetMetric()[0].GetHistogram().GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	if !slices.Equal(bounds[:len(bounds)-1], metrics.RequestBuckets) {
		t.Errorf("request duration buckets %v, want OpenTelemetry's %v", bounds, metrics.RequestBuckets)
	}

	build := testkit.LabelsOf(families["petstore_build_info"].GetMetric()[0])
	if build["goversion"] == "" || build["version"] == "" || build["revision"] == "" {
		t.Errorf("petstore_build_info labels %v, want version, goversion and revision", build)
	}
	if v := families["petstore_ratelimit_fallback"].GetMetric()[0].GetGauge().GetValue(); v != 0 {
		t.Errorf("petstore_ratelimit_fallback = %v without Redis, want 0", v)
	}
	for _, on := range []bool{true, false} {
		m.SetRateLimitFallback(on)
		v := testkit.Scrape(t, m.Handler())["petstore_ratelimit_fallback"].GetMetric()[0].GetGauge().GetValue()
		if want := map[bool]float64{true: 1, false: 0}[on]; v != want {
			t.Errorf("after setRateLimitFallback(%v): petstore_ratelimit_fallback = %v, want %v", on, v, want)
		}
	}
	var none *metrics.Metrics // a server without --admin-addr
	none.SetRateLimitFallback(true)
	none.RedisCall("allow").Since(time.Now())
	none.DatabaseCall("GetPet").Since(time.Now())
}

func TestRouteLabelIsTheServeMuxPatternNeverThePath(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	s := newTestServerWith(t, testOptions{metrics: m})
	key := s.mustCreateKey("business")
	tests := []struct {
		name   string
		method string
		target string
		want   string // "METHOD route code"
	}{
		{"a pet by id", "GET", "/v1/pets/12345", "GET /v1/pets/{petId} 404"},
		{"a malformed id", "GET", "/v1/pets/x%20y", "GET /v1/pets/{petId} 400"},
		{"a query string", "GET", "/v1/pets?limit=7&status=sold", "GET /v1/pets 200"},
		{"an unknown path under /v1", "GET", "/v1/a/b/c", "GET /v1/ 404"},
		{"an unknown path outside /v1", "GET", "/wp-login.php", "GET / 404"},
		{"an unclean path, redirected by net/http", "GET", "/v1//pets", "GET /v1/pets 307"},
		{"no path at all", "OPTIONS", "*", "OPTIONS unmatched 400"},
		{"a method made up", "PURGE", "/v1/pets/1", "other /v1/pets/{petId} 405"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := testkit.RequestCounts(t, testkit.Scrape(t, m.Handler()))[tt.want]
			req := httptest.NewRequest(tt.method, tt.target, nil)
			req.Header.Set("Authorization", "Bearer "+key)
			w := httptest.NewRecorder()
			s.handler.ServeHTTP(w, req)
			counts := testkit.RequestCounts(t, testkit.Scrape(t, m.Handler()))
			if counts[tt.want] != before+1 {
				t.Errorf("%s %s answered %d: count{%s} went from %d to %d, want one more; all: %v",
					tt.method, tt.target, w.Code, tt.want, before, counts[tt.want], counts)
			}
		})
	}
}

func TestMetricsAddNoAllocationToARequest(t *testing.T) {
	if testing.Short() {
		t.Skip("measures allocations of whole requests")
	}
	allocs := func(m *metrics.Metrics, target string) float64 {
		s := newTestServerWith(t, testOptions{metrics: m})
		key := s.mustCreateKey("enterprise", domain.Limits{PerMinute: 1e12, PerDay: 1e15})
		s.do("POST", "/v1/pets", key, `{"name":"Rex","categoryId":1}`)
		req := httptest.NewRequest("GET", target, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		w := &discardWriter{header: http.Header{}}
		s.handler.ServeHTTP(w, req)
		return testing.AllocsPerRun(200, func() {
			clear(w.header)
			req.Pattern = ""
			s.handler.ServeHTTP(w, req)
		})
	}
	for _, target := range []string{"/v1/pets?limit=20", "/v1/pets/1"} {
		without, with := allocs(nil, target), allocs(newMetrics(), target)
		if with != without {
			t.Errorf("GET %s: %v allocations a request with metrics, %v without", target, with, without)
		}
	}
}

func TestEveryAuthReasonHasANameAndAMessage(t *testing.T) {
	t.Parallel()
	failures := []keyring.Failure{keyring.NoHeader, keyring.NoToken, keyring.NotBearer, keyring.NotAKey, keyring.UnknownKey, keyring.RevokedKey, keyring.ExpiredKey,
		keyring.KeyProblem(domain.NewKeyToken("staging"), "production")}
	seen := map[keyring.Reason]bool{}
	for _, f := range failures {
		if f.Reason == 0 || int(f.Reason) >= len(keyring.ReasonNames) || keyring.ReasonNames[f.Reason] == "" || f.Message == "" {
			t.Errorf("failure %+v has no reason name or no message", f)
		}
		seen[f.Reason] = true
	}
	for r := keyring.Missing; r < keyring.Reasons; r++ {
		if !seen[r] {
			t.Errorf("reason %q has no failure", keyring.ReasonNames[r])
		}
	}
}

func TestAdminEndpointsAreNeverOnThePublicListener(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	s := newTestServerWith(t, testOptions{metrics: m})
	admin := metricsHandler(m)
	tests := []struct {
		path      string
		wantAdmin int
	}{
		{"/metrics", 200},
		{"/debug/pprof/", 200},
		{"/debug/pprof/heap?debug=1", 200},
		{"/debug/pprof/goroutine?debug=1", 200},
		{"/debug/pprof/profile?seconds=1", 200},
		{"/debug/pprof/cmdline", 404}, // may hold a database password
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			w := s.do("GET", tt.path, "", "")
			wantError(t, w, http.StatusNotFound, "not_found")
			aw := httptest.NewRecorder()
			admin.ServeHTTP(aw, httptest.NewRequest("GET", tt.path, nil))
			if aw.Code != tt.wantAdmin {
				t.Errorf("admin GET %s: %d, want %d", tt.path, aw.Code, tt.wantAdmin)
			}
		})
	}
}

func TestDatabaseCallsAreTimedByOperation(t *testing.T) {
	eachStore(t, func(t *testing.T, opts testOptions) {
		m := newMetrics()
		opts.metrics = m
		s := newTestServerWith(t, opts)
		key := s.mustCreateKey("pro")
		s.do("POST", "/v1/pets", key, `{"name":"Rex","categoryId":1}`)
		s.do("GET", "/readyz", "", "")
		s.do("GET", "/v1/pets", domain.NewKeyToken("production"), "")

		calls := map[string]uint64{}
		for _, metric := range testkit.Scrape(t, m.Handler())["petstore_database_call_duration_seconds"].GetMetric() {
			calls[testkit.LabelsOf(metric)["operation"]] = metric.GetHistogram().GetSampleCount()
		}
		for _, op := range []string{"CreateKey", "CreatePets", "Ping", "KeyByHash", "Usage"} {
			if calls[op] == 0 {
				t.Errorf("no petstore_database_call_duration_seconds{operation=%q}: %v", op, calls)
			}
		}
	})
}

func TestReadinessWhileDrainingIsRefusedOutsideTheRequestMetrics(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	s := newTestServerWith(t, testOptions{metrics: m})
	key := s.mustCreateKey("pro")
	s.draining.Store(true)

	w := s.do("GET", "/readyz", "", "")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"message":"the server is shutting down"`) {
		t.Fatalf("/readyz while draining: %d %s", w.Code, w.Body)
	}
	if w := s.do("GET", "/v1/pets", key, ""); w.Code != http.StatusOK {
		t.Errorf("a list while draining: %d, want 200 (requests are still served)", w.Code)
	}
	if got := testkit.RequestCounts(t, testkit.Scrape(t, m.Handler()))["GET /readyz 503"]; got != 0 {
		t.Errorf("requests counted as GET /readyz 503: %d, want 0 (a health check is not the API's)", got)
	}
}

var _ store.Storage = (*bounded.Store)(nil)

func TestGrafanaDashboardGraphsOnlyMetricsTheServerExports(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../deploy/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Title  string
		Panels []struct {
			Title   string
			Type    string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dashboard); err != nil {
		t.Fatalf("deploy/grafana-dashboard.json is not JSON: %v", err)
	}

	// Every metric the server can export, each series resolved once.
	m := newMetrics()
	m.DatabaseCall("GetPet").Since(time.Now())
	m.RedisCall("allow").Since(time.Now())
	s := newTestServerWith(t, testOptions{metrics: m})
	s.do("GET", "/v1/pets", s.mustCreateKey("free"), "")
	s.do("GET", "/v1/pets", "", "")
	exported := map[string]bool{}
	for name, f := range testkit.Scrape(t, m.Handler()) {
		exported[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			exported[name+"_bucket"], exported[name+"_count"], exported[name+"_sum"] = true, true, true
		}
	}

	metricName := regexp.MustCompile(`\b(?:petstore|go|process)_[a-z0-9_]+\b`)
	var all strings.Builder
	for _, p := range dashboard.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			names := metricName.FindAllString(target.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: %q names no metric", p.Title, target.Expr)
			}
			for _, name := range names {
				if !exported[name] {
					t.Errorf("panel %q graphs %s, which the server does not export", p.Title, name)
				}
			}
			all.WriteString(target.Expr + "\n")
		}
	}
	// What an operator opens it for.
	for what, expr := range map[string]string{
		"request rate":                 "rate(petstore_http_request_duration_seconds_count",
		"errors":                       `code=~"5.."`,
		"latency percentiles by route": "histogram_quantile(0.99, sum by (le, method, route) (rate(petstore_http_request_duration_seconds_bucket",
		"limit decisions":              "petstore_ratelimit_decisions_total",
		"fallback state":               "petstore_ratelimit_fallback",
	} {
		if !strings.Contains(all.String(), expr) {
			t.Errorf("no panel shows the %s (%s)", what, expr)
		}
	}
}

// BenchmarkMetricsOverhead is list and get through the whole handler,
// without and with metrics (compare the pairs: go test -bench
// MetricsOverhead -count 10).
func BenchmarkMetricsOverhead(b *testing.B) {
	for _, bc := range []struct{ name, target string }{
		{"list", "/v1/pets?limit=20"},
		{"get", "/v1/pets/500"},
	} {
		for _, withMetrics := range []bool{false, true} {
			name := bc.name + "/without"
			if withMetrics {
				name = bc.name + "/with"
			}
			b.Run(name, func(b *testing.B) {
				var m *metrics.Metrics
				if withMetrics {
					m = newMetrics()
				}
				s, key := benchServerWith(b, 1000, testOptions{metrics: m})
				req := httptest.NewRequest("GET", bc.target, nil)
				req.Header.Set("Authorization", "Bearer "+key)
				w := &discardWriter{header: http.Header{}}
				b.ReportAllocs()
				for b.Loop() {
					clear(w.header)
					w.status = 0
					req.Pattern = ""
					s.handler.ServeHTTP(w, req)
					if w.status != http.StatusOK {
						b.Fatalf("status %d", w.status)
					}
				}
			})
		}
	}
}

func TestRedisCallsAndTheFallbackAreMeasured(t *testing.T) {
	t.Parallel()
	proxy, redisURL := testkit.FaultProxyTo(t, testkit.RedisURL(t))
	m := newMetrics()
	s := newTestServerWith(t, testOptions{redis: true, redisURL: testkit.PatientRedisURL(t, redisURL), metrics: m})
	key := s.mustCreateKey("pro")
	fallback := func() float64 {
		return testkit.Scrape(t, m.Handler())["petstore_ratelimit_fallback"].GetMetric()[0].GetGauge().GetValue()
	}

	for range 3 {
		s.do("GET", "/v1/pets", key, "")
	}
	calls := testkit.Scrape(t, m.Handler())["petstore_redis_call_duration_seconds"]
	if calls == nil || testkit.LabelsOf(calls.GetMetric()[0])["operation"] != "limit_script" ||
		calls.GetMetric()[0].GetHistogram().GetSampleCount() < 3 {
		t.Errorf("petstore_redis_call_duration_seconds after 3 requests through Redis: %v", calls)
	}
	if v := fallback(); v != 0 {
		t.Errorf("petstore_ratelimit_fallback = %v while Redis answers, want 0", v)
	}

	proxy.Set("drop")
	s.do("GET", "/v1/pets", key, "")
	if v := fallback(); v != 1 {
		t.Errorf("petstore_ratelimit_fallback = %v while Redis is away, want 1", v)
	}
	proxy.Set("pass")
	s.clock.advance(limits.RedisProbeEvery)
	s.do("GET", "/v1/pets", key, "")
	if v := fallback(); v != 0 {
		t.Errorf("petstore_ratelimit_fallback = %v once Redis is back, want 0", v)
	}
	allowed := testkit.CounterValues(t, testkit.Scrape(t, m.Handler()), "petstore_ratelimit_decisions_total", "decision")["allowed"]
	if allowed != 5 {
		t.Errorf("ratelimit_decisions_total{decision=\"allowed\"} = %v, want the 5 requests, through Redis or not", allowed)
	}
}

func TestMetricsCountWhatEachClientWasAnswered(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, opts testOptions) {
		m := newMetrics()
		opts.metrics, opts.banAfter = m, 3
		s := newTestServerWith(t, opts)
		ctx := context.Background()
		pro := s.mustCreateKey("pro")
		free := s.mustCreateKey("free")
		revoked := s.mustCreateKey("free")
		hash := domain.HashKey(revoked)
		rk, _, err := s.store.KeyByHash(ctx, hash[:])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.store.RevokeKey(ctx, rk.ID, testActor); err != nil {
			t.Fatal(err)
		}
		terms := s.keyTerms("free")
		terms.ExpiresAt = s.clock.now().Add(-time.Second)
		_, expired := s.mustCreate(terms)
		if err := s.keys.Refresh(ctx); err != nil {
			t.Fatal(err)
		}

		// What the client saw, counted as the metrics should count it.
		answered := map[string]uint64{}
		decisions := map[string]float64{}
		send := func(method, target, route, authorization, body string, wantStatus int) {
			t.Helper()
			var header []string
			if authorization != "" {
				header = []string{"Authorization", authorization}
			}
			w := s.do(method, target, "", body, header...)
			if wantStatus != 0 && w.Code != wantStatus {
				t.Fatalf("%s %s: %d, want %d: %s", method, target, w.Code, wantStatus, w.Body)
			}
			label := method
			if !slices.Contains([]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}, method) {
				label = "other"
			}
			answered[label+" "+route+" "+strconv.Itoa(w.Code)]++
			if !strings.HasPrefix(route, "/v1") {
				return // not rate limited
			}
			switch {
			case w.Code != http.StatusTooManyRequests:
				decisions["allowed"]++
			case strings.Contains(w.Body.String(), `"temporarily_banned"`):
				decisions["banned"]++
			default:
				decisions["limited"]++
			}
		}
		bearer := func(key string) string { return "Bearer " + key }

		tests := []struct {
			name          string
			method        string
			target        string
			route         string
			authorization string
			body          string
			times         int
			wantStatus    int
		}{
			{"list", "GET", "/v1/pets", "/v1/pets", bearer(pro), "", 5, 200},
			{"list as HEAD", "HEAD", "/v1/pets", "/v1/pets", bearer(pro), "", 1, 200},
			{"create", "POST", "/v1/pets", "/v1/pets", bearer(pro), `{"name":"Rex","categoryId":1}`, 2, 201},
			{"bad limit", "GET", "/v1/pets?limit=0", "/v1/pets", bearer(pro), "", 3, 400},
			{"get", "GET", "/v1/pets/1", "/v1/pets/{petId}", bearer(pro), "", 2, 200},
			{"bad pet id", "GET", "/v1/pets/abc", "/v1/pets/{petId}", bearer(pro), "", 1, 400},
			{"unknown pet", "GET", "/v1/pets/999", "/v1/pets/{petId}", bearer(pro), "", 1, 404},
			{"method not allowed", "DELETE", "/v1/pets", "/v1/pets", bearer(pro), "", 1, 405},
			{"unknown method", "BREW", "/v1/pets", "/v1/pets", bearer(pro), "", 1, 405},
			{"unknown path", "GET", "/v1/nothing/here", "/v1/", bearer(pro), "", 1, 404},
			{"no key", "GET", "/v1/pets", "/v1/pets", "", "", 2, 401},
			{"nothing after Bearer", "GET", "/v1/pets", "/v1/pets", "Bearer ", "", 1, 401},
			{"another scheme", "GET", "/v1/pets", "/v1/pets", "Basic dXNlcjpwYXNz", "", 1, 401},
			{"not a key", "GET", "/v1/pets", "/v1/pets", "Bearer psk_live_abc", "", 1, 401},
			{"unknown key", "GET", "/v1/pets", "/v1/pets", bearer(domain.NewKeyToken("production")), "", 3, 401},
			{"revoked key", "GET", "/v1/pets/1", "/v1/pets/{petId}", bearer(revoked), "", 1, 401},
			{"staging key", "GET", "/v1/pets", "/v1/pets", bearer(domain.NewKeyToken("staging")), "", 1, 401},
			{"expired key", "GET", "/v1/pets", "/v1/pets", bearer(expired), "", 2, 401},
			{"own limits, spending nothing", "GET", "/v1/rate_limit", "/v1/rate_limit", bearer(pro), "", 2, 200},
			{"document without a key", "GET", "/v1/openapi.yaml", "/v1/openapi.yaml", "", "", 1, 200},
			{"outside /v1", "GET", "/nothing", "/", "", "", 1, 404},
			{"a Free key's minute", "GET", "/v1/pets", "/v1/pets", bearer(free), "", 60, 200},
			// Then 429 rate_limited: the first refusal and banAfter (3) more
			// during the wait; then 429 temporarily_banned.
			{"over the limit", "GET", "/v1/pets", "/v1/pets", bearer(free), "", 10, 429},
			{"own limits while banned", "GET", "/v1/rate_limit", "/v1/rate_limit", bearer(free), "", 1, 429},
		}
		for _, tt := range tests {
			for range tt.times {
				send(tt.method, tt.target, tt.route, tt.authorization, tt.body, tt.wantStatus)
			}
		}
		if decisions["limited"] != 4 || decisions["banned"] != 7 {
			t.Fatalf("the client saw %v limited and %v banned, want 4 and 7", decisions["limited"], decisions["banned"])
		}

		families := testkit.Scrape(t, m.Handler())
		got := testkit.RequestCounts(t, families)
		for series, n := range answered {
			if got[series] != n {
				t.Errorf("request_duration count{%s} = %d, want %d", series, got[series], n)
			}
		}
		for series, n := range got {
			if _, ok := answered[series]; !ok {
				t.Errorf("request_duration count{%s} = %d, and no such request was sent", series, n)
			}
		}
		if got["other /v1/pets 405"] != 1 {
			t.Errorf("a made-up method is not counted as method=\"other\": %v", got)
		}

		gotDecisions := testkit.CounterValues(t, families, "petstore_ratelimit_decisions_total", "decision")
		for _, d := range []string{"allowed", "limited", "banned"} {
			if gotDecisions[d] != decisions[d] {
				t.Errorf("ratelimit_decisions_total{decision=%q} = %v, want %v", d, gotDecisions[d], decisions[d])
			}
		}

		wantFailures := map[string]float64{
			"missing": 3, "malformed": 2, "invalid": 3, "revoked": 1, "wrong_environment": 1, "expired": 2,
		}
		gotFailures := testkit.CounterValues(t, families, "petstore_auth_failures_total", "reason")
		if len(gotFailures) != len(wantFailures) {
			t.Errorf("auth_failures_total reasons %v, want exactly %v", gotFailures, wantFailures)
		}
		var failures float64
		for reason, n := range wantFailures {
			failures += n
			if gotFailures[reason] != n {
				t.Errorf("auth_failures_total{reason=%q} = %v, want %v", reason, gotFailures[reason], n)
			}
		}
		var answered401 uint64
		for series, n := range answered {
			if strings.HasSuffix(series, " 401") {
				answered401 += n
			}
		}
		if failures != float64(answered401) {
			t.Errorf("auth failures add up to %v, and %d requests were answered 401", failures, answered401)
		}

		if pets := families["petstore_pets"]; pets == nil || pets.GetMetric()[0].GetGauge().GetValue() != 2 {
			t.Errorf("petstore_pets = %v, want the 2 pets created", pets)
		}
	})
}
