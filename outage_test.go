package main

// The database away or stalled (docs/production.md, "When the database stalls"): what needs it
// answers 503 unavailable with a Retry-After within --db-timeout, nothing
// acknowledged is lost or doubled, and the server heals by itself. The
// tests run with a short deadline, so that they stay short.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
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

// testDBTimeout is --db-timeout in these tests; an answer that needs the
// database comes within it and testDeadlineMargin.
const (
	testDBTimeout      = 300 * time.Millisecond
	testDeadlineMargin = 500 * time.Millisecond
)

// wantUnavailableInTime fails unless w, answered took after it was sent, is
// a 503 unavailable with a Retry-After, within the deadline and its margin.
func wantUnavailableInTime(t *testing.T, what string, w *httptest.ResponseRecorder, took time.Duration) {
	t.Helper()
	wantError(t, w, http.StatusServiceUnavailable, httpapi.CodeUnavailable)
	if w.Header().Get("Retry-After") != "1" {
		t.Errorf("%s: Retry-After %q, want 1", what, w.Header().Get("Retry-After"))
	}
	if took > testDBTimeout+testDeadlineMargin {
		t.Errorf("%s answered after %v, want within %v of the %v deadline", what, took.Round(time.Millisecond), testDeadlineMargin, testDBTimeout)
	}
}

// timedDo is s.do, with how long it took.
func timedDo(s *testServer, method, target, key, body string, header ...string) (*httptest.ResponseRecorder, time.Duration) {
	s.t.Helper()
	start := time.Now()
	w := s.do(method, target, key, body, header...)
	return w, time.Since(start)
}

// holdWriteLock takes SQLite's write lock on the database at path, on a
// connection of its own as another process would, until release is called.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	return releaseOnce(t, func() error {
		_, err := conn.ExecContext(ctx, "ROLLBACK")
		return errors.Join(err, conn.Close(), db.Close())
	})
}

// releaseOnce is release, run once: when called, or when the test ends.
func releaseOnce(t *testing.T, release func() error) func() {
	var once sync.Once
	r := func() {
		once.Do(func() {
			if err := release(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(r)
	return r
}

// Another process holding SQLite's write lock past the deadline: creates
// answer 503 within it (not after busy_timeout), reads go on from memory
// and from the file, and once the lock is let go creates work again, the
// 503s having stored nothing.
func TestSQLiteWriteLockHeldPastTheDeadlineAnswers503InTime(t *testing.T) {
	s := newTestServerWith(t, testOptions{dbTimeout: testDBTimeout})
	key := s.mustCreateKey("business")
	before := apiAddPets(s, key, "available", "sold")

	release := holdWriteLock(t, s.dbPath)
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
	after := apiReadPet(t, w.Body.Bytes())
	listed := apiReadPets(t, s.do("GET", "/v1/pets?limit=100", key, ""))
	if got, want := apiIDs(listed), append(apiIDs(before), after.ID); !slices.Equal(got, want) {
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
	return releaseOnce(t, func() error { return errors.Join(tx.Rollback(ctx), conn.Close(ctx)) })
}

// holdPetsOrderLock takes the lock that orders the ids of pets,
// as a batch of another server would that stalls, until release is called.
func holdPetsOrderLock(t *testing.T, pg *store.Postgres) (release func()) {
	t.Helper()
	unlock, err := pg.HoldPetsOrderLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return releaseOnce(t, unlock)
}

// A lock on PostgreSQL's pets held past the deadline: what needs the table
// answers 503 within the deadline (reads the in-memory copy holds go on),
// and once it is let go everything works again.
func TestPostgresLockHeldPastTheDeadlineAnswers503InTime(t *testing.T) {
	s := newTestServerWith(t, testOptions{postgres: true, dbTimeout: testDBTimeout})
	key := s.mustCreateKey("business")
	before := apiAddPets(s, key, "available", "sold", "available")

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
	after := apiAddPets(s, key, "pending")
	listed := apiIDs(apiReadPets(t, s.do("GET", "/v1/pets?limit=100", key, "")))
	for _, p := range append(before, after...) {
		if !slices.Contains(listed, p.ID) {
			t.Errorf("pet %d, created with a 201, is not listed after the lock: %v", p.ID, listed)
		}
	}
}

func TestServeRefusesADatabaseTimeoutNotAboveZero(t *testing.T) {
	db := t.TempDir() + "/petstore.db"
	for _, bad := range []string{"0", "-1s", "soon"} {
		res := viaRun(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", db, "--db-timeout", bad)
		wantFailure(t, res, 2)
		if !strings.Contains(res.stderr, "db-timeout") {
			t.Errorf("--db-timeout %s: %q does not name the flag", bad, res.stderr)
		}
	}
	wantNoFile(t, db)
}

// While the database stalls, creates queue for a commit up to a bound; past
// it, a create is answered 503 at once rather than at the deadline, and
// none waits past the deadline.
func TestCreatesPastTheQueueBoundAre503AtOnce(t *testing.T) {
	// A longer deadline, so that every create is sent while the first wait.
	const timeout = 2 * time.Second
	s := newTestServerWith(t, testOptions{dbTimeout: timeout})
	key := s.mustCreateKey("enterprise", domain.Limits{PerMinute: 1 << 20, PerDay: 1 << 30})
	holdWriteLock(t, s.dbPath)
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
			case took <= timeout+testDeadlineMargin:
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

// storedByName reads every pet the database holds: the ids stored under
// each name.
func storedByName(t *testing.T, store store.Storage) map[string][]int64 {
	t.Helper()
	stored := map[string][]int64{}
	for after := int64(0); ; {
		n, err := store.ScanPets(context.Background(), after, 1000, func(id int64, name []byte, _ int64, _ []byte) {
			stored[string(name)] = append(stored[string(name)], id)
			after = id
		})
		if err != nil {
			t.Fatal(err)
		}
		if n < 1000 {
			return stored
		}
	}
}

// A create that PostgreSQL received but did not confirm by the deadline
// (another server's batch holds the lock that orders ids, and stalls)
// answers 503 saying that it may be stored: it may commit later, or never
// (pgx asks the server to cancel it). Its retries with the same
// Idempotency-Key, on another server and on the same one, answer 201 with
// one pet, stored once.
func TestACreateNotConfirmedInTimeIsSettledByItsIdempotencyKey(t *testing.T) {
	a := newTestServerWith(t, testOptions{postgres: true, dbTimeout: testDBTimeout})
	b := newTestServerWith(t, testOptions{postgres: true, dbTimeout: testDBTimeout, db: a.dbPath})
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
		p := apiReadPet(t, w.Body.Bytes())
		ids, name = append(ids, p.ID), p.Name
	}
	stored := storedByName(t, store)[name]
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
			release = holdWriteLock(t, a.dbPath)
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

// /readyz follows the database: a 503 within a second while SQLite's write
// lock is held past the deadline, 200 again once it is let go; the outage
// is logged once as it starts and once as it ends, and its 503s are neither
// ERROR lines nor 5xx of the request metrics.
func TestReadyzFollowsTheDatabaseWithinASecond(t *testing.T) {
	logs := &syncBuffer{}
	logger, _ := newLogger(logs, "text", "info")
	m := newMetrics()
	s := newTestServerWith(t, testOptions{dbTimeout: testDBTimeout, logger: logger, metrics: m})
	readyWithin(t, s, http.StatusOK)

	release := holdWriteLock(t, s.dbPath)
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
	for series, n := range requestCounts(t, scrape(t, m)) {
		if strings.Contains(series, "/readyz") || strings.Contains(series, "/healthz") {
			t.Errorf("health checks counted in the request metrics: %s %d", series, n)
		}
	}
}

// dbMetrics reads what m counts of the database: the 503s by cause, the
// health probe's gauge, and how many probes ran.
func dbMetrics(t *testing.T, m *metrics.Metrics) (unavailable map[string]float64, down float64, probes uint64) {
	t.Helper()
	families := scrape(t, m)
	unavailable = counterValues(t, families, "petstore_database_unavailable_total", "cause")
	down = families["petstore_database_down"].GetMetric()[0].GetGauge().GetValue()
	for _, metric := range families["petstore_database_call_duration_seconds"].GetMetric() {
		if labelsOf(metric)["operation"] == "Ping" {
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
	s := newTestServerWith(t, testOptions{dbTimeout: testDBTimeout, metrics: m})
	key := s.mustCreateKey("business")
	readyWithin(t, s, http.StatusOK)

	release := holdWriteLock(t, s.dbPath)
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
	s := newTestServerWith(t, testOptions{postgres: true, dbTimeout: testDBTimeout, metrics: m})
	key := s.mustCreateKey("business")
	apiAddPets(s, key, "sold")
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

// The SQLite file deleted (its data directory removed) or replaced (another
// file renamed over it) under a server taking creates: within about a
// second every create answers 503 unavailable, /readyz fails at once, one ERROR
// line names the file's path, and the file renamed over it is left as it
// was, even by the server's stop.
func TestALostDatabaseFileIsAnswered503AndLoggedOnce(t *testing.T) {
	t.Parallel()
	const replacement = "another file, not the server's database"
	for _, c := range []struct {
		name string
		lose func(db string) error
	}{
		{"the data directory deleted", func(db string) error { return os.RemoveAll(filepath.Dir(db)) }},
		{"another file renamed over it", func(db string) error {
			other := filepath.Join(filepath.Dir(db), "other")
			return errors.Join(os.WriteFile(other, []byte(replacement), 0o600), os.Rename(other, db))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			db := filepath.Join(dir, "petstore.db")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			key := mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", "enterprise", "--rpm", "100000000", "--rpd", "1000000000")
			p := runServing(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", db)
			client := &http.Client{Timeout: 5 * time.Second}
			answers, lostAt := createsWhileLosing(t, p.url, key, func() error {
				if err := c.lose(db); err != nil {
					return err
				}
				// /readyz looks at the file before it answers.
				if res := faultDo(client, "GET", p.url+"/readyz", "", ""); res.status != http.StatusServiceUnavailable {
					t.Errorf("/readyz at once after the loss: %d %s, want 503", res.status, res.body)
				}
				return nil
			})
			settled := lostAt.Add(1500 * time.Millisecond)
			var before, after int
			for _, a := range answers {
				switch {
				case a.status != http.StatusCreated && a.status != http.StatusServiceUnavailable,
					a.status == http.StatusServiceUnavailable && !strings.Contains(a.body, `"`+httpapi.CodeUnavailable+`"`):
					t.Errorf("a create answered %d %s, want 201 or 503 unavailable", a.status, a.body)
				case a.sent.After(settled) && a.status != http.StatusServiceUnavailable:
					t.Errorf("a create sent %v after the loss answered %d, want 503", a.sent.Sub(lostAt).Round(time.Millisecond), a.status)
				case a.sent.Before(lostAt) && a.status == http.StatusCreated:
					before++
				case a.sent.After(settled):
					after++
				}
			}
			if before == 0 || after == 0 {
				t.Fatalf("%d creates acknowledged before the loss, %d answered 503 a while after it; want some of each", before, after)
			}
			if res := faultDo(client, "GET", p.url+"/readyz", "", ""); res.status != http.StatusServiceUnavailable {
				t.Errorf("/readyz after the loss: %d %s, want 503", res.status, res.body)
			}
			// Each 503 is a request line at ERROR, as every 5xx is; besides
			// them, one line tells of the loss.
			var errs []string
			for _, line := range regexp.MustCompile(`(?m)^.*level=ERROR.*$`).FindAllString(p.stderr.String(), -1) {
				if !strings.Contains(line, "msg=request ") {
					errs = append(errs, line)
				}
			}
			if len(errs) != 1 || !strings.Contains(errs[0], "path="+db) {
				t.Errorf("ERROR lines besides the requests':\n%s\nwant one, naming %s", strings.Join(errs, "\n"), db)
			}
			p.stop(t)
			if b, err := os.ReadFile(db); c.name == "another file renamed over it" && (err != nil || string(b) != replacement) {
				t.Errorf("the file renamed over the database holds %q (%v) after the server stopped, want it as it was", b, err)
			}
		})
	}
}

// lostAnswer is one create as the client saw it.
type lostAnswer struct {
	sent   time.Time
	status int
	body   string
}

// createsWhileLosing has four clients create pets at url with key, runs
// lose once some were acknowledged, and goes on 2.5 s more; it returns
// every answer and when lose ran.
func createsWhileLosing(t *testing.T, url, key string, lose func() error) ([]lostAnswer, time.Time) {
	t.Helper()
	client := faultClient(4)
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	var answers []lostAnswer
	stop := make(chan struct{})
	var workers sync.WaitGroup
	for range 4 {
		workers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				sent := time.Now()
				res := faultDo(client, "POST", url+"/v1/pets", key, `{"name":"Rex","categoryId":1}`)
				mu.Lock()
				answers = append(answers, lostAnswer{sent, res.status, string(res.body)})
				mu.Unlock()
			}
		})
	}
	testkit.Eventually(t, 5*time.Second, "creates acknowledged", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(answers) >= 20
	})
	lostAt := time.Now()
	if err := lose(); err != nil {
		t.Error(err)
	}
	time.Sleep(2500 * time.Millisecond)
	close(stop)
	workers.Wait()
	return answers, lostAt
}
