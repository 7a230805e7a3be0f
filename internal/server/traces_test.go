package server

// Traces (docs/observing.md, "Traces") as an OTLP receiver gets them over
// HTTP from a running server, its OTEL_* variables read as serve reads them.

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/logline"
	"petstore/internal/testkit"
	"petstore/internal/tracing"

	"github.com/jackc/pgx/v5"
)

// tracedOptions are opts with tracing on: every request sampled, sent to
// receiver within 50 ms.
func tracedOptions(opts testOptions, receiver *testkit.OTLP, more ...string) testOptions {
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.Endpoint(), "OTEL_TRACES_SAMPLER": "always_on",
		"OTEL_SERVICE_NAME": "petstore-under-test", "OTEL_BSP_SCHEDULE_DELAY": "50",
	}
	for i := 0; i+1 < len(more); i += 2 {
		env[more[i]] = more[i+1]
	}
	opts.getenv = func(name string) string { return env[name] }
	return opts
}

// spanNamed is the span of spans named name, failing the test without one.
func spanNamed(t *testing.T, spans []testkit.Span, name string) testkit.Span {
	t.Helper()
	s, ok := testkit.Named(spans, name)
	if !ok {
		t.Fatalf("no span named %q among %v", name, spanNames(spans))
	}
	return s
}

func spanNames(spans []testkit.Span) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name+"←"+s.ParentSpanID)
	}
	return names
}

func wantParent(t *testing.T, child, parent testkit.Span) {
	t.Helper()
	if child.ParentSpanID != parent.SpanID || child.TraceID != parent.TraceID {
		t.Errorf("span %q has parent %s in trace %s, want %q (%s in %s)", child.Name, child.ParentSpanID, child.TraceID, parent.Name, parent.SpanID, parent.TraceID)
	}
}

// A create gives one trace: the server span, the limiter's decision (and
// its Redis round trip, in a batch linked to the request), the group
// commit linked to the request, and the store call under it (with the
// wait for a pool connection on PostgreSQL).
func TestACreateIsOneTrace(t *testing.T) {
	t.Parallel()
	for _, engine := range []struct {
		name string
		opts testOptions
		more []string
	}{
		{"sqlite", testOptions{}, nil},
		{"postgres-redis", testOptions{postgres: true, redis: true}, []string{"redis round trip", "redis limit_script batch", "pool acquire"}},
	} {
		t.Run(engine.name, func(t *testing.T) {
			receiver := testkit.StartOTLP(t)
			s := newTestServerWith(t, tracedOptions(engine.opts, receiver))
			k, key := s.mustCreate(s.keyTerms("business"))
			if w := s.do("POST", "/v1/pets", key, `{"name":"Rex","categoryId":1}`); w.Code != http.StatusCreated {
				t.Fatalf("create: %d %s", w.Code, w.Body)
			}
			names := append([]string{"POST /v1/pets", "rate limit", "group commit", "CreatePets"}, engine.more...)
			all := receiver.WaitFor(10*time.Second, names...)
			server := spanNamed(t, all, "POST /v1/pets")
			spans := testkit.Trace(all, server.TraceID)
			want := map[string]string{"http.request.method": "POST", "http.response.status_code": "201", "http.route": "/v1/pets",
				"petstore.key.id": strconv.FormatInt(k.ID, 10)}
			for attr, v := range want {
				if server.Attributes[attr] != v {
					t.Errorf("server span's %s = %q, want %q", attr, server.Attributes[attr], v)
				}
			}
			if server.Kind != "SPAN_KIND_SERVER" || server.ParentSpanID != "" || server.Resource["service.name"] != "petstore-under-test" {
				t.Errorf("server span: kind %s, parent %q, service %q", server.Kind, server.ParentSpanID, server.Resource["service.name"])
			}
			limit, commit, create := spanNamed(t, spans, "rate limit"), spanNamed(t, spans, "group commit"), spanNamed(t, spans, "CreatePets")
			wantParent(t, limit, server)
			wantParent(t, commit, server)
			wantParent(t, create, commit)
			if !commit.LinksTo(server) {
				t.Errorf("the commit links to %v, not to the request it served", commit.Links)
			}
			if system := map[bool]string{false: "sqlite", true: "postgresql"}[engine.opts.postgres]; create.Attributes["db.system"] != system || create.Attributes["db.operation.name"] != "CreatePets" {
				t.Errorf("store span's attributes: %v", create.Attributes)
			}
			if !engine.opts.redis {
				return
			}
			batch := childNamed(t, spans, limit, "redis limit_script batch")
			trip := childNamed(t, spans, batch, "redis round trip")
			if !batch.LinksTo(limit) || trip.Attributes["db.system"] != "redis" {
				t.Errorf("the Redis batch links to %v; the round trip's attributes %v", batch.Links, trip.Attributes)
			}
			acquire := spanNamed(t, spans, "pool acquire")
			if parent, ok := spanByID(spans, acquire.ParentSpanID); !ok || parent.Attributes["db.system"] != "postgresql" {
				t.Errorf("the pool wait's parent is %+v, not a store call", parent)
			}
		})
	}
}

// childNamed is the span named name whose parent is parent.
func childNamed(t *testing.T, spans []testkit.Span, parent testkit.Span, name string) testkit.Span {
	t.Helper()
	for _, s := range spans {
		if s.Name == name && s.ParentSpanID == parent.SpanID {
			return s
		}
	}
	t.Fatalf("no span %q under %q among %v", name, parent.Name, spanNames(spans))
	return testkit.Span{}
}

func spanByID(spans []testkit.Span, id string) (testkit.Span, bool) {
	for _, s := range spans {
		if s.SpanID == id {
			return s, true
		}
	}
	return testkit.Span{}, false
}

// A create held up by a table another connection has locked shows the
// wait in its store span.
func TestALockedTableShowsInTheStoreSpan(t *testing.T) {
	const hold = 400 * time.Millisecond
	eachStore(t, func(t *testing.T, opts testOptions) {
		receiver := testkit.StartOTLP(t)
		s := newTestServerWith(t, tracedOptions(opts, receiver))
		key := s.mustCreateKey("business")
		unlock := lockPets(t, s)
		time.AfterFunc(hold, unlock)
		if w := s.do("POST", "/v1/pets", key, `{"name":"Rex","categoryId":1}`); w.Code != http.StatusCreated {
			t.Fatalf("create: %d %s", w.Code, w.Body)
		}
		create := spanNamed(t, receiver.WaitFor(10*time.Second, "CreatePets"), "CreatePets")
		if create.Duration() < hold-20*time.Millisecond {
			t.Errorf("the store span took %v, though the table was locked for %v", create.Duration(), hold)
		}
	})
}

// lockPets locks the pets table from a connection of its own, until
// unlock: a write transaction on SQLite, LOCK TABLE on PostgreSQL.
func lockPets(t *testing.T, s *testServer) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	if s.opts.postgres {
		conn, err := pgx.Connect(ctx, s.dbPath)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := conn.Begin(ctx)
		if err == nil {
			_, err = tx.Exec(ctx, "LOCK TABLE pets IN EXCLUSIVE MODE")
		}
		if err != nil {
			t.Fatal(err)
		}
		return func() { tx.Rollback(ctx); conn.Close(ctx) }
	}
	db, err := sql.Open("sqlite", s.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err == nil {
		_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
	}
	if err != nil {
		t.Fatal(err)
	}
	return func() { conn.ExecContext(ctx, "ROLLBACK"); conn.Close(); db.Close() }
}

// An incoming traceparent is the parent of the request's span with
// --trust-traceparent, and ignored without: a new trace starts.
func TestTraceparentIsHonouredOnlyWhenTrusted(t *testing.T) {
	t.Parallel()
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, trusted := range []bool{true, false} {
		t.Run("trusted="+strconv.FormatBool(trusted), func(t *testing.T) {
			receiver := testkit.StartOTLP(t)
			opts := tracedOptions(testOptions{}, receiver)
			opts.trustTraceparent = trusted
			s := newTestServerWith(t, opts)
			key := s.mustCreateKey("business")
			s.do("GET", "/healthz", "", "", "traceparent", "00-"+traceID+"-"+parentID+"-01")
			s.do("GET", "/v1/pets", key, "", "traceparent", "00-"+traceID+"-"+parentID+"-01", "tracestate", "vendor=1")
			spans := receiver.WaitFor(10*time.Second, "GET /v1/pets")
			if _, traced := testkit.Named(spans, "GET /healthz"); traced {
				t.Error("a health check was traced")
			}
			server := spanNamed(t, spans, "GET /v1/pets")
			honoured := server.TraceID == traceID && server.ParentSpanID == parentID
			if honoured != trusted || (!trusted && (server.TraceID == traceID || server.ParentSpanID != "")) {
				t.Errorf("trusted %v: the server span is in trace %s under %q", trusted, server.TraceID, server.ParentSpanID)
			}
		})
	}
}

// No span holds a key, an admin token, a pet's body or a query string's
// values: every attribute of every span of such a run is scanned.
func TestNoSpanHoldsASecretOrAValue(t *testing.T) {
	t.Parallel()
	receiver := testkit.StartOTLP(t)
	s := newTestServerWith(t, tracedOptions(testOptions{}, receiver))
	key := s.mustCreateKey("business")
	admin := s.mustCreateAdmin("ops", domain.AllAdminScopes)
	secrets := []string{key, admin, "Zanzibarqz", "quokka1234"}
	s.do("POST", "/v1/pets", key, `{"name":"Zanzibarqz","categoryId":1}`)
	s.do("GET", "/v1/pets?status=available&after=0&quokka1234=quokka1234", key, "")
	s.admin("GET", "/admin/v1/keys?name=quokka1234", admin, "")
	s.do("GET", "/v1/pets", "psk_live_quokka1234", "")
	spans := receiver.WaitFor(10*time.Second, "POST /v1/pets", "GET /v1/pets", "GET /admin/v1/keys")
	for _, span := range spans {
		texts := []string{span.Name}
		for k, v := range span.Attributes {
			texts = append(texts, k, v)
		}
		for k, v := range span.Resource {
			texts = append(texts, k, v)
		}
		for _, text := range texts {
			for _, secret := range secrets {
				if strings.Contains(text, secret) || strings.Contains(text, "?") {
					t.Errorf("span %q holds %q", span.Name, text)
				}
			}
		}
	}
}

// An OTLP endpoint that refuses exports (503) or is down never slows a
// request: the spans are dropped, counted in
// petstore_trace_spans_dropped_total, and the log says so once.
func TestAnEndpointDownDropsAndCountsSpans(t *testing.T) {
	t.Parallel()
	receiver := testkit.StartOTLP(t)
	var log testkit.SyncBuffer
	m := newMetrics()
	s := newTestServerWith(t, tracedOptions(testOptions{metrics: m, logger: slog.New(logline.NewHandler(&log, false, slog.LevelInfo))}, receiver))
	key := s.mustCreateKey("business")
	dropped := func() float64 {
		f := testkit.Scrape(t, m.Handler())["petstore_trace_spans_dropped_total"]
		if f == nil || len(f.Metric) != 1 {
			t.Fatal("no petstore_trace_spans_dropped_total in /metrics")
		}
		return f.Metric[0].GetCounter().GetValue()
	}
	if got := dropped(); got != 0 {
		t.Fatalf("spans dropped before any export: %v", got)
	}
	for _, down := range []func(){func() { receiver.AnswerWith(http.StatusServiceUnavailable) }, receiver.Close} {
		down()
		before := dropped()
		for i := 0; i < 3; i++ {
			start := time.Now()
			if w := s.do("POST", "/v1/pets", key, `{"name":"Rex","categoryId":1}`); w.Code != http.StatusCreated {
				t.Fatalf("create with the endpoint down: %d %s", w.Code, w.Body)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("a create took %v with the endpoint down", took)
			}
			time.Sleep(100 * time.Millisecond) // each in an export of its own
		}
		testkit.Eventually(t, 10*time.Second, "the dropped spans counted", func() bool { return dropped() >= before+3*3 })
	}
	if n := strings.Count(log.String(), "traces do not reach the OTLP endpoint"); n != 1 {
		t.Errorf("the log says %d times that traces are dropped, want once:\n%s", n, log.String())
	}
}

// A sampled request's latency is an exemplar holding its trace id, in
// the OpenMetrics exposition of /metrics.
func TestASampledRequestIsAnExemplar(t *testing.T) {
	t.Parallel()
	receiver := testkit.StartOTLP(t)
	m := newMetrics()
	s := newTestServerWith(t, tracedOptions(testOptions{metrics: m}, receiver))
	key := s.mustCreateKey("business")
	s.do("GET", "/v1/pets", key, "")
	server := spanNamed(t, receiver.WaitFor(10*time.Second, "GET /v1/pets"), "GET /v1/pets")
	w, r := httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil)
	r.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	m.Handler().ServeHTTP(w, r)
	if !strings.Contains(w.Body.String(), `trace_id="`+server.TraceID+`"`) {
		t.Errorf("no exemplar with trace_id %s in the OpenMetrics exposition (Content-Type %s)", server.TraceID, w.Header().Get("Content-Type"))
	}
}

// loggedRequest is a request through logRequests alone, traced by tr
// (nil: tracing off), its handler told the context it got.
func loggedRequest(t testing.TB, tr *tracing.Tracer, got func(context.Context)) (http.Handler, *http.Request, *discardWriter) {
	logger, _ := NewLogger(io.Discard, "json", "info")
	h := chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got(r.Context())
		httpapi.WriteBody(w, http.StatusOK, []byte("{}\n"))
	}), httpapi.LogRequests(logger, nil, tr))
	r := httptest.NewRequest("GET", "/v1/pets", nil)
	r.Header.Set("X-Request-Id", "client-chosen")
	return h, r, &discardWriter{header: http.Header{}}
}

func startTracer(t testing.TB, sampler string) *tracing.Tracer {
	c, err := tracing.FromEnv(func(name string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_SAMPLER": sampler}[name]
	})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tracing.Start(c, tracing.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Shutdown() })
	return tr
}

// Tracing off or a request unsampled, the steps get the request's own
// context: no WithContext, and no span for the store, the limiter or the
// batches to find; a sampled request's context carries its span.
func TestOnlyASampledRequestGetsAContextOfItsOwn(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		tr   *tracing.Tracer
		own  bool
	}{
		{"tracing off", nil, false},
		{"unsampled", startTracer(t, "always_off"), false},
		{"sampled", startTracer(t, "always_on"), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var seen context.Context
			var traced bool
			h, r, w := loggedRequest(t, tt.tr, func(ctx context.Context) {
				seen = ctx
				_, span := tracing.Child(ctx, "store call")
				traced = span.On()
				span.End()
			})
			h.ServeHTTP(w, r)
			if own := seen != r.Context(); own != tt.own {
				t.Errorf("the handler's context is a new one: %v, want %v", own, tt.own)
			}
			if traced != tt.own {
				t.Errorf("a store call under it is traced: %v, want %v", traced, tt.own)
			}
		})
	}
}

// BenchmarkARequestsRecord is what logRequests costs a request: with
// tracing off it allocates what it did before tracing (its one record,
// TestARequestsRecordCostsNoAllocation), and so does an unsampled request's
// record beyond the sampler's decision.
func BenchmarkARequestsRecord(b *testing.B) {
	for _, bb := range []struct {
		name    string
		sampler string
	}{{"tracing off", ""}, {"unsampled", "always_off"}, {"sampled", "always_on"}} {
		b.Run(bb.name, func(b *testing.B) {
			var tr *tracing.Tracer
			if bb.sampler != "" {
				tr = startTracer(b, bb.sampler)
			}
			h, r, w := loggedRequest(b, tr, func(context.Context) {})
			b.ReportAllocs()
			for b.Loop() {
				clear(w.header)
				h.ServeHTTP(w, r)
			}
		})
	}
}
