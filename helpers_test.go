package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

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

// testServer is the real handler on a real SQLite file in a temporary
// directory, or on a fresh schema of the PETSTORE_TEST_POSTGRES database,
// with a fake clock.
type testServer struct {
	t       testing.TB
	handler http.Handler
	store   storage
	sqlite  *sqliteStore // nil on PostgreSQL
	keys    *keyring
	limiter rateLimiter
	pets    *petCache
	idem    *inflight
	clock   *fakeClock
	logger  *slog.Logger
	dbPath  string
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
	if opts.env == "" {
		opts.env = "production"
	}
	if opts.banAfter == 0 {
		opts.banAfter = 10
	}
	if opts.banFor == 0 {
		opts.banFor = 15 * time.Minute
	}
	if opts.logger == nil {
		opts.logger, _ = newLogger(io.Discard, "text", "info")
	}
	clock := newFakeClock()
	var store storage
	var sqlite *sqliteStore
	path := filepath.Join(t.TempDir(), "petstore.db")
	if opts.db != "" {
		path = opts.db
	}
	if opts.postgres {
		if opts.db == "" {
			path = testPostgresURL(t)
		}
		pg, err := openPostgres(context.Background(), path, clock.now)
		if err != nil {
			t.Fatal(err)
		}
		store = pg
	} else {
		var err error
		if sqlite, err = openSQLite(context.Background(), path, true, clock.now); err != nil {
			t.Fatal(err)
		}
		store = sqlite
	}
	t.Cleanup(func() { store.Close() })
	keys, err := newKeyring(context.Background(), store, opts.env)
	if err != nil {
		t.Fatal(err)
	}
	limiter := newLimiter(clock.now, opts.banAfter, opts.banFor, store.Usage)
	pets := newPetCache(store)
	if !opts.petsFromDatabase {
		if err := pets.load(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	idem := newInflight()
	h := newServer(opts.logger, store, keys, limiter, pets, idem, clock.now, opts.trustProxy)
	return &testServer{t: t, handler: h, store: store, sqlite: sqlite, keys: keys, limiter: limiter, pets: pets, idem: idem,
		clock: clock, logger: opts.logger, dbPath: path}
}

// mustCreateKey makes a key of plan (custom limits for enterprise) and
// returns its token.
func (s *testServer) mustCreateKey(plan string, lim ...limits) string {
	s.t.Helper()
	l := plans[plan]
	if len(lim) > 0 {
		l = lim[0]
	}
	_, token, err := createKey(context.Background(), s.store, s.keys.env, plan, "test", l)
	if err != nil {
		s.t.Fatal(err)
	}
	return token
}

// do sends a request through the handler. key "" sends no Authorization.
func (s *testServer) do(method, target, key, body string, header ...string) *httptest.ResponseRecorder {
	s.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, r)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	w := httptest.NewRecorder()
	s.handler.ServeHTTP(w, req)
	return w
}

// syncBuffer collects output (a log, a process's stderr) that a test reads
// while the server writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// dbAt returns where a test's database lives: path on SQLite, or on
// PostgreSQL the URL of a fresh schema.
func (o testOptions) dbAt(t testing.TB, path string) string {
	t.Helper()
	if o.postgres {
		return testPostgresURL(t)
	}
	return path
}
