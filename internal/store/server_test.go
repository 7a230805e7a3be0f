package store_test

import (
	"context"
	"petstore/internal/servertest"
	"slices"
	"testing"
)

// A snapshot, what petstore copy reads, holds every table as it was when it
// was taken, on either engine: a pet stored after it is not in it.
func TestSnapshotHoldsWhatTheStoreHeldWhenTaken(t *testing.T) {
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		ctx := context.Background()
		s := servertest.Start(t, opts)
		key := s.MustCreateKey("pro")
		before := s.AddPets(key, "available", "", "sold")
		snap, err := s.Store().Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Close()
		s.AddPets(key, "pending")

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
