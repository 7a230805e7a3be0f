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
	"sync/atomic"
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
	opts    testOptions
	// redisPrefix is the test's own part of Redis, shared by the servers a
	// test starts on it (otherServer) and no other test.
	redisPrefix string
	// draining is what a stop signal sets under --shutdown-delay.
	draining *atomic.Bool
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
	// redis limits through Redis (PETSTORE_TEST_REDIS; the test is skipped
	// without it) instead of in process; redisURL, when set, reaches it
	// another way (through a proxy the test can cut).
	redis    bool
	redisURL string
	// wrapStore, when set, is what the server sees of the store: a test
	// may count or fail its calls.
	wrapStore func(storage) storage
	// metrics, when set, records what the server does.
	metrics *metrics
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
	if opts.wrapStore != nil {
		store = opts.wrapStore(store)
	}
	store = timeStorage(store, opts.metrics) // as serve does
	keys, err := newKeyring(context.Background(), store, opts.env, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	pets := newPetCache(store)
	if !opts.petsFromDatabase {
		if err := pets.load(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	opts.metrics.countPets(pets.size)
	s := &testServer{t: t, store: store, sqlite: sqlite, keys: keys, pets: pets, idem: newInflight(),
		clock: clock, logger: opts.logger, dbPath: path, opts: opts, draining: new(atomic.Bool)}
	if opts.redis {
		s.redisPrefix = testRedisPrefix(t)
	}
	s.restartLimiter()
	return s
}

// restartLimiter gives the server a new limiter of its kind, as a restart
// of the server does: one in process starts from the database, one on Redis
// finds there what the last one left.
func (s *testServer) restartLimiter() {
	s.t.Helper()
	if s.opts.redis {
		s.limiter = newTestRedisLimiter(s.t, s.redisPrefix, s.clock, s.store, s.opts)
	} else {
		s.limiter = newLimiter(s.clock.now, s.opts.banAfter, s.opts.banFor, s.store.Usage)
	}
	s.handler = newServer(s.opts.logger, s.opts.metrics, s.store, s.keys, s.limiter, s.pets, s.idem, s.clock.now, s.opts.trustProxy, s.draining)
}

// forEachLimiter runs test against every rate limiter: in process, and on
// Redis when PETSTORE_TEST_REDIS names one. A rule proven on one is proven
// on both.
func forEachLimiter(t *testing.T, opts testOptions, test func(t *testing.T, s *testServer)) {
	for _, kind := range []string{"in-process", "redis"} {
		t.Run(kind, func(t *testing.T) {
			o := opts
			o.redis = kind == "redis"
			test(t, newTestServerWith(t, o))
		})
	}
}

// mustCreateKey makes a key of plan (custom limits for enterprise) and
// returns its token.
func (s *testServer) mustCreateKey(plan string, lim ...limits) string {
	s.t.Helper()
	l := plans[plan]
	if len(lim) > 0 {
		l = lim[0]
	}
	_, token, err := createKey(context.Background(), s.store, s.keys.env, plan, "test", l, time.Time{})
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
