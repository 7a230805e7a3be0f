package bounded

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"petstore/internal/domain"
	"petstore/internal/metrics"
	"petstore/internal/store"
	"petstore/internal/tracing"

	"github.com/caddyserver/certmagic"
)

// Store is the storage as the server uses it. Each call ends by the
// database deadline (--db-timeout), sooner when its context says so, and a
// call whose deadline passed is answered 503 unavailable (cause timeout)
// whatever the engine made of it. Each call is timed into
// petstore_database_call_duration_seconds under its method's name when
// there are metrics, and what it found tells the health probe (dbHealth)
// when to look again; Ping answers from that probe. It spells out each
// method (through bounded, call or call2) rather than
// embedding the storage, so that a method added to the interface fails to
// compile here until it is bounded too. The pets' methods call bounded
// themselves: they are the hot path, which a generic call would lengthen.
type Store struct {
	s       store.Storage
	system  string // the engine, as a span's db.system says it: sqlite or postgresql
	timeout time.Duration
	health  *dbHealth
	metrics *metrics.Metrics
	timers  sync.Map // method name → metrics.CallTimer, made at its first call
}

// New returns s, the engine system (sqlite or postgresql), bounded by
// timeout, timed into m (nil: not timed), its outages logged to logger.
func New(s store.Storage, system string, timeout time.Duration, m *metrics.Metrics, logger *slog.Logger) *Store {
	ping := m.DatabaseCall("Ping")
	return &Store{
		s:       s,
		system:  system,
		timeout: timeout,
		metrics: m,
		health: &dbHealth{ping: func(ctx context.Context) error {
			defer ping.Since(time.Now())
			return s.Ping(ctx)
		}, timeout: min(timeout, readyTimeout), logger: logger, setDown: m.SetDatabaseDown},
	}
}

// bounded runs call, the storage's method name: its context ends by the
// deadline unless it ends sooner, it is timed (and traced, for a sampled
// request: the span's time is the call's, a wait for a lock or a
// connection included), and what it returns tells the health probe.
func (b *Store) bounded(ctx context.Context, name string, call func(context.Context) error) error {
	ctx, span := tracing.Child(ctx, name)
	if span.On() {
		span.SetString("db.system", b.system)
		span.SetString("db.operation.name", name)
		defer span.End()
	}
	start := time.Now()
	if d, ok := ctx.Deadline(); !ok || d.Sub(start) > b.timeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.timeout)
		defer cancel()
	}
	err := call(ctx)
	b.timer(name).Since(start)
	if err != nil && domain.DBFailureOf(err) == 0 && errors.Is(err, context.DeadlineExceeded) {
		err = domain.Unavailable(domain.DBTimeout, err)
	}
	b.health.saw(err)
	span.Failed(err)
	return err
}

// call and call2 are bounded for a method of one or two results besides its
// error.
func call[T any](b *Store, ctx context.Context, name string, f func(context.Context) (T, error)) (v T, err error) {
	err = b.bounded(ctx, name, func(ctx context.Context) (err error) { v, err = f(ctx); return err })
	return v, err
}

func call2[T, U any](b *Store, ctx context.Context, name string, f func(context.Context) (T, U, error)) (v T, w U, err error) {
	err = b.bounded(ctx, name, func(ctx context.Context) (err error) { v, w, err = f(ctx); return err })
	return v, w, err
}

func (b *Store) timer(name string) metrics.CallTimer {
	if t, ok := b.timers.Load(name); ok {
		return t.(metrics.CallTimer)
	}
	t, _ := b.timers.LoadOrStore(name, b.metrics.DatabaseCall(name))
	return t.(metrics.CallTimer)
}

func (b *Store) CreatePets(ctx context.Context, batch []domain.PetInsert) error {
	return b.bounded(ctx, "CreatePets", func(ctx context.Context) error { return b.s.CreatePets(ctx, batch) })
}

func (b *Store) GetPet(ctx context.Context, id int64) (v domain.Pet, err error) {
	err = b.bounded(ctx, "GetPet", func(ctx context.Context) (err error) { v, err = b.s.GetPet(ctx, id); return err })
	return v, err
}

func (b *Store) ListPets(ctx context.Context, status string, after int64, limit int) (v []domain.Pet, err error) {
	err = b.bounded(ctx, "ListPets", func(ctx context.Context) (err error) { v, err = b.s.ListPets(ctx, status, after, limit); return err })
	return v, err
}

func (b *Store) ScanPets(ctx context.Context, after int64, limit int, fn func(id int64, name []byte, categoryID int64, status []byte)) (v int, err error) {
	err = b.bounded(ctx, "ScanPets", func(ctx context.Context) (err error) { v, err = b.s.ScanPets(ctx, after, limit, fn); return err })
	return v, err
}

func (b *Store) IdempotencyRecord(ctx context.Context, keyID int64, key string, since time.Time) (v0 domain.IdempotencyRecord, v1 bool, err error) {
	err = b.bounded(ctx, "IdempotencyRecord", func(ctx context.Context) (err error) {
		v0, v1, err = b.s.IdempotencyRecord(ctx, keyID, key, since)
		return err
	})
	return v0, v1, err
}

func (b *Store) PruneIdempotency(ctx context.Context, cutoff time.Time) (int64, error) {
	return call(b, ctx, "PruneIdempotency", func(ctx context.Context) (int64, error) { return b.s.PruneIdempotency(ctx, cutoff) })
}

func (b *Store) CreateKey(ctx context.Context, k domain.Key, actor string) (domain.Key, error) {
	return call(b, ctx, "CreateKey", func(ctx context.Context) (domain.Key, error) { return b.s.CreateKey(ctx, k, actor) })
}

func (b *Store) CreateFirstKey(ctx context.Context, k domain.Key, actor string, keep func(domain.Key) error) (domain.Key, bool, error) {
	return call2(b, ctx, "CreateFirstKey", func(ctx context.Context) (domain.Key, bool, error) { return b.s.CreateFirstKey(ctx, k, actor, keep) })
}

func (b *Store) RevokeKey(ctx context.Context, id int64, actor string) (bool, error) {
	return call(b, ctx, "RevokeKey", func(ctx context.Context) (bool, error) { return b.s.RevokeKey(ctx, id, actor) })
}

func (b *Store) RollKey(ctx context.Context, id int64, hash []byte, overlap time.Duration, actor string) (old, rolled domain.Key, err error) {
	return call2(b, ctx, "RollKey", func(ctx context.Context) (domain.Key, domain.Key, error) {
		return b.s.RollKey(ctx, id, hash, overlap, actor)
	})
}

func (b *Store) Keys(ctx context.Context) ([]domain.Key, error) {
	return call(b, ctx, "Keys", func(ctx context.Context) ([]domain.Key, error) { return b.s.Keys(ctx) })
}

func (b *Store) KeyByHash(ctx context.Context, hash []byte) (v0 domain.Key, v1 bool, err error) {
	err = b.bounded(ctx, "KeyByHash", func(ctx context.Context) (err error) { v0, v1, err = b.s.KeyByHash(ctx, hash); return err })
	return v0, v1, err
}

func (b *Store) KeysVersion(ctx context.Context) (int64, error) {
	return call(b, ctx, "KeysVersion", func(ctx context.Context) (int64, error) { return b.s.KeysVersion(ctx) })
}

func (b *Store) SetLastUsed(ctx context.Context, uses []domain.LastUse) error {
	return b.bounded(ctx, "SetLastUsed", func(ctx context.Context) error { return b.s.SetLastUsed(ctx, uses) })
}

func (b *Store) Usage(ctx context.Context, keyID int64, day string) (int64, error) {
	return call(b, ctx, "Usage", func(ctx context.Context) (int64, error) { return b.s.Usage(ctx, keyID, day) })
}

func (b *Store) AddUsage(ctx context.Context, counts []domain.UsageCount) error {
	return b.bounded(ctx, "AddUsage", func(ctx context.Context) error { return b.s.AddUsage(ctx, counts) })
}

func (b *Store) AuditEvents(ctx context.Context, filter domain.AuditFilter) ([]domain.AuditEvent, error) {
	return call(b, ctx, "AuditEvents", func(ctx context.Context) ([]domain.AuditEvent, error) { return b.s.AuditEvents(ctx, filter) })
}

func (b *Store) AuditCounts(ctx context.Context) (map[string]int64, error) {
	return call(b, ctx, "AuditCounts", func(ctx context.Context) (map[string]int64, error) { return b.s.AuditCounts(ctx) })
}

func (b *Store) AddBans(ctx context.Context, started []domain.StartedBan) error {
	return b.bounded(ctx, "AddBans", func(ctx context.Context) error { return b.s.AddBans(ctx, started) })
}

func (b *Store) LiftBan(ctx context.Context, subject domain.CallerID, actor, env string) (domain.Ban, error) {
	return call(b, ctx, "LiftBan", func(ctx context.Context) (domain.Ban, error) { return b.s.LiftBan(ctx, subject, actor, env) })
}

func (b *Store) Bans(ctx context.Context) ([]domain.Ban, error) {
	return call(b, ctx, "Bans", func(ctx context.Context) ([]domain.Ban, error) { return b.s.Bans(ctx) })
}

func (b *Store) BanChanges(ctx context.Context, version int64) ([]domain.Ban, error) {
	return call(b, ctx, "BanChanges", func(ctx context.Context) ([]domain.Ban, error) { return b.s.BanChanges(ctx, version) })
}

func (b *Store) CheckIn(ctx context.Context, sv domain.Server) error {
	return b.bounded(ctx, "CheckIn", func(ctx context.Context) error { return b.s.CheckIn(ctx, sv) })
}

func (b *Store) Servers(ctx context.Context) ([]domain.Server, error) {
	return call(b, ctx, "Servers", b.s.Servers)
}

func (b *Store) PruneServers(ctx context.Context, before time.Time) (int64, error) {
	return call(b, ctx, "PruneServers", func(ctx context.Context) (int64, error) { return b.s.PruneServers(ctx, before) })
}

func (b *Store) Schema(ctx context.Context) (domain.Schema, error) {
	return call(b, ctx, "Schema", b.s.Schema)
}

// Ping tells whether the database is ready: its file not lost, looked at
// now, and the health probe's answer.
func (b *Store) Ping(ctx context.Context) error {
	if err := b.s.Lost(); err != nil {
		b.health.saw(err)
		return err
	}
	return b.health.ready(ctx)
}

// What the engine is, its background work and its snapshots are not calls
// a request waits for: they are passed on untimed, as Close is. The
// engine's background work bounds each of its steps by the deadline; the
// health probe runs beside it.

func (b *Store) Shared() bool { return b.s.Shared() }

func (b *Store) Namespace() string { return b.s.Namespace() }

func (b *Store) Lost() error { return b.s.Lost() }

func (b *Store) Maintain(ctx context.Context, timeout time.Duration, logger *slog.Logger) {
	var wg sync.WaitGroup
	wg.Go(func() { b.health.watch(ctx) })
	b.s.Maintain(ctx, timeout, logger)
	wg.Wait()
}

func (b *Store) PetsAdded() <-chan struct{} { return b.s.PetsAdded() }

func (b *Store) Snapshot(ctx context.Context) (store.Snapshot, error) { return b.s.Snapshot(ctx) }

// Close closes the engine, waiting for it no longer than the deadline: the
// connections of a database that stalls may each wait far longer to say
// goodbye (pgx gives its cancel request 15 s), which a stopping server
// need not wait for.
func (b *Store) Close() error {
	closed := make(chan error, 1)
	go func() { closed <- b.s.Close() }()
	select {
	case err := <-closed:
		return err
	case <-time.After(b.timeout):
		return domain.Unavailable(domain.DBTimeout, errors.New("the database did not close within the deadline; its connections are left to close"))
	}
}

func (b *Store) UpdateKey(ctx context.Context, id int64, change func(domain.Key) (domain.Key, error), actor string) (before, after domain.Key, err error) {
	return call2(b, ctx, "UpdateKey", func(ctx context.Context) (domain.Key, domain.Key, error) {
		return b.s.UpdateKey(ctx, id, change, actor)
	})
}

func (b *Store) AddUsageHistory(ctx context.Context, rows []domain.UsageDay) error {
	return b.bounded(ctx, "AddUsageHistory", func(ctx context.Context) error { return b.s.AddUsageHistory(ctx, rows) })
}

func (b *Store) UsageHistory(ctx context.Context, budgetID int64, from string) ([]domain.UsageDay, error) {
	return call(b, ctx, "UsageHistory", func(ctx context.Context) ([]domain.UsageDay, error) { return b.s.UsageHistory(ctx, budgetID, from) })
}

func (b *Store) PruneUsageHistory(ctx context.Context, before string) (int64, error) {
	return call(b, ctx, "PruneUsageHistory", func(ctx context.Context) (int64, error) { return b.s.PruneUsageHistory(ctx, before) })
}

func (b *Store) CreateAdminToken(ctx context.Context, t domain.AdminToken, actor string) (domain.AdminToken, error) {
	return call(b, ctx, "CreateAdminToken", func(ctx context.Context) (domain.AdminToken, error) { return b.s.CreateAdminToken(ctx, t, actor) })
}

func (b *Store) AdminTokens(ctx context.Context) ([]domain.AdminToken, error) {
	return call(b, ctx, "AdminTokens", func(ctx context.Context) ([]domain.AdminToken, error) { return b.s.AdminTokens(ctx) })
}

func (b *Store) AdminTokenByHash(ctx context.Context, hash []byte) (domain.AdminToken, bool, error) {
	return call2(b, ctx, "AdminTokenByHash", func(ctx context.Context) (domain.AdminToken, bool, error) { return b.s.AdminTokenByHash(ctx, hash) })
}

func (b *Store) RevokeAdminToken(ctx context.Context, id int64, actor string) (bool, error) {
	return call(b, ctx, "RevokeAdminToken", func(ctx context.Context) (bool, error) { return b.s.RevokeAdminToken(ctx, id, actor) })
}

// ACMEStorage is the engine's certmagic storage, nil for one that keeps
// none (SQLite: the --acme-cache directory beside the file does).
func (b *Store) ACMEStorage() certmagic.Storage {
	if s, ok := b.s.(store.ACMEStorer); ok {
		return s.ACMEStorage()
	}
	return nil
}

func (b *Store) AddWebhookEndpoint(ctx context.Context, e domain.WebhookEndpoint, actor, env string) (domain.WebhookEndpoint, error) {
	return call(b, ctx, "AddWebhookEndpoint", func(ctx context.Context) (domain.WebhookEndpoint, error) {
		return b.s.AddWebhookEndpoint(ctx, e, actor, env)
	})
}

func (b *Store) WebhookEndpoints(ctx context.Context, env string) ([]domain.WebhookEndpoint, error) {
	return call(b, ctx, "WebhookEndpoints", func(ctx context.Context) ([]domain.WebhookEndpoint, error) { return b.s.WebhookEndpoints(ctx, env) })
}

func (b *Store) RemoveWebhookEndpoint(ctx context.Context, id int64, actor, env string) error {
	return b.bounded(ctx, "RemoveWebhookEndpoint", func(ctx context.Context) error { return b.s.RemoveWebhookEndpoint(ctx, id, actor, env) })
}

func (b *Store) RotateWebhookSecret(ctx context.Context, id int64, secret string, overlap time.Duration, actor, env string) (domain.WebhookEndpoint, error) {
	return call(b, ctx, "RotateWebhookSecret", func(ctx context.Context) (domain.WebhookEndpoint, error) {
		return b.s.RotateWebhookSecret(ctx, id, secret, overlap, actor, env)
	})
}

func (b *Store) EnableWebhookEndpoint(ctx context.Context, id int64, actor, env string) (domain.WebhookEndpoint, error) {
	return call(b, ctx, "EnableWebhookEndpoint", func(ctx context.Context) (domain.WebhookEndpoint, error) {
		return b.s.EnableWebhookEndpoint(ctx, id, actor, env)
	})
}

func (b *Store) AddWebhookEvent(ctx context.Context, ev domain.WebhookEvent, endpointID int64, env string) error {
	return b.bounded(ctx, "AddWebhookEvent", func(ctx context.Context) error { return b.s.AddWebhookEvent(ctx, ev, endpointID, env) })
}

func (b *Store) AddWebhookNotices(ctx context.Context, notices []domain.WebhookNotice) error {
	return b.bounded(ctx, "AddWebhookNotices", func(ctx context.Context) error { return b.s.AddWebhookNotices(ctx, notices) })
}

func (b *Store) ClaimWebhookDeliveries(ctx context.Context, env string, now time.Time, claimFor time.Duration, skip []int64, limit int,
	take func(endpointID int64) bool) ([]domain.ClaimedDelivery, error) {
	return call(b, ctx, "ClaimWebhookDeliveries", func(ctx context.Context) ([]domain.ClaimedDelivery, error) {
		return b.s.ClaimWebhookDeliveries(ctx, env, now, claimFor, skip, limit, take)
	})
}

func (b *Store) FinishWebhookDelivery(ctx context.Context, o domain.DeliveryOutcome, actor string) (string, error) {
	return call(b, ctx, "FinishWebhookDelivery", func(ctx context.Context) (string, error) { return b.s.FinishWebhookDelivery(ctx, o, actor) })
}

func (b *Store) WebhookDeliveries(ctx context.Context, f domain.DeliveryFilter) ([]domain.WebhookDelivery, error) {
	return call(b, ctx, "WebhookDeliveries", func(ctx context.Context) ([]domain.WebhookDelivery, error) { return b.s.WebhookDeliveries(ctx, f) })
}

func (b *Store) ResendWebhookDeliveries(ctx context.Context, f domain.DeliveryFilter, now time.Time) (int64, error) {
	return call(b, ctx, "ResendWebhookDeliveries", func(ctx context.Context) (int64, error) { return b.s.ResendWebhookDeliveries(ctx, f, now) })
}

func (b *Store) WebhookBacklog(ctx context.Context, env string) (n int64, oldest time.Time, err error) {
	return call2(b, ctx, "WebhookBacklog", func(ctx context.Context) (int64, time.Time, error) { return b.s.WebhookBacklog(ctx, env) })
}

func (b *Store) PruneWebhooks(ctx context.Context, now time.Time) error {
	return b.bounded(ctx, "PruneWebhooks", func(ctx context.Context) error { return b.s.PruneWebhooks(ctx, now) })
}
