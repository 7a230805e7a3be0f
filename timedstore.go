package main

import (
	"context"
	"log/slog"
	"time"
)

// timedStorage is a storage that times every call into
// petstore_database_call_duration_seconds, by method. It spells out each
// method rather than embedding the storage, so that a method added to the
// interface fails to compile here until it is timed too.
type timedStorage struct {
	s storage

	createPets, getPet, listPets, scanPets                         callTimer
	idempotencyRecord, pruneIdempotency                            callTimer
	createKey, createFirstKey, revokeKey, rollKey, keys, keyByHash callTimer
	keysVersion, setLastUsed                                       callTimer
	usage, addUsage, ping                                          callTimer
	addAuditEvents, auditEvents, auditCounts                       callTimer
}

// timeStorage returns s timed into m, or s itself without metrics.
func timeStorage(s storage, m *metrics) storage {
	if m == nil {
		return s
	}
	return &timedStorage{
		s:                 s,
		createPets:        m.databaseCall("CreatePets"),
		getPet:            m.databaseCall("GetPet"),
		listPets:          m.databaseCall("ListPets"),
		scanPets:          m.databaseCall("ScanPets"),
		idempotencyRecord: m.databaseCall("IdempotencyRecord"),
		pruneIdempotency:  m.databaseCall("PruneIdempotency"),
		createKey:         m.databaseCall("CreateKey"),
		createFirstKey:    m.databaseCall("CreateFirstKey"),
		revokeKey:         m.databaseCall("RevokeKey"),
		rollKey:           m.databaseCall("RollKey"),
		keys:              m.databaseCall("Keys"),
		keyByHash:         m.databaseCall("KeyByHash"),
		keysVersion:       m.databaseCall("KeysVersion"),
		setLastUsed:       m.databaseCall("SetLastUsed"),
		usage:             m.databaseCall("Usage"),
		addUsage:          m.databaseCall("AddUsage"),
		ping:              m.databaseCall("Ping"),
		addAuditEvents:    m.databaseCall("AddAuditEvents"),
		auditEvents:       m.databaseCall("AuditEvents"),
		auditCounts:       m.databaseCall("AuditCounts"),
	}
}

func (t *timedStorage) CreatePets(ctx context.Context, batch []petInsert) error {
	defer t.createPets.since(time.Now())
	return t.s.CreatePets(ctx, batch)
}

func (t *timedStorage) GetPet(ctx context.Context, id int64) (Pet, error) {
	defer t.getPet.since(time.Now())
	return t.s.GetPet(ctx, id)
}

func (t *timedStorage) ListPets(ctx context.Context, status string, after int64, limit int) ([]Pet, error) {
	defer t.listPets.since(time.Now())
	return t.s.ListPets(ctx, status, after, limit)
}

func (t *timedStorage) ScanPets(ctx context.Context, after int64, limit int, fn func(id int64, name []byte, categoryID int64, status []byte)) (int, error) {
	defer t.scanPets.since(time.Now())
	return t.s.ScanPets(ctx, after, limit, fn)
}

func (t *timedStorage) IdempotencyRecord(ctx context.Context, keyID int64, key string, since time.Time) (idempotencyRecord, bool, error) {
	defer t.idempotencyRecord.since(time.Now())
	return t.s.IdempotencyRecord(ctx, keyID, key, since)
}

func (t *timedStorage) PruneIdempotency(ctx context.Context, cutoff time.Time) (int64, error) {
	defer t.pruneIdempotency.since(time.Now())
	return t.s.PruneIdempotency(ctx, cutoff)
}

func (t *timedStorage) CreateKey(ctx context.Context, k apiKey, actor string) (apiKey, error) {
	defer t.createKey.since(time.Now())
	return t.s.CreateKey(ctx, k, actor)
}

func (t *timedStorage) CreateFirstKey(ctx context.Context, k apiKey, actor string) (apiKey, bool, error) {
	defer t.createFirstKey.since(time.Now())
	return t.s.CreateFirstKey(ctx, k, actor)
}

func (t *timedStorage) RevokeKey(ctx context.Context, id int64, actor string) (bool, error) {
	defer t.revokeKey.since(time.Now())
	return t.s.RevokeKey(ctx, id, actor)
}

func (t *timedStorage) RollKey(ctx context.Context, id int64, hash []byte, overlap time.Duration, actor string) (old, rolled apiKey, err error) {
	defer t.rollKey.since(time.Now())
	return t.s.RollKey(ctx, id, hash, overlap, actor)
}

func (t *timedStorage) Keys(ctx context.Context) ([]apiKey, error) {
	defer t.keys.since(time.Now())
	return t.s.Keys(ctx)
}

func (t *timedStorage) KeyByHash(ctx context.Context, hash []byte) (apiKey, bool, error) {
	defer t.keyByHash.since(time.Now())
	return t.s.KeyByHash(ctx, hash)
}

func (t *timedStorage) KeysVersion(ctx context.Context) (int64, error) {
	defer t.keysVersion.since(time.Now())
	return t.s.KeysVersion(ctx)
}

func (t *timedStorage) SetLastUsed(ctx context.Context, uses []lastUse) error {
	defer t.setLastUsed.since(time.Now())
	return t.s.SetLastUsed(ctx, uses)
}

func (t *timedStorage) Usage(ctx context.Context, keyID int64, day string) (int64, error) {
	defer t.usage.since(time.Now())
	return t.s.Usage(ctx, keyID, day)
}

func (t *timedStorage) AddUsage(ctx context.Context, counts []usageCount) error {
	defer t.addUsage.since(time.Now())
	return t.s.AddUsage(ctx, counts)
}

func (t *timedStorage) AddAuditEvents(ctx context.Context, events []auditEvent) error {
	defer t.addAuditEvents.since(time.Now())
	return t.s.AddAuditEvents(ctx, events)
}

func (t *timedStorage) AuditEvents(ctx context.Context, filter auditFilter) ([]auditEvent, error) {
	defer t.auditEvents.since(time.Now())
	return t.s.AuditEvents(ctx, filter)
}

func (t *timedStorage) AuditCounts(ctx context.Context) (map[string]int64, error) {
	defer t.auditCounts.since(time.Now())
	return t.s.AuditCounts(ctx)
}

func (t *timedStorage) Ping(ctx context.Context) error {
	defer t.ping.since(time.Now())
	return t.s.Ping(ctx)
}

// What the engine is, its background work and its snapshots are not calls
// a request waits for: they are passed on untimed, as Close is.

func (t *timedStorage) Shared() bool { return t.s.Shared() }

func (t *timedStorage) Namespace() string { return t.s.Namespace() }

func (t *timedStorage) Maintain(ctx context.Context, petsAdded func(), logger *slog.Logger) {
	t.s.Maintain(ctx, petsAdded, logger)
}

func (t *timedStorage) Snapshot(ctx context.Context) (snapshot, error) { return t.s.Snapshot(ctx) }

func (t *timedStorage) Close() error { return t.s.Close() }
