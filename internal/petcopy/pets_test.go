package petcopy

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/store"
	"petstore/internal/testkit"
)

// timeout bounds the database work of a create, as --db-timeout does.
const timeout = 3 * time.Second

// openStore opens a SQLite store of the test's own, a file in its
// temporary directory; SQLite is the source of truth the copy answers like.
func openStore(t *testing.T) *store.SQLite {
	t.Helper()
	s, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "pets.db"), true, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The in-memory copy must answer exactly as the database does.
func TestMemoryCopyAnswersLikeTheDatabase(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	testkit.SeedPets(t, s.Writer(), 9_000) // more than two chunks
	// Categories beyond int32 widen their chunk's column.
	for i, name := range []string{"quote \" backslash \\", "tab\there", "émoji 🐈", "\u2028"} {
		category := []int64{7, 1 << 31, 1 << 62, math.MaxInt64}[i]
		if _, err := storePet(ctx, s, domain.Pet{Name: name, CategoryID: category}); err != nil {
			t.Fatal(err)
		}
	}
	// Ids with gaps (pets deleted by hand) in the first chunks, so that
	// finding an id cannot rely on ids being dense; the last chunk's are.
	if _, err := s.Writer().Exec(`DELETE FROM pets WHERE (id < 5000 AND id % 7 = 0) OR id BETWEEN 3000 AND 3500 OR id < 3`); err != nil {
		t.Fatal(err)
	}
	memory := New(s, timeout)
	if err := memory.Load(ctx); err != nil {
		t.Fatal(err)
	}
	database := New(s, timeout) // never loaded: reads go to SQLite

	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2_000 {
		status := []string{"", "available", "pending", "sold"}[rng.IntN(4)]
		after := rng.Int64N(9_100)
		if i%10 == 0 {
			after = 0
		}
		limit := 1 + rng.IntN(100)
		got, err := memory.List(ctx, status, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		want, err := database.List(ctx, status, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Body, want.Body) || got.Next != want.Next {
			t.Fatalf("list(%q, after %d, limit %d):\nmemory   next=%d %.200s\ndatabase next=%d %.200s",
				status, after, limit, got.Next, got.Body, want.Next, want.Body)
		}
	}
	for id := int64(0); id <= 9_010; id += 1 + rng.Int64N(20) {
		got, gotErr := memory.Get(ctx, id)
		want, wantErr := database.Get(ctx, id)
		if !bytes.Equal(got, want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("get(%d): memory %s %v, database %s %v", id, got, gotErr, want, wantErr)
		}
	}
}

// Pets created while the copy is being made are neither missed nor doubled.
func TestPetsCreatedDuringTheLoadAreKept(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	testkit.SeedPets(t, s.Writer(), 25_000)
	pets := New(s, timeout)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := pets.Load(ctx); err != nil {
			t.Error(err)
		}
	})
	for i := range 300 {
		if _, err := pets.Create(ctx, domain.Pet{Name: fmt.Sprint("late ", i), CategoryID: 1, Status: "sold"}, nil); err != nil {
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

// storePet stores p as a create does, through the store's batch insert.
func storePet(ctx context.Context, store domain.PetStore, p domain.Pet) (domain.Pet, error) {
	batch := []domain.PetInsert{{Pet: p}}
	if err := store.CreatePets(ctx, batch); err != nil {
		return domain.Pet{}, err
	}
	return batch[0].Pet, batch[0].Err
}
