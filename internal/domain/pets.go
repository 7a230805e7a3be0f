package domain

import (
	"context"
	"time"
)

// Pet is an animal of the store. An empty Status means none was given.
type Pet struct {
	ID         int64
	Name       string
	CategoryID int64
	Status     string
}

// PetStore keeps the pets. No committed pet is ever changed or deleted:
// pets are only added, each with an id above all others. The pet copy, the
// page cache ("needs no invalidation"), the PostgreSQL id ordering and the
// keyset cursors rely on it. The one exception is inside a create's own
// transaction: a pet whose Idempotency-Key another request holds is deleted
// again before the commit (docs/design.md#what-no-code-may-do).
type PetStore interface {
	// CreatePets stores a batch of pets in one transaction, in id order.
	// An error returned means none was stored; otherwise each insert has
	// its id or its own Err.
	CreatePets(ctx context.Context, batch []PetInsert) error
	// GetPet returns the pet with the given id, or a not_found Error.
	GetPet(ctx context.Context, id int64) (Pet, error)
	// ListPets returns up to limit pets with ids above after, in id order,
	// only those with status when it is not empty.
	ListPets(ctx context.Context, status string, after int64, limit int) ([]Pet, error)
	// ScanPets calls fn for up to limit pets with ids above after, in id
	// order; the byte slices are valid only during the call.
	ScanPets(ctx context.Context, after int64, limit int, fn func(id int64, name []byte, categoryID int64, status []byte)) (int, error)
	// PetsAdded receives when other servers may have stored pets (never
	// on SQLite, where this server is the only one): the reader looks for
	// them. Notices that come while one waits unread are one.
	PetsAdded() <-chan struct{}
}

// IdempotencyStore keeps the records that replay a create.
type IdempotencyStore interface {
	IdempotencyRecord(ctx context.Context, keyID int64, key string, since time.Time) (IdempotencyRecord, bool, error)
	PruneIdempotency(ctx context.Context, cutoff time.Time) (int64, error)
}

// IdempotencyTTL is how long an Idempotency-Key is kept: a retry within it
// with the same key and body gets the first response again
// (docs/api.md).
const IdempotencyTTL = 24 * time.Hour

// IdempotencyRecord ties an Idempotency-Key of one API key to the pet its
// first request created.
type IdempotencyRecord struct {
	KeyID       int64
	Key         string
	RequestHash []byte
	PetID       int64
	CreatedAt   time.Time
}

// PetInsert is one pet to store, with the idempotency record that will
// replay it (nil without an Idempotency-Key). CreatePets sets the pet's ID,
// or Err.
type PetInsert struct {
	Pet  Pet
	Idem *IdempotencyRecord
	Err  error
}

func KnownStatus(s string) bool {
	return s == "available" || s == "pending" || s == "sold"
}
