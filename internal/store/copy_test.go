package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/testkit"
)

// A snapshot, what petstore copy reads, holds every table as it was when it
// was taken, on either engine: a pet stored after it is not in it.
func TestSnapshotHoldsWhatTheStoreHeldWhenTaken(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Storage) {
		ctx := context.Background()
		createTestKey(t, ctx, s)
		before := createTestPets(t, ctx, s, "available", "", "sold")
		snap, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Close()
		createTestPets(t, ctx, s, "pending")

		rows, err := snap.Rows(ctx, "pets", []string{"id", "name", "status"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for rows.Next() {
			values, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, string(asBytes(values[1])))
			if values[2] == nil && len(names) != 2 {
				t.Errorf("pet %v without a status; only the second has none", values)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if want := []string{before[0].Name, before[1].Name, before[2].Name}; !slices.Equal(names, want) {
			t.Errorf("pets in the snapshot: %q, want those stored before it %q", names, want)
		}
		for table, want := range map[string]int64{"pets": 3, "api_keys": 1} {
			if n, err := snap.Count(ctx, table); err != nil || n != want {
				t.Errorf("%s in the snapshot: %d (%v), want %d", table, n, err, want)
			}
		}
		if last, err := snap.LastID(ctx, "pets"); err != nil || last < before[2].ID {
			t.Errorf("the last pet id of the snapshot: %d (%v), want at least %d", last, err, before[2].ID)
		}
	})
}

// eachEngine runs test on a new SQLite store in a file of its own and on a
// new PostgreSQL store in a schema of its own. The store's own tests open
// it directly: a server (internal/servertest) imports the store, so a test
// of this package that started one would compile every package between
// the two again for this package's tests.
func eachEngine(t *testing.T, test func(t *testing.T, s Storage)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		s, _ := openTestSQLite(t, time.Now)
		test(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		s, err := OpenPostgres(t.Context(), testkit.PostgresURL(t), time.Now)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		test(t, s)
	})
}

// testEnv is the environment of the keys and endpoints the tests store.
const testEnv = "production"

// createTestKey stores a new free key of testEnv with every scope, in ctx.
func createTestKey(t *testing.T, ctx context.Context, s Storage) domain.Key {
	t.Helper()
	hash := domain.HashKey(domain.NewKeyToken(testEnv))
	lim := domain.Plans["free"]
	k, err := s.CreateKey(ctx, domain.Key{Env: testEnv, Name: "test", Plan: "free",
		PerMinute: lim.PerMinute, PerDay: lim.PerDay, Scopes: domain.AllScopes, Hash: hash[:]}, "test")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// createTestPets stores a pet of each status ("" for none), one batch each,
// in ctx, and returns them with their ids.
func createTestPets(t *testing.T, ctx context.Context, s Storage, statuses ...string) []domain.Pet {
	t.Helper()
	var pets []domain.Pet
	for i, status := range statuses {
		batch := []domain.PetInsert{{Pet: domain.Pet{Name: fmt.Sprintf("pet-%d-%s", i, status), CategoryID: 1, Status: status}}}
		if err := s.CreatePets(ctx, batch); err != nil || batch[0].Err != nil {
			t.Fatalf("create a pet: %v %v", err, batch[0].Err)
		}
		pets = append(pets, batch[0].Pet)
	}
	return pets
}

// asBytes is a text value as either engine returns it.
func asBytes(v any) []byte {
	switch v := v.(type) {
	case string:
		return []byte(v)
	case []byte:
		return v
	}
	return nil
}
