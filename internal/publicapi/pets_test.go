package publicapi_test

import (
	"bytes"
	"context"
	"fmt"
	"petstore/internal/servertest"
	"slices"
	"testing"

	"petstore/internal/domain"
	"petstore/internal/testkit"
)

func TestListShowsACreatedPetAtOnce(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{})
	key := s.MustCreateKey("enterprise", domain.Limits{PerMinute: 10_000, PerDay: 10_000})
	for i := range 30 {
		w := s.Do("POST", "/v1/pets", key, fmt.Sprintf(`{"name":"p%d","categoryId":1,"status":"pending"}`, i))
		if w.Code != 201 {
			t.Fatal(w.Code, w.Body)
		}
		list := s.Do("GET", "/v1/pets?status=pending&limit=100", key, "")
		if !bytes.Contains(list.Body.Bytes(), fmt.Appendf(nil, `"name":"p%d"`, i)) {
			t.Fatalf("pet p%d acknowledged but missing from the list: %s", i, list.Body)
		}
	}
}

// Walking the pages after each create, twice so that kept pages are used,
// always shows every pet: no kept page is ever stale, including a last
// page that was exactly full before the create.
func TestListPagesAreNeverStaleAfterACreate(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{})
	key := s.MustCreateKey("enterprise", domain.Limits{PerMinute: 10_000, PerDay: 10_000})
	var all, available []int64
	walk := func(start string) []int64 {
		var ids []int64
		for target := start; ; {
			w := s.Do("GET", target, key, "")
			ids = append(ids, testkit.PetIDs(testkit.ReadPets(t, w))...)
			next, ok := testkit.NextLink(t, w)
			if !ok {
				return ids
			}
			target = next
		}
	}
	for i := range 17 {
		status := []string{"available", "sold"}[i%2]
		w := s.Do("POST", "/v1/pets", key, fmt.Sprintf(`{"name":"p%d","categoryId":1,"status":%q}`, i, status))
		if w.Code != 201 {
			t.Fatal(w.Code, w.Body)
		}
		id := testkit.ReadPet(t, w.Body.Bytes()).ID
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

// A batch is stored with multi-row inserts between the creates that carry an
// Idempotency-Key; each pet gets the id of its own row, ascending in batch
// order.
func TestABatchOfCreatesGetsTheIdsOfItsRows(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{})
	ctx := context.Background()
	for _, size := range []int{1, 2, 3, 27, 256, 300} {
		batch := make([]domain.PetInsert, size)
		for i := range batch {
			batch[i].Pet = domain.Pet{Name: fmt.Sprintf("pet %d of %d", i, size), CategoryID: int64(i + 1), Status: []string{"", "sold"}[i%2]}
			if i%11 == 5 {
				batch[i].Idem = &domain.IdempotencyRecord{KeyID: 1, Key: fmt.Sprintf("%d-%d", size, i), RequestHash: []byte{1}}
			}
		}
		if err := s.Store().CreatePets(ctx, batch); err != nil {
			t.Fatal(err)
		}
		for i, in := range batch {
			if in.Err != nil {
				t.Fatal(in.Err)
			}
			if i > 0 && in.Pet.ID <= batch[i-1].Pet.ID {
				t.Fatalf("batch of %d: pet %d has id %d after %d", size, i, in.Pet.ID, batch[i-1].Pet.ID)
			}
			stored, err := s.Store().GetPet(ctx, in.Pet.ID)
			if err != nil || stored != in.Pet {
				t.Fatalf("batch of %d: pet %d was given id %d, which holds %+v (%v)", size, i, in.Pet.ID, stored, err)
			}
		}
	}
}
