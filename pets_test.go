package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"petstore/internal/domain"
)

// The in-memory copy must answer exactly as the database does.
func TestMemoryCopyAnswersLikeTheDatabase(t *testing.T) {
	s := newTestServerWith(t, testOptions{petsFromDatabase: true})
	ctx := context.Background()
	seedPets(t, s.sqlite.Writer(), 9_000) // more than two chunks
	// Categories beyond int32 widen their chunk's column.
	for i, name := range []string{"quote \" backslash \\", "tab\there", "émoji 🐈", "\u2028"} {
		category := []int64{7, 1 << 31, 1 << 62, math.MaxInt64}[i]
		if _, err := storePet(ctx, s.store, domain.Pet{Name: name, CategoryID: category}); err != nil {
			t.Fatal(err)
		}
	}
	// Ids with gaps (pets deleted by hand) in the first chunks, so that
	// finding an id cannot rely on ids being dense; the last chunk's are.
	if _, err := s.sqlite.Writer().Exec(`DELETE FROM pets WHERE (id < 5000 AND id % 7 = 0) OR id BETWEEN 3000 AND 3500 OR id < 3`); err != nil {
		t.Fatal(err)
	}
	memory := newPetCache(s.store, defaultDBTimeout)
	if err := memory.load(ctx); err != nil {
		t.Fatal(err)
	}
	database := newPetCache(s.store, defaultDBTimeout) // never loaded: reads go to SQLite

	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2_000 {
		status := []string{"", "available", "pending", "sold"}[rng.IntN(4)]
		after := rng.Int64N(9_100)
		if i%10 == 0 {
			after = 0
		}
		limit := 1 + rng.IntN(100)
		got, err := memory.list(ctx, status, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		want, err := database.list(ctx, status, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.body, want.body) || got.next != want.next {
			t.Fatalf("list(%q, after %d, limit %d):\nmemory   next=%d %.200s\ndatabase next=%d %.200s",
				status, after, limit, got.next, got.body, want.next, want.body)
		}
	}
	for id := int64(0); id <= 9_010; id += 1 + rng.Int64N(20) {
		got, gotErr := memory.get(ctx, id)
		want, wantErr := database.get(ctx, id)
		if !bytes.Equal(got, want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("get(%d): memory %s %v, database %s %v", id, got, gotErr, want, wantErr)
		}
	}
}

// Pets created while the copy is being made are neither missed nor doubled.
func TestPetsCreatedDuringTheLoadAreKept(t *testing.T) {
	s := newTestServerWith(t, testOptions{petsFromDatabase: true})
	ctx := context.Background()
	seedPets(t, s.sqlite.Writer(), 25_000)
	pets := newPetCache(s.store, defaultDBTimeout)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := pets.load(ctx); err != nil {
			t.Error(err)
		}
	})
	for i := range 300 {
		if _, err := pets.create(ctx, domain.Pet{Name: fmt.Sprint("late ", i), CategoryID: 1, Status: "sold"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if pets.count != 25_300 {
		t.Fatalf("copy holds %d pets, want 25,300", pets.count)
	}
	for pos := 1; pos < pets.count; pos++ {
		if pets.idAt(pos) <= pets.idAt(pos-1) {
			t.Fatalf("ids out of order at %d: %d after %d", pos, pets.idAt(pos), pets.idAt(pos-1))
		}
	}
}

func TestListShowsACreatedPetAtOnce(t *testing.T) {
	s := newTestServer(t)
	key := s.mustCreateKey("enterprise", domain.Limits{PerMinute: 10_000, PerDay: 10_000})
	for i := range 30 {
		w := s.do("POST", "/v1/pets", key, fmt.Sprintf(`{"name":"p%d","categoryId":1,"status":"pending"}`, i))
		if w.Code != 201 {
			t.Fatal(w.Code, w.Body)
		}
		list := s.do("GET", "/v1/pets?status=pending&limit=100", key, "")
		if !bytes.Contains(list.Body.Bytes(), fmt.Appendf(nil, `"name":"p%d"`, i)) {
			t.Fatalf("pet p%d acknowledged but missing from the list: %s", i, list.Body)
		}
	}
}

// Walking the pages after each create, twice so that kept pages are used,
// always shows every pet: no kept page is ever stale, including a last
// page that was exactly full before the create.
func TestListPagesAreNeverStaleAfterACreate(t *testing.T) {
	s := newTestServer(t)
	key := s.mustCreateKey("enterprise", domain.Limits{PerMinute: 10_000, PerDay: 10_000})
	var all, available []int64
	walk := func(start string) []int64 {
		var ids []int64
		for target := start; ; {
			w := s.do("GET", target, key, "")
			ids = append(ids, apiIDs(apiReadPets(t, w))...)
			next, ok := apiNextLink(t, w)
			if !ok {
				return ids
			}
			target = next
		}
	}
	for i := range 17 {
		status := []string{"available", "sold"}[i%2]
		w := s.do("POST", "/v1/pets", key, fmt.Sprintf(`{"name":"p%d","categoryId":1,"status":%q}`, i, status))
		if w.Code != 201 {
			t.Fatal(w.Code, w.Body)
		}
		id := apiReadPet(t, w.Body.Bytes()).ID
		all = append(all, id)
		if status == "available" {
			available = append(available, id)
		}
		for range 2 {
			if got := walk("/v1/pets?limit=4"); !slices.Equal(got, all) {
				t.Fatalf("after %d creates the pages show %v, want %v", i+1, got, all)
			}
			if got := walk("/v1/pets?limit=3&status=available"); !slices.Equal(got, available) {
				t.Fatalf("after %d creates the available pages show %v, want %v", i+1, got, available)
			}
		}
	}
}

func TestPageCacheStaysWithinItsSize(t *testing.T) {
	for _, tt := range []struct {
		name string
		body int
	}{{"large pages", 100 << 10}, {"pages of one pet, where the entries cost more than the bodies", 60}} {
		t.Run(tt.name, func(t *testing.T) {
			var c pageCache
			body := make([]byte, tt.body)
			link := []string{nextLink(listQuery{limit: 1}, 1)}
			pages := int64(5 * pageCacheBytes / tt.body)
			for after := range pages {
				c.put(listQuery{limit: 1, after: after}, &cachedPage{body: body, link: link})
			}
			held := int64(0)
			c.pages.Range(func(_, p any) bool {
				held += p.(*cachedPage).size()
				return true
			})
			if held > pageCacheBytes || held != c.bytes.Load() {
				t.Errorf("the cache holds %d bytes and counts %d, for a bound of %d", held, c.bytes.Load(), pageCacheBytes)
			}
			if _, ok := c.get(listQuery{limit: 1, after: pages - 1}); !ok {
				t.Error("the page put last is not kept")
			}
			if _, ok := c.get(listQuery{limit: 1, after: 0}); ok {
				t.Error("the page put first is still kept after five times the bound")
			}
		})
	}
}

// A batch is stored with multi-row inserts between the creates that carry an
// Idempotency-Key; each pet gets the id of its own row, ascending in batch
// order.
func TestABatchOfCreatesGetsTheIdsOfItsRows(t *testing.T) {
	s := newTestServer(t)
	ctx := context.Background()
	for _, size := range []int{1, 2, 3, 27, 256, 300} {
		batch := make([]domain.PetInsert, size)
		for i := range batch {
			batch[i].Pet = domain.Pet{Name: fmt.Sprintf("pet %d of %d", i, size), CategoryID: int64(i + 1), Status: []string{"", "sold"}[i%2]}
			if i%11 == 5 {
				batch[i].Idem = &domain.IdempotencyRecord{KeyID: 1, Key: fmt.Sprintf("%d-%d", size, i), RequestHash: []byte{1}}
			}
		}
		if err := s.store.CreatePets(ctx, batch); err != nil {
			t.Fatal(err)
		}
		for i, in := range batch {
			if in.Err != nil {
				t.Fatal(in.Err)
			}
			if i > 0 && in.Pet.ID <= batch[i-1].Pet.ID {
				t.Fatalf("batch of %d: pet %d has id %d after %d", size, i, in.Pet.ID, batch[i-1].Pet.ID)
			}
			stored, err := s.store.GetPet(ctx, in.Pet.ID)
			if err != nil || stored != in.Pet {
				t.Fatalf("batch of %d: pet %d was given id %d, which holds %+v (%v)", size, i, in.Pet.ID, stored, err)
			}
		}
	}
}

// storePet stores p as a create does, through the store's batch insert.
func storePet(ctx context.Context, store domain.PetStore, p domain.Pet) (domain.Pet, error) {
	batch := []domain.PetInsert{{Pet: p}}
	if err := store.CreatePets(ctx, batch); err != nil {
		return domain.Pet{}, err
	}
	return batch[0].Pet, batch[0].Err
}
