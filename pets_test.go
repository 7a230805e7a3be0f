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
	"time"
)

// The in-memory copy must answer exactly as the database does.
func TestMemoryCopyAnswersLikeTheDatabase(t *testing.T) {
	s := newTestServerWith(t, testOptions{petsFromDatabase: true})
	ctx := context.Background()
	seedPets(t, s.store.write, 9_000) // more than two chunks
	// Categories beyond int32 widen their chunk's column.
	for i, name := range []string{"quote \" backslash \\", "tab\there", "émoji 🐈", "\u2028"} {
		category := []int64{7, 1 << 31, 1 << 62, math.MaxInt64}[i]
		if _, err := s.store.CreatePet(ctx, Pet{Name: name, CategoryID: category}); err != nil {
			t.Fatal(err)
		}
	}
	// Ids with gaps (pets deleted by hand) in the first chunks, so that
	// finding an id cannot rely on ids being dense; the last chunk's are.
	if _, err := s.store.write.Exec(`DELETE FROM pets WHERE (id < 5000 AND id % 7 = 0) OR id BETWEEN 3000 AND 3500 OR id < 3`); err != nil {
		t.Fatal(err)
	}
	memory := newPetCache(s.store)
	if err := memory.load(ctx); err != nil {
		t.Fatal(err)
	}
	database := newPetCache(s.store) // never loaded: reads go to SQLite

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
	seedPets(t, s.store.write, 25_000)
	pets := newPetCache(s.store)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := pets.load(ctx); err != nil {
			t.Error(err)
		}
	})
	for i := range 300 {
		if _, err := pets.create(ctx, Pet{Name: fmt.Sprint("late ", i), CategoryID: 1, Status: "sold"}, nil); err != nil {
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
	key := s.mustCreateKey("enterprise", limits{PerMinute: 10_000, PerDay: 10_000})
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
	key := s.mustCreateKey("enterprise", limits{PerMinute: 10_000, PerDay: 10_000})
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
	var c pageCache
	body := make([]byte, 100<<10)
	for after := range int64(200) { // 20 MiB of pages
		c.put(listQuery{limit: 100, after: after}, &cachedPage{body: body})
		if n := c.bytes.Load(); n > pageCacheBytes {
			t.Fatalf("after %d pages the cache holds %d bytes", after+1, n)
		}
	}
	if _, ok := c.get(listQuery{limit: 100, after: 199}); !ok {
		t.Error("the page put last is not kept")
	}
	if _, ok := c.get(listQuery{limit: 100, after: 0}); ok {
		t.Error("the page put first is still kept after 20 MiB more")
	}
}

// The writer leaves checkpoints to Checkpoint, which keeps the WAL small
// even while creates never stop: the WAL starts over after a checkpoint
// instead of growing with every commit.
func TestCheckpointKeepsTheWALSmallUnderSteadyCreates(t *testing.T) {
	s := newTestServer(t)
	ctx := context.Background()
	var auto int
	if err := s.store.write.QueryRow("PRAGMA wal_autocheckpoint").Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("the writer checkpoints by itself every %d pages (%v)", auto, err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.pets.create(ctx, Pet{Name: "Rex", CategoryID: 1}, nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var frames []int
	for range 20 {
		time.Sleep(20 * time.Millisecond)
		n, err := s.store.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, n)
	}
	close(stop)
	wg.Wait()
	startedOver := 0
	for i := 1; i < len(frames); i++ {
		if frames[i] < frames[i-1] {
			startedOver++
		}
	}
	if startedOver < len(frames)/4 {
		t.Errorf("the WAL started over after %d of %d checkpoints; frames it held: %v", startedOver, len(frames), frames)
	}
}

// A batch is stored with multi-row inserts between the creates that carry an
// Idempotency-Key; each pet gets the id of its own row, ascending in batch
// order.
func TestABatchOfCreatesGetsTheIdsOfItsRows(t *testing.T) {
	s := newTestServer(t)
	ctx := context.Background()
	for _, size := range []int{1, 2, 3, 27, 256, 300} {
		batch := make([]petInsert, size)
		for i := range batch {
			batch[i].Pet = Pet{Name: fmt.Sprintf("pet %d of %d", i, size), CategoryID: int64(i + 1), Status: []string{"", "sold"}[i%2]}
			if i%11 == 5 {
				batch[i].Idem = &idempotencyRecord{KeyID: 1, Key: fmt.Sprintf("%d-%d", size, i), RequestHash: []byte{1}}
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

func TestCheckpointWaitsForAPauseInTheWrites(t *testing.T) {
	start := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	type look struct {
		after   time.Duration // since start
		commits int64         // counted by then
		due     bool
	}
	tests := []struct {
		name  string
		looks []look
	}{
		{"nothing written: no checkpoint", []look{{time.Second, 0, false}, {2 * time.Minute, 0, false}}},
		{"writes that pause are checkpointed in the pause", []look{
			{250 * time.Millisecond, 10, false}, {500 * time.Millisecond, 25, false}, {750 * time.Millisecond, 25, true}}},
		{"writes that never pause wait for the commit cap", []look{
			{1 * time.Second, 4000, false}, {2 * time.Second, 8000, false}, {3 * time.Second, 8000 + checkpointAfterCommits, true}}},
		{"a trickle of writes waits at most a minute", []look{
			{30 * time.Second, 1, false}, {59 * time.Second, 2, false}, {61 * time.Second, 3, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy := checkpointPolicy{doneAt: start}
			for i, l := range tt.looks {
				if got := policy.due(start.Add(l.after), l.commits); got != l.due {
					t.Fatalf("look %d (%v, %d commits): due = %v, want %v", i, l.after, l.commits, got, l.due)
				}
			}
		})
	}
}

func TestACheckpointIsMadeOnceForTheCommitsItCopied(t *testing.T) {
	s := newTestServer(t)
	ctx := context.Background()
	policy := checkpointPolicy{doneAt: s.clock.now()}
	if _, err := s.store.CreatePet(ctx, Pet{Name: "Rex", CategoryID: 1}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{0, 1, 1} { // the pause is seen at the second look
		if err := s.store.checkpointIfDue(ctx, &policy, s.clock.now()); err != nil {
			t.Fatal(err)
		}
		if policy.done != want {
			t.Fatalf("look %d: checkpointed up to %d commits, want %d", i, policy.done, want)
		}
	}
}
