package main

import (
	"context"
)

// petCache answers pet reads with encoded JSON, from the store. Handlers go
// through it for every pet read and write, so that whatever it keeps in
// memory is dropped by a write before that write is acknowledged.
type petCache struct {
	store *Store
}

func newPetCache(store *Store) *petCache {
	return &petCache{store: store}
}

// page is one encoded page of listPets; next is the id its Link rel="next"
// continues after, or 0 on the last page.
type page struct {
	body []byte
	next int64
}

func (c *petCache) list(ctx context.Context, status string, after int64, limit int) (page, error) {
	pets, err := c.store.ListPets(ctx, status, after, limit+1)
	if err != nil {
		return page{}, err
	}
	var p page
	if len(pets) > limit {
		pets = pets[:limit]
		p.next = pets[limit-1].ID
	}
	p.body = appendPets(make([]byte, 0, 64*len(pets)+4), pets)
	return p, nil
}

func (c *petCache) get(ctx context.Context, id int64) ([]byte, error) {
	p, err := c.store.GetPet(ctx, id)
	if err != nil {
		return nil, err
	}
	return append(appendPet(nil, &p), '\n'), nil
}

func (c *petCache) create(ctx context.Context, p Pet) (Pet, error) {
	return c.store.CreatePet(ctx, p)
}

func (c *petCache) createOnce(ctx context.Context, p Pet, rec idempotencyRecord) (Pet, error) {
	return c.store.CreatePetOnce(ctx, p, rec)
}
