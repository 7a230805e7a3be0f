package server

import (
	"cmp"
	"context"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"petstore/internal/cli"
	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/logline"
	"petstore/internal/manage"
	"petstore/internal/metrics"
	"petstore/internal/store"
	"petstore/internal/testkit"
	"petstore/internal/tracing"
)

// The files the root embeds and passes to the wiring (Deps.Files), read
// from the source tree: the API documents, webui/ and console/.
var (
	rootFiles        = os.DirFS("../..")
	openapiYAML      = mustReadRoot("openapi.yaml")
	adminOpenAPIYAML = mustReadRoot("admin-openapi.yaml")
	docsFiles        = rootFiles
	consoleFiles     = rootFiles
)

func mustReadRoot(name string) []byte {
	b, err := fs.ReadFile(rootFiles, name)
	if err != nil {
		panic(err)
	}
	return b
}

// newMetrics are a test server's metrics.
func newMetrics() *metrics.Metrics {
	return NewMetrics(ReadBuildInfo().Metrics())
}

// fakeClock is the one clock of a test: the limiter, the store and the
// idempotency window read it, and the test moves it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, time.March, 10, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testServer is the server serve runs (newApp), on a real SQLite file in
// a temporary directory or on a fresh schema of the PETSTORE_TEST_POSTGRES
// database, with a fake clock.
type testServer struct {
	*App
	t      testing.TB
	sqlite *store.SQLite   // nil on PostgreSQL
	pg     *store.Postgres // nil on SQLite
	// wrapped is the store under the deadline and the timing: the engine,
	// or what opts.wrapStore made of it.
	wrapped store.Storage
	clock   *fakeClock
	dbPath  string
	opts    testOptions
	// cfg and deps are what the app was built from, as serve's flags and
	// the test's clock.
	cfg  Config
	deps Deps
	// redisPrefix is the test's own part of Redis, shared by the servers a
	// test starts on it (otherServer) and no other test.
	redisPrefix string
}

type testOptions struct {
	env        string
	trustProxy bool
	banAfter   int
	banFor     time.Duration
	logger     *slog.Logger
	// petsFromDatabase keeps reads on SQLite, as while the in-memory copy
	// of the pets is still being made after a start.
	petsFromDatabase bool
	// postgres puts the server on PostgreSQL (reads always go to the
	// database there); the test is skipped without PETSTORE_TEST_POSTGRES.
	postgres bool
	// db, when set, is an existing database to serve instead of a fresh one.
	db string
	// redis limits through the tests' Redis (testkit.PatientRedisURL; the
	// test is skipped without one) instead of in process; redisURL, when
	// set, reaches it another way (through a proxy the test can cut).
	redis    bool
	redisURL string
	// wrapStore, when set, is what the server sees of the store: a test
	// may count or fail its calls.
	wrapStore func(store.Storage) store.Storage
	// metrics, when set, records what the server does.
	metrics *metrics.Metrics
	// dbTimeout is --db-timeout; 0: its default.
	dbTimeout time.Duration
	// webhookAllowPrivate is --webhook-allow-private: webhooks may go to
	// the test's receivers on loopback.
	webhookAllowPrivate bool
	// getenv, when set, is the environment the OTEL_* variables are read
	// from, as serve reads them; trustTraceparent is --trust-traceparent.
	getenv           func(string) string
	trustTraceparent bool
}

// eachStore runs test once on SQLite and once on PostgreSQL: the contract
// holds on both.
func eachStore(t *testing.T, test func(t *testing.T, opts testOptions)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { test(t, testOptions{}) })
	t.Run("postgres", func(t *testing.T) { test(t, testOptions{postgres: true}) })
}

func newTestServer(t testing.TB) *testServer {
	return newTestServerWith(t, testOptions{})
}

func newTestServerWith(t testing.TB, opts testOptions) *testServer {
	t.Helper()
	s := &testServer{t: t, clock: newFakeClock(), opts: opts.withDefaults()}
	s.cfg = s.opts.Config(t)
	s.dbPath = s.cfg.DB
	if opts.redis {
		s.redisPrefix = testkit.RedisPrefix(t)
		s.cfg.Redis = cmp.Or(opts.redisURL, testkit.PatientRedisURL(t, testkit.RedisURL(t)))
	}
	s.deps = Deps{Now: s.clock.now, Logger: s.opts.logger, Metrics: opts.metrics, Files: rootFiles,
		RedisPrefix: s.redisPrefix, ScriptNow: s.clock.now,
		WrapStore: func(st store.Storage) store.Storage {
			s.sqlite, _ = st.(*store.SQLite)
			s.pg, _ = st.(*store.Postgres)
			s.wrapped = st
			if opts.wrapStore != nil {
				s.wrapped = opts.wrapStore(st)
			}
			return s.wrapped
		}}
	a, err := New(context.Background(), s.cfg, s.deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	s.App = a
	if !opts.petsFromDatabase {
		if err := s.pets.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func (o testOptions) withDefaults() testOptions {
	o.env = cmp.Or(o.env, "production")
	o.banAfter = cmp.Or(o.banAfter, 10)
	o.banFor = cmp.Or(o.banFor, 15*time.Minute)
	o.dbTimeout = cmp.Or(o.dbTimeout, DefaultDBTimeout)
	if o.logger == nil {
		o.logger = slog.New(logline.NewHandler(io.Discard, false, slog.LevelInfo))
	}
	return o
}

// Config is the command line of serve for o: a new database in a
// temporary directory or a fresh PostgreSQL schema, unless o names one.
func (o testOptions) Config(t testing.TB) Config {
	db := o.db
	if db == "" {
		db = o.dbAt(t, filepath.Join(t.TempDir(), "petstore.db"))
	}
	cfg := Config{DBFlags: cli.DBFlags{Env: o.env, DB: db}, TrustProxy: o.trustProxy, BanAfter: o.banAfter, BanFor: o.banFor, DBTimeout: o.dbTimeout,
		WebhookAllowPrivate: o.webhookAllowPrivate, TrustTraceparent: o.trustTraceparent}
	if o.getenv != nil {
		var err error
		if cfg.Tracing, err = tracing.FromEnv(o.getenv); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// restartLimiter gives the server a new limiter of its kind, as a restart
// of the server does (App.RestartLimiter). The store, keys and pets stay.
func (s *testServer) restartLimiter() {
	s.t.Helper()
	restarted, stop, err := s.RestartLimiter(context.Background(), s.cfg, s.deps)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { stop() })
	s.App = restarted
}

// otherServer is a second server on the same database and the same Redis,
// as behind a load balancer: the same store, keys and pets, a limiter of
// its own.
func (s *testServer) otherServer() *testServer {
	other := *s
	other.restartLimiter()
	return &other
}

// flushAudit writes the events the server recorded, as its flush every
// usageFlushEvery does.
func (s *testServer) flushAudit() {
	s.t.Helper()
	if err := s.startedBans.Flush(context.Background(), s.store.AddBans); err != nil {
		s.t.Fatal(err)
	}
}

// forEachLimiter runs test against every rate limiter: in process, and on
// the tests' Redis (testRedisURL). A rule proven on one is proven on both.
func forEachLimiter(t *testing.T, opts testOptions, test func(t *testing.T, s *testServer)) {
	for _, kind := range []string{"in-process", "redis"} {
		t.Run(kind, func(t *testing.T) {
			o := opts
			o.redis = kind == "redis"
			test(t, newTestServerWith(t, o))
		})
	}
}

// testActor is who makes the changes to keys that tests make through the
// store, for their audit events.
const testActor = "tester@test"

// mustCreateKey makes a key of plan (custom limits for enterprise) with
// every scope and returns its token.
func (s *testServer) mustCreateKey(plan string, lim ...domain.Limits) string {
	s.t.Helper()
	_, token := s.mustCreate(s.keyTerms(plan, lim...))
	return token
}

// keyTerms are the terms of a key named test of plan (custom limits for
// enterprise), with every scope, on the server's environment.
func (s *testServer) keyTerms(plan string, lim ...domain.Limits) domain.Key {
	l := domain.Plans[plan]
	if len(lim) > 0 {
		l = lim[0]
	}
	return domain.Key{Env: s.env, Name: "test", Plan: plan, PerMinute: l.PerMinute, PerDay: l.PerDay, Scopes: domain.AllScopes}
}

// mustCreate stores a key on terms and returns it with its token.
func (s *testServer) mustCreate(terms domain.Key) (domain.Key, string) {
	s.t.Helper()
	k, token, err := manage.CreateKey(context.Background(), s.store, terms, testActor)
	if err != nil {
		s.t.Fatal(err)
	}
	return k, token
}

// do sends a request through the handler. key "" sends no Authorization.
func (s *testServer) do(method, target, key, body string, header ...string) *httptest.ResponseRecorder {
	s.t.Helper()
	return s.send(s.handler, method, target, key, body, header...)
}

// admin sends a request to the admin listener's handler, with token as its
// bearer credential ("" sends none), as a client on its host does.
func (s *testServer) admin(method, target, token, body string, header ...string) *httptest.ResponseRecorder {
	s.t.Helper()
	return s.send(onAdminHost(s.adminHandler), method, target, token, body, header...)
}

// onAdminHost is h with each request sent to Host localhost:9090, a name
// the admin listener answers to (httptest's requests have example.com).
func onAdminHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Host = "localhost:9090"
		h.ServeHTTP(w, r)
	})
}

// dbAt returns where a test's database lives: path on SQLite, or on
// PostgreSQL the URL of a schema of its own, new or emptied
// (testkit.ServerPostgresURL).
func (o testOptions) dbAt(t testing.TB, path string) string {
	t.Helper()
	if o.postgres {
		return testkit.ServerPostgresURL(t)
	}
	return path
}

// mustCreateAdmin makes an admin token named name holding scopes and
// returns it.
func (s *testServer) mustCreateAdmin(name string, scopes domain.ScopeSet) string {
	s.t.Helper()
	token := domain.NewSecret(domain.AdminPrefixes[s.cfg.Env])
	hash := domain.HashKey(token)
	if _, err := s.store.CreateAdminToken(context.Background(), domain.AdminToken{Hash: hash[:], Name: name, Scopes: scopes, Env: s.cfg.Env}, testActor); err != nil {
		s.t.Fatal(err)
	}
	return token
}

// anotherServer is a second server on the same database (and Redis), as a
// second process behind a load balancer: its own keys, limiter and copy
// of the pets, the same clock.
func (s *testServer) anotherServer() *testServer {
	s.t.Helper()
	deps := s.deps
	deps.WrapStore = nil
	a, err := New(context.Background(), s.cfg, deps)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { a.Close() })
	if err := a.pets.Load(context.Background()); err != nil {
		s.t.Fatal(err)
	}
	other := *s
	other.App = a
	return &other
}

// flushUsage writes the usage history the server counted, as its flush
// every usageFlushEvery does.
func (s *testServer) flushUsage() {
	s.t.Helper()
	if err := s.keys.FlushUsage(context.Background(), s.store.AddUsageHistory); err != nil {
		s.t.Fatal(err)
	}
}

// auditPages are the events of the pages from first on, each page's Link
// followed to the next.
func auditPages(t *testing.T, s *testServer, admin, first string) []manage.AuditJSON {
	t.Helper()
	var events []manage.AuditJSON
	for next := first; next != ""; {
		w := s.admin("GET", next, admin, "")
		var page []manage.AuditJSON
		testkit.DecodeJSON(t, w, &page)
		events = append(events, page...)
		next = ""
		if link := w.Header().Get("Link"); link != "" {
			next = strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
		}
	}
	return events
}

// roll rolls key id as keys roll does, and has the server reload its keys
// as it does twice a second. It returns the old key, the new one and the
// new token.
func (s *testServer) roll(id int64, overlap time.Duration) (old, rolled domain.Key, token string) {
	s.t.Helper()
	old, rolled, token, err := s.tryRoll(id, overlap)
	if err != nil {
		s.t.Fatalf("roll key %d: %v", id, err)
	}
	return old, rolled, token
}

func (s *testServer) tryRoll(id int64, overlap time.Duration) (old, rolled domain.Key, token string, err error) {
	ctx := context.Background()
	token = domain.NewKeyToken(s.env)
	hash := domain.HashKey(token)
	old, rolled, err = s.store.RollKey(ctx, id, hash[:], overlap, testActor)
	if err != nil {
		return old, rolled, "", err
	}
	if err := s.keys.Refresh(ctx); err != nil {
		s.t.Fatal(err)
	}
	return old, rolled, token, nil
}

// rateLimit asks GET /v1/rate_limit and checks that its headers describe
// the window of its body with fewer requests left.
func (s *testServer) rateLimit(t *testing.T, key string) testkit.RateLimitBody {
	t.Helper()
	body, _ := s.rateLimitAnswer(t, key)
	return body
}

func (s *testServer) rateLimitAnswer(t *testing.T, key string) (testkit.RateLimitBody, *httptest.ResponseRecorder) {
	t.Helper()
	w := s.do("GET", "/v1/rate_limit", key, "")
	return testkit.RateLimitOf(t, w), w
}

// migrationsOf is one engine's SQL of each migration, in order.
func migrationsOf(engine func(store.Migration) string) []string {
	var sqls []string
	for _, m := range store.Migrations {
		sqls = append(sqls, engine(m))
	}
	return sqls
}

// webhookServer is a test server whose webhooks may go to the test's
// receivers on loopback.
func webhookServer(t *testing.T, opts testOptions) *testServer {
	t.Helper()
	opts.webhookAllowPrivate = true
	return newTestServerWith(t, opts)
}

// addEndpoint adds an endpoint for rc taking events (none: all), and has
// rc trust its secret.
func (s *testServer) addEndpoint(rc *testkit.Receiver, events ...string) domain.WebhookEndpoint {
	s.t.Helper()
	terms, err := manage.NewEndpointTerms(rc.URL(), events)
	if err != nil {
		s.t.Fatal(err)
	}
	e, err := s.store.AddWebhookEndpoint(context.Background(), terms, testActor, s.opts.env)
	if err != nil {
		s.t.Fatal(err)
	}
	rc.Trust(e.Secret)
	return e
}

// deliverDue makes the attempts that are due now, as the worker's next
// rounds do, and waits for them.
func (s *testServer) deliverDue() {
	for {
		var attempts sync.WaitGroup
		n := s.webhooks.Dispatch(context.Background(), &attempts)
		attempts.Wait()
		if n == 0 {
			return
		}
	}
}

// deliveryOf is the one delivery of event id.
func (s *testServer) deliveryOf(eventID string) domain.WebhookDelivery {
	s.t.Helper()
	ds, err := s.store.WebhookDeliveries(context.Background(), domain.DeliveryFilter{EventID: eventID})
	if err != nil || len(ds) != 1 {
		s.t.Fatalf("deliveries of %s: %+v, %v", eventID, ds, err)
	}
	return ds[0]
}

// wantError fails unless w is an answer in the Error shape
// (testkit.WantError) whose HTTP status is also the one the error table
// (httpapi.CodeStatus) gives its code. It returns the code.
func wantError(t testing.TB, w *httptest.ResponseRecorder, status int, code string, mentions ...string) string {
	t.Helper()
	got := testkit.WantError(t, w, status, code, mentions...)
	if httpapi.CodeStatus[got] != w.Code {
		t.Errorf("code %q is HTTP %d by the error table, answered %d", got, httpapi.CodeStatus[got], w.Code)
	}
	return got
}
