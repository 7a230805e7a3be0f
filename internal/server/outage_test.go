package server

// The database away or stalled (docs/production.md, "When the database stalls"): what needs it
// answers 503 unavailable with a Retry-After within --db-timeout, nothing
// acknowledged is lost or doubled, and the server heals by itself. The
// tests run with a short deadline, so that they stay short.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/metrics"
	"petstore/internal/petcopy"
	"petstore/internal/store"
	"petstore/internal/testkit"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// wantUnavailableInTime fails unless w, answered took after it was sent, is
// a 503 unavailable with a Retry-After, within the deadline and its margin.
func wantUnavailableInTime(t *testing.T, what string, w *httptest.ResponseRecorder, took time.Duration) {
	t.Helper()
	wantError(t, w, http.StatusServiceUnavailable, httpapi.CodeUnavailable)
	if w.Header().Get("Retry-After") != "1" {
		t.Errorf("%s: Retry-After %q, want 1", what, w.Header().Get("Retry-After"))
	}
	if took > testkit.DBTimeout+testkit.DeadlineMargin {
		t.Errorf("%s answered after %v, want within %v of the %v deadline", what, took.Round(time.Millisecond), testkit.DeadlineMargin, testkit.DBTimeout)
	}
}

// timedDo is s.do, with how long it took.
func timedDo(s *testServer, method, target, key, body string, header ...string) (*httptest.ResponseRecorder, time.Duration) {
	s.t.Helper()
	start := time.Now()
	w := s.do(method, target, key, body, header...)
	return w, time.Since(start)
}

// Another process holding SQLite's write lock past the deadline: creates
// answer 503 within it (not after busy_timeout), reads go on from memory
// and from the file, and once the lock is let go creates work again, the
// 503s having stored nothing.
func TestSQLiteWriteLockHeldPastTheDeadlineAnswers503InTime(t *testing.T) {
	s := newTestServerWith(t, testOptions{dbTimeout: testkit.DBTimeout})
	key := s.mustCreateKey("business")
	before := testkit.AddPets(s.t, s.do, key, "available", "sold")

	release := testkit.HoldWriteLock(t, s.dbPath)
	for _, tc := range []struct {
		name   string
		header []string
	}{
		{"a create", nil},
		{"a create with an Idempotency-Key", []string{"Idempotency-Key", "locked-1"}},
	} {
		w, took := timedDo(s, "POST", "/v1/pets", key, `{"name":"Locked out","categoryId":1}`, tc.header...)
		wantUnavailableInTime(t, tc.name+" while the write lock is held", w, took)
	}
	for _, target := range []string{"/v1/pets", "/v1/pets?status=sold", "/v1/pets/1"} {
		if w := s.do("GET", target, key, ""); w.Code != http.StatusOK {
			t.Errorf("GET %s while the write lock is held: %d %s, want 200", target, w.Code, w.Body)
		}
	}

	release()
	w := s.do("POST", "/v1/pets", key, `{"name":"Locked out","categoryId":1}`, "Idempotency-Key", "locked-1")
	if w.Code != http.StatusCreated {
		t.Fatalf("the retry once the lock is let go: %d %s, want 201", w.Code, w.Body)
	}
	after := testkit.ReadPet(t, w.Body.Bytes())
	listed := testkit.ReadPets(t, s.do("GET", "/v1/pets?limit=100", key, ""))
	if got, want := testkit.PetIDs(listed), append(testkit.PetIDs(before), after.ID); !slices.Equal(got, want) {
		t.Errorf("pets after the lock: %v, want %v (the 503s stored nothing)", got, want)
	}
}

// holdPetsLock locks the pets table of the PostgreSQL database at url, as a
// Migration or a long report would, until release is called.
func holdPetsLock(t *testing.T, url string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE pets IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	return testkit.ReleaseOnce(t, func() error { return errors.Join(tx.Rollback(ctx), conn.Close(ctx)) })
}

// holdPetsOrderLock takes the lock that orders the ids of pets,
// as a batch of another server would that stalls, until release is called.
func holdPetsOrderLock(t *testing.T, pg *store.Postgres) (release func()) {
	t.Helper()
	unlock, err := pg.HoldPetsOrderLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return testkit.ReleaseOnce(t, unlock)
}

// A lock on PostgreSQL's pets held past the deadline: what needs the table
// answers 503 within the deadline (reads the in-memory copy holds go on),
// and once it is let go everything works again.
func TestPostgresLockHeldPastTheDeadlineAnswers503InTime(t *testing.T) {
	s := newTestServerWith(t, testOptions{postgres: true, dbTimeout: testkit.DBTimeout})
	key := s.mustCreateKey("business")
	before := testkit.AddPets(s.t, s.do, key, "available", "sold", "available")

	release := holdPetsLock(t, s.dbPath)
	for _, req := range []struct{ name, method, target, body string }{
		{"a filtered list reaching the newest pets", "GET", "/v1/pets?status=sold", ""},
		{"a read past the newest pet", "GET", "/v1/pets/" + strconv.FormatInt(before[2].ID+1, 10), ""},
		{"a create", "POST", "/v1/pets", `{"name":"Locked out","categoryId":1}`},
	} {
		w, took := timedDo(s, req.method, req.target, key, req.body)
		wantUnavailableInTime(t, req.name+" while pets are locked", w, took)
	}
	if w := s.do("GET", "/v1/pets/"+strconv.FormatInt(before[0].ID, 10), key, ""); w.Code != http.StatusOK {
		t.Errorf("a pet the copy holds, while pets are locked: %d, want 200", w.Code)
	}

	release()
	after := testkit.AddPets(s.t, s.do, key, "pending")
	listed := testkit.PetIDs(testkit.ReadPets(t, s.do("GET", "/v1/pets?limit=100", key, "")))
	for _, p := range append(before, after...) {
		if !slices.Contains(listed, p.ID) {
			t.Errorf("pet %d, created with a 201, is not listed after the lock: %v", p.ID, listed)
		}
	}
}

// While the database stalls, creates queue for a commit up to a bound; past
// it, a create is answered 503 at once rather than at the deadline, and
// none waits past the deadline.
func TestCreatesPastTheQueueBoundAre503AtOnce(t *testing.T) {
	// A longer deadline, so that every create is sent while the first wait.
	const timeout = 2 * time.Second
	s := newTestServerWith(t, testOptions{dbTimeout: timeout})
	key := s.mustCreateKey("enterprise", domain.Limits{PerMinute: 1 << 20, PerDay: 1 << 30})
	testkit.HoldWriteLock(t, s.dbPath)
	// A batch of up to petcopy.MaxBatch waits on the lock, and the queue behind it.
	n := petcopy.MaxBatch + petcopy.MaxQueuedCreates + 100
	var wg sync.WaitGroup
	var mu sync.Mutex
	var atOnce, inTime, late int
	for i := range n {
		wg.Go(func() {
			w, took := timedDo(s, "POST", "/v1/pets", key, `{"name":"Queued `+strconv.Itoa(i)+`","categoryId":1}`)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case w.Code != http.StatusServiceUnavailable:
				t.Errorf("create %d while the write lock is held: %d %s, want 503", i, w.Code, w.Body)
			case took < timeout/2:
				atOnce++
			case took <= timeout+testkit.DeadlineMargin:
				inTime++
			default:
				late++
			}
		})
	}
	wg.Wait()
	if atOnce < 100 || late > 0 {
		t.Errorf("of %d creates while the database stalls: %d answered at once, %d by the deadline, %d late; want at least 100 at once (past a batch and %d queued) and none late",
			n, atOnce, inTime, late, petcopy.MaxQueuedCreates)
	}
}

// A create that PostgreSQL received but did not confirm by the deadline
// (another server's batch holds the lock that orders ids, and stalls)
// answers 503 saying that it may be stored: it may commit later, or never
// (pgx asks the server to cancel it). Its retries with the same
// Idempotency-Key, on another server and on the same one, answer 201 with
// one pet, stored once.
func TestACreateNotConfirmedInTimeIsSettledByItsIdempotencyKey(t *testing.T) {
	a := newTestServerWith(t, testOptions{postgres: true, dbTimeout: testkit.DBTimeout})
	b := newTestServerWith(t, testOptions{postgres: true, dbTimeout: testkit.DBTimeout, db: a.dbPath})
	key := a.mustCreateKey("business")
	if err := b.keys.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	const body = `{"name":"Late","categoryId":7}`

	release := holdPetsOrderLock(t, a.pg)
	w, took := timedDo(a, "POST", "/v1/pets", key, body, "Idempotency-Key", "late-1")
	wantUnavailableInTime(t, "a create waiting on a lock", w, took)
	if !strings.Contains(w.Body.String(), "may or may not have been stored") {
		t.Errorf("the 503 of a create sent and not confirmed does not say it may be stored: %s", w.Body)
	}
	release()
	wantOnePetFor(t, body, "late-1", key, b, a)
}

// wantOnePetFor sends the create of body with idemKey to each server in
// turn, and wants each to answer 201 with the same pet, the only one stored
// under its name.
func wantOnePetFor(t *testing.T, body, idemKey, key string, servers ...*testServer) {
	t.Helper()
	ws := make([]*httptest.ResponseRecorder, len(servers))
	for i, s := range servers {
		ws[i] = s.do("POST", "/v1/pets", key, body, "Idempotency-Key", idemKey)
	}
	wantOnePet(t, servers[0].store, ws)
}

// wantOnePet wants every answer to be a 201 with the same pet, the only one
// stored under its name.
func wantOnePet(t *testing.T, store store.Storage, ws []*httptest.ResponseRecorder) {
	t.Helper()
	var ids []int64
	var name string
	for _, w := range ws {
		if w.Code != http.StatusCreated {
			t.Fatalf("a create with the Idempotency-Key: %d %s, want 201", w.Code, w.Body)
		}
		p := testkit.ReadPet(t, w.Body.Bytes())
		ids, name = append(ids, p.ID), p.Name
	}
	stored := testkit.StoredByName(t, store)[name]
	if len(stored) != 1 || slices.ContainsFunc(ids, func(id int64) bool { return id != stored[0] }) {
		t.Errorf("pets stored as %q: %v; the creates answered %v; want one pet, the one every create answers", name, stored, ids)
	}
}

// Two servers get the same create with the same Idempotency-Key at once,
// while the database holds both back: each looks for the key, finds none,
// and waits to store its pet. The first to store it answers 201; the
// other finds the key taken, and answers 201 with that pet. One is stored.
func TestOneIdempotencyKeyOnTwoServersAtOnceMakesOnePet(t *testing.T) {
	eachStore(t, func(t *testing.T, opts testOptions) {
		a := newTestServerWith(t, opts)
		opts.db = a.dbPath
		b := newTestServerWith(t, opts)
		key := a.mustCreateKey("business")
		if err := b.keys.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		var release func()
		if a.pg != nil {
			release = holdPetsOrderLock(t, a.pg)
		} else {
			release = testkit.HoldWriteLock(t, a.dbPath)
		}
		const body = `{"name":"Twice at once","categoryId":3}`
		ws := make([]*httptest.ResponseRecorder, 2)
		var wg sync.WaitGroup
		for i, s := range []*testServer{a, b} {
			wg.Go(func() { ws[i] = s.do("POST", "/v1/pets", key, body, "Idempotency-Key", "at-once") })
		}
		// A batch runs once its create has looked for the key.
		for _, s := range []*testServer{a, b} {
			testkit.Eventually(t, 5*time.Second, "a commit runs", s.pets.Committing)
		}
		release()
		wg.Wait()
		wantOnePet(t, a.store, ws)
	})
}

// readyWithin asks /readyz until it answers want, each answer within a
// second, for up to 3 s.
func readyWithin(t *testing.T, s *testServer, want int) {
	t.Helper()
	testkit.Eventually(t, 3*time.Second, fmt.Sprintf("/readyz answers %d", want), func() bool {
		w, took := timedDo(s, "GET", "/readyz", "", "")
		if took > time.Second {
			t.Errorf("/readyz answered %d after %v, want within a second", w.Code, took.Round(time.Millisecond))
		}
		return w.Code == want
	})
}

// dbMetrics reads what m counts of the database: the 503s by cause, the
// health probe's gauge, and how many probes ran.
func dbMetrics(t *testing.T, m *metrics.Metrics) (unavailable map[string]float64, down float64, probes uint64) {
	t.Helper()
	families := testkit.Scrape(t, m.Handler())
	unavailable = testkit.CounterValues(t, families, "petstore_database_unavailable_total", "cause")
	down = families["petstore_database_down"].GetMetric()[0].GetGauge().GetValue()
	for _, metric := range families["petstore_database_call_duration_seconds"].GetMetric() {
		if testkit.LabelsOf(metric)["operation"] == "Ping" {
			probes = metric.GetHistogram().GetSampleCount()
		}
	}
	return unavailable, down, probes
}

// The 503s the database causes are counted by cause, and
// petstore_database_down is on while the probe finds it away; many /readyz
// at once share one probe.
func TestDatabase503sAreCountedByCause(t *testing.T) {
	m := newMetrics()
	s := newTestServerWith(t, testOptions{dbTimeout: testkit.DBTimeout, metrics: m})
	key := s.mustCreateKey("business")
	readyWithin(t, s, http.StatusOK)

	release := testkit.HoldWriteLock(t, s.dbPath)
	for range 2 {
		wantError(t, s.do("POST", "/v1/pets", key, `{"name":"Rex","categoryId":1}`), 503, httpapi.CodeUnavailable)
	}
	_, _, before := dbMetrics(t, m)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { s.do("GET", "/readyz", "", "") })
	}
	wg.Wait()
	if _, down, probes := dbMetrics(t, m); down != 1 || probes-before > 2 {
		t.Errorf("after 20 /readyz at once while the write lock is held: petstore_database_down %v, %d probes; want 1, and one probe (two at most)", down, probes-before)
	}
	release()
	readyWithin(t, s, http.StatusOK)

	if _, err := s.sqlite.Writer().Exec("PRAGMA query_only = 1"); err != nil {
		t.Fatal(err)
	}
	wantError(t, s.do("POST", "/v1/pets", key, `{"name":"Rex","categoryId":1}`), 503, httpapi.CodeUnavailable)
	if _, err := s.sqlite.Writer().Exec("PRAGMA query_only = 0"); err != nil {
		t.Fatal(err)
	}
	s.do("GET", "/readyz", "", "") // a 503 the database did not cause: not counted

	unavailable, down, _ := dbMetrics(t, m)
	if want := map[string]float64{"timeout": 2, "refused": 1, "pool_exhausted": 0}; !maps.Equal(unavailable, want) || down != 0 {
		t.Errorf("petstore_database_unavailable_total %v, petstore_database_down %v; want %v and 0", unavailable, down, want)
	}
}

// With every connection of PostgreSQL's pool taken (by requests that
// stall), a request waits for one until the deadline: 503, counted as
// pool_exhausted, and the next request after they are let go is served.
func TestPostgresPoolExhaustedAnswers503InTime(t *testing.T) {
	m := newMetrics()
	s := newTestServerWith(t, testOptions{postgres: true, dbTimeout: testkit.DBTimeout, metrics: m})
	key := s.mustCreateKey("business")
	testkit.AddPets(s.t, s.do, key, "sold")
	ctx := context.Background()
	var taken []*pgxpool.Conn
	for range s.pg.Pool().Config().MaxConns {
		conn, err := s.pg.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		taken = append(taken, conn)
	}
	for _, req := range []struct{ method, target, body string }{
		{"GET", "/v1/pets?status=sold", ""},
		{"POST", "/v1/pets", `{"name":"Rex","categoryId":1}`},
	} {
		w, took := timedDo(s, req.method, req.target, key, req.body)
		wantUnavailableInTime(t, req.method+" "+req.target+" with the pool taken", w, took)
		if strings.Contains(w.Body.String(), "may or may not") {
			t.Errorf("%s %s never reached the database, yet its 503 says it may be stored: %s", req.method, req.target, w.Body)
		}
	}
	for _, conn := range taken {
		conn.Release()
	}
	if w := s.do("GET", "/v1/pets?status=sold", key, ""); w.Code != http.StatusOK {
		t.Errorf("a list once the pool is free: %d %s", w.Code, w.Body)
	}
	if unavailable, _, _ := dbMetrics(t, m); unavailable["pool_exhausted"] != 2 {
		t.Errorf("petstore_database_unavailable_total %v, want 2 pool_exhausted", unavailable)
	}
}

// /readyz follows the database: a 503 within a second while SQLite's write
// lock is held past the deadline, 200 again once it is let go; the outage
// is logged once as it starts and once as it ends, and its 503s are neither
// ERROR lines nor 5xx of the request metrics.
func TestReadyzFollowsTheDatabaseWithinASecond(t *testing.T) {
	logs := &testkit.SyncBuffer{}
	logger, _ := NewLogger(logs, "text", "info")
	m := newMetrics()
	s := newTestServerWith(t, testOptions{dbTimeout: testkit.DBTimeout, logger: logger, metrics: m})
	readyWithin(t, s, http.StatusOK)

	release := testkit.HoldWriteLock(t, s.dbPath)
	readyWithin(t, s, http.StatusServiceUnavailable)
	w := s.do("GET", "/readyz", "", "")
	wantError(t, w, http.StatusServiceUnavailable, httpapi.CodeUnavailable, "database")
	if w.Header().Get("Retry-After") == "" {
		t.Error("/readyz's 503 has no Retry-After")
	}
	readyWithin(t, s, http.StatusServiceUnavailable) // still, and logged once
	release()
	readyWithin(t, s, http.StatusOK)
	if w := s.do("GET", "/healthz", "", ""); w.Code != http.StatusOK {
		t.Errorf("/healthz: %d, want 200 (the process is up)", w.Code)
	}

	log := logs.String()
	if strings.Count(log, "the database does not answer") != 1 || strings.Count(log, "the database answers again") != 1 {
		t.Errorf("want one line as the outage starts and one as it ends, got:\n%s", log)
	}
	if strings.Contains(log, "level=ERROR") {
		t.Errorf("health checks logged at ERROR:\n%s", log)
	}
	for series, n := range testkit.RequestCounts(t, testkit.Scrape(t, m.Handler())) {
		if strings.Contains(series, "/readyz") || strings.Contains(series, "/healthz") {
			t.Errorf("health checks counted in the request metrics: %s %d", series, n)
		}
	}
}
