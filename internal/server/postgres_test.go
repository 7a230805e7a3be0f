package server

// The PostgreSQL store beyond what every test runs on both stores: the copy
// from SQLite, a database that goes away and comes back, and the command
// line's answers to a bad URL. Skipped without PETSTORE_TEST_POSTGRES.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"petstore/internal/cli"
	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/manage"
	"petstore/internal/store"
	"petstore/internal/testkit"

	"github.com/jackc/pgx/v5"
)

// While PostgreSQL cannot be reached, what needs it answers 503 unavailable
// and /readyz fails, while a pet the server's copy holds is still served;
// once it is back, everything works again by itself, and nothing
// acknowledged was lost.
func TestPostgresGoneAnswers503AndRecovers(t *testing.T) {
	t.Parallel()
	proxy, db := testkit.FaultProxyTo(t, testkit.PostgresURL(t))
	s := newTestServerWith(t, testOptions{postgres: true, db: db})
	key := s.mustCreateKey("business")
	before := testkit.AddPets(s.t, s.do, key, "available", "sold")
	if w := s.do("GET", "/readyz", "", ""); w.Code != http.StatusOK {
		t.Fatalf("/readyz with the database up: %d", w.Code)
	}

	proxy.Set("drop")
	for _, req := range []struct{ method, target, body string }{
		{"GET", "/v1/pets", ""}, // the last page: newer pets may be in the database
		{"GET", "/v1/pets/" + strconv.FormatInt(before[1].ID+1, 10), ""},
		{"POST", "/v1/pets", `{"name":"Rex","categoryId":1}`},
		{"GET", "/readyz", ""},
	} {
		w := s.do(req.method, req.target, key, req.body)
		wantError(t, w, http.StatusServiceUnavailable, "unavailable")
	}
	if w := s.do("GET", "/v1/pets/"+strconv.FormatInt(before[0].ID, 10), key, ""); w.Code != http.StatusOK {
		t.Errorf("a pet the copy holds, with the database gone: %d, want 200", w.Code)
	}

	proxy.Set("pass")
	after := testkit.AddPets(s.t, s.do, key, "pending")
	if w := s.do("GET", "/readyz", "", ""); w.Code != http.StatusOK {
		t.Errorf("/readyz once the database is back: %d", w.Code)
	}
	listed := testkit.ReadPets(t, s.do("GET", "/v1/pets", key, ""))
	if want := append(before, after...); !slices.Equal(testkit.PetIDs(listed), testkit.PetIDs(want)) {
		t.Errorf("pets after the outage: %v, want %v", testkit.PetIDs(listed), testkit.PetIDs(want))
	}
}

// Servers that start at once on a new database each find the schema made
// once: the migration runs under an advisory lock.
func TestServersStartingAtOnceMigrateOnce(t *testing.T) {
	db := testkit.PostgresURL(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := store.OpenPostgres(context.Background(), db, time.Now)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("opening one new database four times at once: %v", err)
	}
	s := newTestServerWith(t, testOptions{postgres: true, db: db})
	var version int
	if err := s.pg.Pool().QueryRow(context.Background(), `SELECT version FROM petstore_schema`).Scan(&version); err != nil || version != len(store.Migrations) {
		t.Errorf("schema version %d (%v), want %d", version, err, len(store.Migrations))
	}
}

// After a 201 from one server, another shows the pet at once, by id and in
// its list, whether its copy of the pets has caught up or not.
func TestReadYourWritesAcrossServers(t *testing.T) {
	t.Parallel()
	a := newTestServerWith(t, testOptions{postgres: true})
	b := newTestServerWith(t, testOptions{postgres: true, db: a.dbPath})
	key := a.mustCreateKey("business")
	testkit.AddPets(a.t, a.do, key, "available", "sold")
	if err := b.keys.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		created := a.do("POST", "/v1/pets", key, `{"name":"Rex","categoryId":1,"status":"available"}`)
		if created.Code != http.StatusCreated {
			t.Fatalf("create on A: %d %s", created.Code, created.Body)
		}
		pet := testkit.ReadPet(t, created.Body.Bytes())
		if i%2 == 1 {
			// Half the time B's copy has caught up, as its LISTEN would.
			if err := b.pets.Tail(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		got := b.do("GET", "/v1/pets/"+strconv.FormatInt(pet.ID, 10), key, "")
		if got.Code != http.StatusOK || got.Body.String() != created.Body.String() {
			t.Fatalf("GET on B right after a 201 from A: %d %s, want %s", got.Code, got.Body, created.Body)
		}
		for _, target := range []string{"/v1/pets?limit=100", "/v1/pets?limit=100&status=available"} {
			listed := testkit.PetIDs(testkit.ReadPets(t, b.do("GET", target, key, "")))
			if len(listed) == 0 || listed[len(listed)-1] != pet.ID {
				t.Fatalf("GET %s on B right after a 201 from A for pet %d: %v", target, pet.ID, listed)
			}
		}
	}
}

// A server's copy of the pets stays a complete prefix of the table while it
// and another server create pets, one at a time and many at once: its own
// batches join the copy as they are stored, without a query to read them
// back, and the pets another server stored before them are read first, in
// id order.
func TestTheCopyStaysACompletePrefixWhileServersCreate(t *testing.T) {
	t.Parallel()
	lists := &listCounter{}
	a := newTestServerWith(t, testOptions{postgres: true, wrapStore: func(st store.Storage) store.Storage { lists.Storage = st; return lists }})
	b := newTestServerWith(t, testOptions{postgres: true, db: a.dbPath})
	ctx := context.Background()
	create := func(s *testServer, name string) domain.Pet {
		p, err := s.pets.Create(ctx, domain.Pet{Name: name, CategoryID: 1, Status: "sold"}, nil)
		if err != nil {
			t.Error(err)
		}
		return p
	}
	// A's copy holds every stored pet up to its last id, and at least
	// the pets A created.
	wantPrefix := func(created ...domain.Pet) {
		t.Helper()
		stored, err := b.store.ListPets(ctx, "", 0, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		held := a.pets.IDs()
		last := held[len(held)-1]
		var want []int64
		for _, p := range stored {
			if p.ID <= last {
				want = append(want, p.ID)
			}
		}
		if !slices.Equal(held, want) {
			t.Errorf("A's copy holds %v, want every stored pet up to %d: %v", held, last, want)
		}
		for _, p := range created {
			if p.ID > last {
				t.Errorf("A's copy ends at %d, before its own pet %d", last, p.ID)
			}
		}
	}

	var own []domain.Pet
	for i := range 5 {
		own = append(own, create(a, fmt.Sprint("A alone ", i)))
	}
	wantPrefix(own...)
	if n := lists.count.Load(); n != 0 {
		t.Errorf("A read its own pets back %d times, want none", n)
	}

	create(b, "B first")
	create(b, "B second")
	wantPrefix(create(a, "A after B"))
	if n := lists.count.Load(); n == 0 {
		t.Error("A's copy took B's pets without reading them")
	}

	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			p := create(a, fmt.Sprint("A at once ", i))
			mu.Lock()
			own = append(own, p)
			mu.Unlock()
		})
		wg.Go(func() { create(b, fmt.Sprint("B at once ", i)) })
	}
	wg.Wait()
	wantPrefix(own...)
}

// listCounter is a store that counts the pages of pets read.
type listCounter struct {
	store.Storage
	count atomic.Int64
}

func (c *listCounter) ListPets(ctx context.Context, status string, after int64, limit int) ([]domain.Pet, error) {
	c.count.Add(1)
	return c.Storage.ListPets(ctx, status, after, limit)
}

// A server tails its copy of the pets on the notices of other servers'
// creates, sent once they are committed; not on its own, whose pets are in
// its copy already.
func TestAServerHearsOtherServersCreatesNotItsOwn(t *testing.T) {
	t.Parallel()
	url := testkit.PostgresURL(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	stores := make([]*store.Postgres, 2)
	heard := make([]atomic.Int64, 2)
	for i := range stores {
		s, err := store.OpenPostgres(ctx, url, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
		wg.Go(func() { s.ListenPets(ctx, 3*time.Second, func() { heard[i].Add(1) }) })
	}
	listen := "LISTEN " + pgx.Identifier{stores[0].PetsChannel()}.Sanitize()
	testkit.Eventually(t, 5*time.Second, "both stores listen", func() bool {
		var n int
		err := stores[0].Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE state = 'idle' AND query = $1`, listen).Scan(&n)
		return err == nil && n == len(stores)
	})

	for _, s := range stores {
		if err := s.CreatePets(ctx, []domain.PetInsert{{Pet: domain.Pet{Name: "Rex", CategoryID: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 5*time.Second, "each store hears of the other's pet", func() bool { return heard[0].Load() > 0 && heard[1].Load() > 0 })
	// Each store heard the other's notice, so both were sent. Notices reach
	// a listener in the order they were committed: once a notice sent now
	// is heard, a store that heard its own would have heard it before.
	if _, err := stores[0].Pool().Exec(ctx, `SELECT pg_notify($1, 'after both creates')`, stores[0].PetsChannel()); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "each store hears of the other's pet and the last notice", func() bool {
		return heard[0].Load() >= 2 && heard[1].Load() >= 2
	})
	for i := range stores {
		if n := heard[i].Load(); n != 2 {
			t.Errorf("server %d heard of pets %d times, want twice (the other's and the last notice)", i, n)
		}
	}
}

func TestCopyMovesASQLiteDatabaseIntoAnEmptyPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := newTestServer(t)
	key := src.mustCreateKey("pro")
	revoked := src.mustCreateKey("free")
	testkit.AddPets(src.t, src.do, key, "available", "", "sold", "pending", "available")
	replay := src.do("POST", "/v1/pets", key, `{"name":"Once","categoryId":9}`, "Idempotency-Key", "order-1")
	if replay.Code != http.StatusCreated {
		t.Fatalf("create with an Idempotency-Key: %d %s", replay.Code, replay.Body)
	}
	if err := src.limiter.Flush(ctx, src.store.AddUsage); err != nil {
		t.Fatal(err)
	}
	if err := src.keys.FlushLastUsed(ctx); err != nil {
		t.Fatal(err)
	}
	src.flushUsage()
	admin := src.mustCreateAdmin("portal", domain.AllAdminScopes)
	keys, _ := src.store.Keys(ctx)
	if _, err := src.store.RevokeKey(ctx, keys[1].ID, testActor); err != nil {
		t.Fatal(err)
	}
	// A roll's keys keep their expiry, their link and their shared budget.
	_, _, rolled := src.roll(keys[0].ID, time.Hour)
	// The last pet goes: its id must not be given again after the copy.
	if _, err := src.sqlite.Writer().Exec(`INSERT INTO pets (name, category_id) VALUES ('Gone', 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := src.sqlite.Writer().Exec(`DELETE FROM pets WHERE name = 'Gone'`); err != nil {
		t.Fatal(err)
	}
	// A ban in force comes over, and holds on the copy.
	banned := src.mustCreateKey("enterprise", domain.Limits{PerMinute: 1, PerDay: 100})
	src.banOf(banned, 20)
	src.flushAudit()
	wantPets, _ := src.store.ListPets(ctx, "", 0, 100)
	wantKeys, _ := src.store.Keys(ctx)
	wantUsage, _ := src.store.Usage(ctx, keys[0].ID, src.clock.now().UTC().Format(time.DateOnly))
	wantEvents, _ := src.store.AuditEvents(ctx, domain.AuditFilter{})
	wantBans, _ := src.store.Bans(ctx)
	wantHistory, _ := src.store.UsageHistory(ctx, keys[0].ID, "2000-01-01")
	src.store.Close()

	to := testkit.PostgresURL(t)
	res := viaCLI(t, nil, "copy", "--from", src.dbPath, "--to", to)
	if res.code != 0 {
		t.Fatalf("copy: exit status %d: %s", res.code, res.stderr)
	}
	if want := "copied 6 pets, 4 keys, 1 daily usage counts, 1 idempotency records, 7 audit events, 1 admin tokens, 1 days of usage history and 1 bans"; !strings.Contains(res.stderr, want) {
		t.Errorf("copy said %q, want it to say %q", res.stderr, want)
	}
	// The events come over as they were, and the copy adds its own.
	wantNewEvents(t, to, wantEvents, domain.AuditEvent{
		Action: domain.AuditKeysCopied, Actor: cli.CommandActor(), Env: "production",
		Details: domain.AuditDetails{From: src.dbPath, Copied: &domain.Copied{Pets: 6, Keys: 4, Usage: 1, Idempotency: 1, AuditEvents: 7, AdminTokens: 1, UsageHistory: 1, Bans: 1}},
	})

	dst := newTestServerWith(t, testOptions{postgres: true, db: to})
	dst.clock.t = src.clock.now()
	if got, _ := dst.store.Bans(ctx); len(wantBans) != 1 || !slices.EqualFunc(got, wantBans, sameBan) {
		t.Errorf("bans after the copy: %+v, want %+v", got, wantBans)
	}
	wantError(t, dst.do("GET", "/v1/pets", banned, ""), http.StatusTooManyRequests, httpapi.CodeTemporarilyBanned)
	if got, _ := dst.store.ListPets(ctx, "", 0, 100); !slices.Equal(got, wantPets) {
		t.Errorf("pets after the copy:\n%v\nwant\n%v", got, wantPets)
	}
	if got, _ := dst.store.Keys(ctx); !slices.EqualFunc(got, wantKeys, func(a, b domain.Key) bool {
		return a.ID == b.ID && string(a.Hash) == string(b.Hash) && a.Name == b.Name && a.Plan == b.Plan &&
			a.PerMinute == b.PerMinute && a.PerDay == b.PerDay && a.Env == b.Env && a.CreatedAt.Equal(b.CreatedAt) && a.RevokedAt.Equal(b.RevokedAt) &&
			a.ExpiresAt.Equal(b.ExpiresAt) && a.BudgetID == b.BudgetID && a.RolledTo == b.RolledTo && a.LastUsedAt.Equal(b.LastUsedAt)
	}) || wantKeys[0].LastUsedAt.IsZero() || wantKeys[0].RolledTo == 0 {
		t.Errorf("keys after the copy:\n%+v\nwant\n%+v", got, wantKeys)
	}
	if got, _ := dst.store.Usage(ctx, keys[0].ID, dst.clock.now().UTC().Format(time.DateOnly)); got != wantUsage || got == 0 {
		t.Errorf("today's usage after the copy: %d, want %d", got, wantUsage)
	}
	// The admin token and the usage history come over too.
	var history []domain.UsageDay
	if w := dst.admin("GET", fmt.Sprintf("/admin/v1/keys/%d/usage?days=1", keys[0].ID), admin, ""); w.Code != http.StatusOK {
		t.Errorf("the usage history with a copied admin token: %d %s", w.Code, w.Body)
	} else if testkit.DecodeJSON(t, w, &history); len(wantHistory) != 1 || len(history) != 1 || history[0].Day != wantHistory[0].Day || history[0].Allowed != wantHistory[0].Allowed {
		t.Errorf("the usage history after the copy: %+v, want %+v", history, wantHistory)
	}
	if w := dst.do("GET", "/v1/pets?limit=100", key, ""); w.Code != http.StatusOK || len(testkit.ReadPets(t, w)) != len(wantPets) {
		t.Errorf("list with a copied key: %d %s", w.Code, w.Body)
	}
	if w := dst.do("GET", "/v1/pets", revoked, ""); w.Code != http.StatusUnauthorized {
		t.Errorf("a key revoked before the copy: %d, want 401", w.Code)
	}
	if old, rolled := dst.rateLimit(t, key), dst.rateLimit(t, rolled); old != rolled || rolled.Day.Remaining > 10_000-wantUsage {
		t.Errorf("the keys of a roll made before the copy: the old sees %+v, the new %+v; want one budget, %d spent today", old, rolled, wantUsage)
	}
	again := dst.do("POST", "/v1/pets", key, `{"name":"Once","categoryId":9}`, "Idempotency-Key", "order-1")
	if again.Code != http.StatusCreated || again.Body.String() != replay.Body.String() {
		t.Errorf("the retry of a copied Idempotency-Key: %d %s, want the first answer %s", again.Code, again.Body, replay.Body)
	}
	if k, _ := dst.mustCreate(dst.keyTerms("free")); k.ID != 5 {
		t.Errorf("the first key after the copy got id %d, want 5", k.ID)
	}
	if events, _ := dst.store.AuditEvents(ctx, domain.AuditFilter{KeyID: 5}); len(events) != 1 || events[0].ID != int64(len(wantEvents)+2) {
		t.Errorf("the first event after the copy: %+v, want id %d: ids go on past SQLite's", events, len(wantEvents)+2)
	}
	created := testkit.ReadPet(t, dst.do("POST", "/v1/pets", key, `{"name":"New","categoryId":1}`).Body.Bytes())
	if created.ID != wantPets[len(wantPets)-1].ID+2 {
		t.Errorf("the first pet after the copy got id %d, want %d: ids go on past every id SQLite gave", created.ID, wantPets[len(wantPets)-1].ID+2)
	}
}

func TestCopyRefusesATargetThatIsNotEmpty(t *testing.T) {
	t.Parallel()
	src := newTestServer(t)
	testkit.AddPets(src.t, src.do, src.mustCreateKey("free"), "available")
	src.store.Close()
	dst := newTestServerWith(t, testOptions{postgres: true})
	dstKey := dst.mustCreateKey("free")
	testkit.AddPets(dst.t, dst.do, dstKey, "sold", "sold")

	res := viaCLI(t, nil, "copy", "--from", src.dbPath, "--to", dst.dbPath)
	wantFailure(t, res, 1)
	if !strings.Contains(res.stderr, "not empty") {
		t.Errorf("copy into a database with pets said %q, want it to say the target is not empty", res.stderr)
	}
	if got := testkit.PetCount(dst.t, dst.do, dstKey); got != 2 {
		t.Errorf("the target holds %d pets after a refused copy, want its 2", got)
	}
}

// TestWebhooksAreCopiedToPostgreSQL: petstore copy carries the endpoints,
// with their secrets, and the deliveries still waiting, which a server on
// PostgreSQL then makes with the same webhook-id.
func TestWebhooksAreCopiedToPostgreSQL(t *testing.T) {
	t.Parallel()
	src := newTestServerWith(t, testOptions{webhookAllowPrivate: true})
	rc := testkit.NewReceiver(t)
	e := src.addEndpoint(rc)
	ev, err := manage.QueueTest(context.Background(), src.store, src.env, e.ID, testActor, src.clock.now())
	if err != nil {
		t.Fatal(err)
	}
	src.store.Close()

	to := testkit.PostgresURL(t)
	if res := viaCLI(t, nil, "copy", "--from", src.dbPath, "--to", to); res.code != 0 {
		t.Fatalf("copy: exit status %d: %s", res.code, res.stderr)
	}
	dst := newTestServerWith(t, testOptions{webhookAllowPrivate: true, postgres: true, db: to, redis: true})
	dst.clock.t = src.clock.now()
	dst.deliverDue()
	if got := rc.Wait(1, 5*time.Second); got[0].ID != ev.ID || !got[0].Verified {
		t.Fatalf("after the copy: %+v", got)
	}
	// The endpoint's id is never given again.
	next := dst.addEndpoint(testkit.NewReceiver(t))
	if next.ID <= e.ID {
		t.Errorf("a new endpoint after the copy has id %d, the copied one %d", next.ID, e.ID)
	}
}
