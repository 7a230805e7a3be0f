package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// boundStorage is the storage as the server uses it. Each call ends by the
// database deadline (--db-timeout), sooner when its context says so, and a
// call whose deadline passed is answered 503 unavailable (cause timeout)
// whatever the engine made of it. Each call is timed into
// petstore_database_call_duration_seconds when there are metrics, and what
// it found tells the health probe (dbHealth) when to look again; Ping
// answers from that probe. It spells out each method rather than embedding
// the storage, so that a method added to the interface fails to compile
// here until it is bounded and timed too.
type boundStorage struct {
	s       storage
	timeout time.Duration
	health  *dbHealth

	createPets, getPet, listPets, scanPets                         callTimer
	idempotencyRecord, pruneIdempotency                            callTimer
	createKey, createFirstKey, revokeKey, rollKey, keys, keyByHash callTimer
	keysVersion, setLastUsed                                       callTimer
	usage, addUsage                                                callTimer
	addAuditEvents, auditEvents, auditCounts                       callTimer
	updateKey, addUsageHistory, usageHistory, pruneUsageHistory    callTimer
	createAdminToken, adminTokens, adminTokenByHash, revokeAdmin   callTimer
}

// newBoundStorage returns s bounded by timeout, timed into m (nil: not
// timed), its outages logged to logger.
func newBoundStorage(s storage, timeout time.Duration, m *metrics, logger *slog.Logger) *boundStorage {
	ping := m.databaseCall("Ping")
	return &boundStorage{
		s:       s,
		timeout: timeout,
		health: newDBHealth(func(ctx context.Context) error {
			defer ping.since(time.Now())
			return s.Ping(ctx)
		}, min(timeout, readyTimeout), logger, m.setDatabaseDown),
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
		addAuditEvents:    m.databaseCall("AddAuditEvents"),
		auditEvents:       m.databaseCall("AuditEvents"),
		auditCounts:       m.databaseCall("AuditCounts"),
		updateKey:         m.databaseCall("UpdateKey"),
		addUsageHistory:   m.databaseCall("AddUsageHistory"),
		usageHistory:      m.databaseCall("UsageHistory"),
		pruneUsageHistory: m.databaseCall("PruneUsageHistory"),
		createAdminToken:  m.databaseCall("CreateAdminToken"),
		adminTokens:       m.databaseCall("AdminTokens"),
		adminTokenByHash:  m.databaseCall("AdminTokenByHash"),
		revokeAdmin:       m.databaseCall("RevokeAdminToken"),
	}
}

// dbCall is one call in progress: when it began, and how to end its
// deadline when it set one.
type dbCall struct {
	b      *boundStorage
	start  time.Time
	cancel context.CancelFunc
}

// begin starts a call: ctx ends by the deadline, unless it ends sooner.
func (b *boundStorage) begin(ctx context.Context) (context.Context, dbCall) {
	c := dbCall{b: b, start: time.Now()}
	if d, ok := ctx.Deadline(); !ok || d.Sub(c.start) > b.timeout {
		ctx, c.cancel = context.WithTimeout(ctx, b.timeout)
	}
	return ctx, c
}

// end ends the call that returned err, and returns the error its caller
// gets.
func (c dbCall) end(timer callTimer, err error) error {
	if c.cancel != nil {
		c.cancel()
	}
	timer.since(c.start)
	if err != nil && dbFailureOf(err) == 0 && errors.Is(err, context.DeadlineExceeded) {
		err = errDatabase(dbTimeout, err)
	}
	c.b.health.saw(err)
	return err
}

func (b *boundStorage) CreatePets(ctx context.Context, batch []petInsert) (err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.createPets, err) }()
	return b.s.CreatePets(ctx, batch)
}

func (b *boundStorage) GetPet(ctx context.Context, id int64) (_ Pet, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.getPet, err) }()
	return b.s.GetPet(ctx, id)
}

func (b *boundStorage) ListPets(ctx context.Context, status string, after int64, limit int) (_ []Pet, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.listPets, err) }()
	return b.s.ListPets(ctx, status, after, limit)
}

func (b *boundStorage) ScanPets(ctx context.Context, after int64, limit int, fn func(id int64, name []byte, categoryID int64, status []byte)) (_ int, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.scanPets, err) }()
	return b.s.ScanPets(ctx, after, limit, fn)
}

func (b *boundStorage) IdempotencyRecord(ctx context.Context, keyID int64, key string, since time.Time) (_ idempotencyRecord, _ bool, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.idempotencyRecord, err) }()
	return b.s.IdempotencyRecord(ctx, keyID, key, since)
}

func (b *boundStorage) PruneIdempotency(ctx context.Context, cutoff time.Time) (_ int64, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.pruneIdempotency, err) }()
	return b.s.PruneIdempotency(ctx, cutoff)
}

func (b *boundStorage) CreateKey(ctx context.Context, k apiKey, actor string) (_ apiKey, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.createKey, err) }()
	return b.s.CreateKey(ctx, k, actor)
}

func (b *boundStorage) CreateFirstKey(ctx context.Context, k apiKey, actor string) (_ apiKey, _ bool, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.createFirstKey, err) }()
	return b.s.CreateFirstKey(ctx, k, actor)
}

func (b *boundStorage) RevokeKey(ctx context.Context, id int64, actor string) (_ bool, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.revokeKey, err) }()
	return b.s.RevokeKey(ctx, id, actor)
}

func (b *boundStorage) UpdateKey(ctx context.Context, id int64, change func(apiKey) (apiKey, error), actor string) (before, after apiKey, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.updateKey, err) }()
	return b.s.UpdateKey(ctx, id, change, actor)
}

func (b *boundStorage) AddUsageHistory(ctx context.Context, rows []usageDay) (err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.addUsageHistory, err) }()
	return b.s.AddUsageHistory(ctx, rows)
}

func (b *boundStorage) UsageHistory(ctx context.Context, budgetID int64, from string) (_ []usageDay, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.usageHistory, err) }()
	return b.s.UsageHistory(ctx, budgetID, from)
}

func (b *boundStorage) PruneUsageHistory(ctx context.Context, before string) (_ int64, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.pruneUsageHistory, err) }()
	return b.s.PruneUsageHistory(ctx, before)
}

func (b *boundStorage) CreateAdminToken(ctx context.Context, t adminToken, actor string) (_ adminToken, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.createAdminToken, err) }()
	return b.s.CreateAdminToken(ctx, t, actor)
}

func (b *boundStorage) AdminTokens(ctx context.Context) (_ []adminToken, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.adminTokens, err) }()
	return b.s.AdminTokens(ctx)
}

func (b *boundStorage) AdminTokenByHash(ctx context.Context, hash []byte) (_ adminToken, _ bool, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.adminTokenByHash, err) }()
	return b.s.AdminTokenByHash(ctx, hash)
}

func (b *boundStorage) RevokeAdminToken(ctx context.Context, id int64, actor string) (_ bool, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.revokeAdmin, err) }()
	return b.s.RevokeAdminToken(ctx, id, actor)
}

func (b *boundStorage) RollKey(ctx context.Context, id int64, hash []byte, overlap time.Duration, actor string) (old, rolled apiKey, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.rollKey, err) }()
	return b.s.RollKey(ctx, id, hash, overlap, actor)
}

func (b *boundStorage) Keys(ctx context.Context) (_ []apiKey, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.keys, err) }()
	return b.s.Keys(ctx)
}

func (b *boundStorage) KeyByHash(ctx context.Context, hash []byte) (_ apiKey, _ bool, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.keyByHash, err) }()
	return b.s.KeyByHash(ctx, hash)
}

func (b *boundStorage) KeysVersion(ctx context.Context) (_ int64, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.keysVersion, err) }()
	return b.s.KeysVersion(ctx)
}

func (b *boundStorage) SetLastUsed(ctx context.Context, uses []lastUse) (err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.setLastUsed, err) }()
	return b.s.SetLastUsed(ctx, uses)
}

func (b *boundStorage) Usage(ctx context.Context, keyID int64, day string) (_ int64, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.usage, err) }()
	return b.s.Usage(ctx, keyID, day)
}

func (b *boundStorage) AddUsage(ctx context.Context, counts []usageCount) (err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.addUsage, err) }()
	return b.s.AddUsage(ctx, counts)
}
func (b *boundStorage) AddAuditEvents(ctx context.Context, events []auditEvent) (err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.addAuditEvents, err) }()
	return b.s.AddAuditEvents(ctx, events)
}

func (b *boundStorage) AuditEvents(ctx context.Context, filter auditFilter) (_ []auditEvent, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.auditEvents, err) }()
	return b.s.AuditEvents(ctx, filter)
}

func (b *boundStorage) AuditCounts(ctx context.Context) (_ map[string]int64, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.auditCounts, err) }()
	return b.s.AuditCounts(ctx)
}

// Ping tells whether the database is ready, from the health probe.
func (b *boundStorage) Ping(ctx context.Context) error { return b.health.ready(ctx) }

// What the engine is, its background work and its snapshots are not calls
// a request waits for: they are passed on untimed, as Close is. The
// engine's background work bounds each of its steps by the deadline; the
// health probe runs beside it.

func (b *boundStorage) Shared() bool { return b.s.Shared() }

func (b *boundStorage) Namespace() string { return b.s.Namespace() }

func (b *boundStorage) Maintain(ctx context.Context, timeout time.Duration, petsAdded func(), logger *slog.Logger) {
	var wg sync.WaitGroup
	wg.Go(func() { b.health.watch(ctx) })
	b.s.Maintain(ctx, timeout, petsAdded, logger)
	wg.Wait()
}

func (b *boundStorage) Snapshot(ctx context.Context) (snapshot, error) { return b.s.Snapshot(ctx) }

// Close closes the engine, waiting for it no longer than the deadline: the
// connections of a database that stalls may each wait far longer to say
// goodbye (pgx gives its cancel request 15 s), which a stopping server
// need not wait for.
func (b *boundStorage) Close() error {
	closed := make(chan error, 1)
	go func() { closed <- b.s.Close() }()
	select {
	case err := <-closed:
		return err
	case <-time.After(b.timeout):
		return errDatabase(dbTimeout, errors.New("the database did not close within the deadline; its connections are left to close"))
	}
}
