// Package servertest starts the server serve runs (server.New) for the
// tests of any package: on a real SQLite file in a temporary directory or
// on a fresh schema of the PETSTORE_TEST_POSTGRES database, with a fake
// clock, and sends it requests through its handlers. Only tests import it.
package servertest

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
	"sync"
	"testing"
	"time"

	"petstore/internal/cli"
	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/logline"
	"petstore/internal/manage"
	"petstore/internal/metrics"
	"petstore/internal/server"
	"petstore/internal/store"
	"petstore/internal/testkit"
	"petstore/internal/tracing"
)

// Actor is who makes the changes to keys that tests make through the
// store, for their audit events.
const Actor = "tester@test"

// Clock is the one clock of a test: the limiter, the store and the
// idempotency window read it, and the test moves it.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock is a clock at a fixed time.
func NewClock() *Clock {
	return &Clock{t: time.Date(2026, time.March, 10, 12, 0, 0, 0, time.UTC)}
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Options are what a test asks of its server; the zero value is a
// production server on a new SQLite file, limiting in process.
type Options struct {
	Env        string
	TrustProxy bool
	BanAfter   int
	BanFor     time.Duration
	Logger     *slog.Logger
	// PetsFromDatabase leaves the copy of the pets empty: reads go to the
	// database, as while the copy is still being made after a start
	// (LoadPets fills it).
	PetsFromDatabase bool
	// Postgres puts the server on PostgreSQL (reads always go to the
	// database there); the test is skipped without PETSTORE_TEST_POSTGRES.
	Postgres bool
	// DB, when set, is an existing database to serve instead of a fresh one.
	DB string
	// Redis limits through the tests' Redis instead of in process.
	Redis bool
	// Metrics, when set, records what the server does.
	Metrics *metrics.Metrics
	// DBTimeout is --db-timeout; 0: its default.
	DBTimeout time.Duration
	// WebhookAllowPrivate is --webhook-allow-private: webhooks may go to
	// the test's receivers on loopback.
	WebhookAllowPrivate bool
	// AdminHosts is --admin-host.
	AdminHosts []string
	// WrapStore, when set, is what the server sees of the store: a test
	// may count or fail its calls.
	WrapStore func(store.Storage) store.Storage
	// Getenv, when set, is the environment the server's OTEL_* variables
	// are read from, as serve reads them (nil: none, tracing off); a test
	// passes it rather than set the process's, so that tests run in parallel.
	Getenv func(string) string
	// TrustTraceparent is --trust-traceparent.
	TrustTraceparent bool
}

// Server is a running server of a test.
type Server struct {
	*server.App
	T      testing.TB
	Clock  *Clock
	DBPath string // the database it serves: a file, or PostgreSQL's URL
	Env    string
	Cfg    server.Config
	// RedisPrefix is the test's own part of Redis (with Options.Redis),
	// shared by the servers it starts on it and no other test.
	RedisPrefix string
	// SQLite and PG are the engine under the server (the other nil), for
	// a test that reads what it wrote below the store's interfaces.
	SQLite *store.SQLite
	PG     *store.Postgres
	deps   server.Deps
	opts   Options
}

// RootFiles are the files the root embeds and passes to the wiring
// (server.Deps.Files), read from the source tree: the API documents,
// webui/ and console/.
func RootFiles(t testing.TB) fs.FS {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return os.DirFS(dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// Start builds the server opts ask for, with its copy of the pets loaded,
// closed when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	opts = opts.withDefaults()
	s := &Server{T: t, Clock: NewClock(), Env: opts.Env, opts: opts}
	s.Cfg = opts.config(t)
	s.DBPath = s.Cfg.DB
	s.deps = server.Deps{Now: s.Clock.Now, Logger: opts.Logger, Metrics: opts.Metrics, Files: RootFiles(t), ScriptNow: s.Clock.Now,
		WrapStore: func(st store.Storage) store.Storage {
			s.SQLite, _ = st.(*store.SQLite)
			s.PG, _ = st.(*store.Postgres)
			if opts.WrapStore != nil {
				return opts.WrapStore(st)
			}
			return st
		}}
	if opts.Redis {
		s.deps.RedisPrefix = testkit.RedisPrefix(t)
		s.Cfg.Redis = testkit.PatientRedisURL(t, testkit.RedisURL(t))
	}
	s.RedisPrefix = s.deps.RedisPrefix
	s.App = s.build()
	return s
}

// build is a new App of s's configuration, its pets loaded (unless
// PetsFromDatabase), closed when the test ends.
func (s *Server) build() *server.App {
	s.T.Helper()
	a, err := server.New(context.Background(), s.Cfg, s.deps)
	if err != nil {
		s.T.Fatal(err)
	}
	s.T.Cleanup(func() { a.Close() })
	if s.opts.PetsFromDatabase {
		return a
	}
	if err := a.LoadPets(context.Background()); err != nil {
		s.T.Fatal(err)
	}
	return a
}

// AnotherServer is a second server on the same database (and Redis), as a
// second process behind a load balancer: its own keys, limiter and copy
// of the pets, the same clock.
func (s *Server) AnotherServer() *Server {
	s.T.Helper()
	other := *s
	other.deps.WrapStore = nil
	other.App = other.build()
	other.SQLite, other.PG = s.SQLite, s.PG
	return &other
}

// ReadingFromDatabase is a second server on the same database whose copy
// of the pets stays empty: its reads go to the database, as while the copy
// is still being made after a start.
func (s *Server) ReadingFromDatabase() *Server {
	s.T.Helper()
	other := *s
	other.deps.WrapStore = nil
	other.opts.PetsFromDatabase = true
	other.App = other.build()
	return &other
}

// ForEachLimiter runs test against every rate limiter: in process, and on
// the tests' Redis. A rule proven on one is proven on both.
func ForEachLimiter(t *testing.T, opts Options, test func(t *testing.T, s *Server)) {
	for _, kind := range []string{"in-process", "redis"} {
		t.Run(kind, func(t *testing.T) {
			o := opts
			o.Redis = kind == "redis"
			test(t, Start(t, o))
		})
	}
}

// NewMetrics are a test server's metrics.
func NewMetrics() *metrics.Metrics {
	return server.NewMetrics(server.ReadBuildInfo().Metrics())
}

// ReadRootFile is a file of the module's root, such as admin-openapi.yaml.
func ReadRootFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := fs.ReadFile(RootFiles(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (o Options) withDefaults() Options {
	o.Env = cmp.Or(o.Env, "production")
	o.BanAfter = cmp.Or(o.BanAfter, 10)
	o.BanFor = cmp.Or(o.BanFor, 15*time.Minute)
	o.DBTimeout = cmp.Or(o.DBTimeout, server.DefaultDBTimeout)
	if o.Logger == nil {
		o.Logger = slog.New(logline.NewHandler(io.Discard, false, slog.LevelInfo))
	}
	return o
}

// config is the command line of serve for o: a new database in a
// temporary directory or a fresh PostgreSQL schema, unless o names one.
func (o Options) config(t testing.TB) server.Config {
	db := o.DB
	if db == "" {
		db = o.DBAt(t, filepath.Join(t.TempDir(), "petstore.db"))
	}
	cfg := server.Config{DBFlags: cli.DBFlags{Env: o.Env, DB: db}, TrustProxy: o.TrustProxy, BanAfter: o.BanAfter, BanFor: o.BanFor,
		DBTimeout: o.DBTimeout, WebhookAllowPrivate: o.WebhookAllowPrivate, AdminHosts: o.AdminHosts, TrustTraceparent: o.TrustTraceparent}
	if o.Getenv != nil {
		var err error
		if cfg.Tracing, err = tracing.FromEnv(o.Getenv); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// DBAt returns where a test's database lives: path on SQLite, or on
// PostgreSQL the URL of a schema of its own, new or emptied
// (testkit.ServerPostgresURL).
func (o Options) DBAt(t testing.TB, path string) string {
	t.Helper()
	if o.Postgres {
		return testkit.ServerPostgresURL(t)
	}
	return path
}

// EachStore runs test once on SQLite and once on PostgreSQL: the contract
// holds on both.
func EachStore(t *testing.T, test func(t *testing.T, opts Options)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { test(t, Options{}) })
	t.Run("postgres", func(t *testing.T) { test(t, Options{Postgres: true}) })
}

// EachStoreWithKey runs test on SQLite and on PostgreSQL, each time with a
// new server and a key of plan.
func EachStoreWithKey(t *testing.T, plan string, test func(t *testing.T, s *Server, key string)) {
	t.Helper()
	EachStore(t, func(t *testing.T, opts Options) {
		s := Start(t, opts)
		test(t, s, s.MustCreateKey(plan))
	})
}

// EachStoreInDir runs test on SQLite and on PostgreSQL, each time with a
// new directory to work in and a new database: a file in it, or a fresh
// PostgreSQL schema.
func EachStoreInDir(t *testing.T, test func(t *testing.T, dir, db string)) {
	t.Helper()
	EachStore(t, func(t *testing.T, opts Options) {
		dir := t.TempDir()
		test(t, dir, opts.DBAt(t, filepath.Join(dir, "petstore.db")))
	})
}

// MustCreateKey makes a key of plan (custom limits for enterprise) with
// every scope and returns its token.
func (s *Server) MustCreateKey(plan string, lim ...domain.Limits) string {
	s.T.Helper()
	_, token := s.MustCreate(s.KeyTerms(plan, lim...))
	return token
}

// KeyTerms are the terms of a key named test of plan (custom limits for
// enterprise), with every scope, on the server's environment.
func (s *Server) KeyTerms(plan string, lim ...domain.Limits) domain.Key {
	l := domain.Plans[plan]
	if len(lim) > 0 {
		l = lim[0]
	}
	return domain.Key{Env: s.Env, Name: "test", Plan: plan, PerMinute: l.PerMinute, PerDay: l.PerDay, Scopes: domain.AllScopes}
}

// MustCreate stores a key on terms and returns it with its token.
func (s *Server) MustCreate(terms domain.Key) (domain.Key, string) {
	s.T.Helper()
	k, token, err := manage.CreateKey(context.Background(), s.Store(), terms, Actor)
	if err != nil {
		s.T.Fatal(err)
	}
	return k, token
}

// MustCreateAdmin makes an admin token named name holding scopes and
// returns it.
func (s *Server) MustCreateAdmin(name string, scopes domain.ScopeSet) string {
	s.T.Helper()
	token := domain.NewSecret(domain.AdminPrefixes[s.Env])
	hash := domain.HashKey(token)
	if _, err := s.Store().CreateAdminToken(context.Background(), domain.AdminToken{Hash: hash[:], Name: name, Scopes: scopes, Env: s.Env}, Actor); err != nil {
		s.T.Fatal(err)
	}
	return token
}

// Do sends a request through the public handler. key "" sends no
// Authorization.
func (s *Server) Do(method, target, key, body string, header ...string) *httptest.ResponseRecorder {
	s.T.Helper()
	return Send(s.Handler(), method, target, key, body, header...)
}

// Admin sends a request to the admin listener's handler, with token as its
// bearer credential ("" sends none), as a client on its host does.
func (s *Server) Admin(method, target, token, body string, header ...string) *httptest.ResponseRecorder {
	s.T.Helper()
	return Send(OnAdminHost(s.AdminHandler()), method, target, token, body, header...)
}

// Send sends a request through h and returns what it answered (as
// testkit.Dress makes it).
func Send(h http.Handler, method, target, key, body string, header ...string) *httptest.ResponseRecorder {
	req := testkit.Dress(httptest.NewRequest(method, target, testkit.BodyOf(body)), key, body, header)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// OnAdminHost is h with each request sent to Host localhost:9090, a name
// the admin listener answers to (httptest's requests have example.com).
func OnAdminHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Host = "localhost:9090"
		h.ServeHTTP(w, r)
	})
}

// WantError fails unless w is an answer in the Error shape
// (testkit.WantError) whose HTTP status is also the one the error table
// (httpapi.CodeStatus) gives its code. It returns the code.
func WantError(t testing.TB, w *httptest.ResponseRecorder, status int, code string, mentions ...string) string {
	t.Helper()
	got := testkit.WantError(t, w, status, code, mentions...)
	if httpapi.CodeStatus[got] != w.Code {
		t.Errorf("code %q is HTTP %d by the error table, answered %d", got, httpapi.CodeStatus[got], w.Code)
	}
	return got
}
