package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"petstore/internal/cli"
	"petstore/internal/domain"
	"petstore/internal/keyring"
	"petstore/internal/limits"
	"petstore/internal/manage"
	"petstore/internal/metrics"
	"petstore/internal/petcopy"
	"petstore/internal/publicapi"
	"petstore/internal/replicate"
	"petstore/internal/store"
	"petstore/internal/store/bounded"
	"petstore/internal/tracing"
	"petstore/internal/webhook"
)

// How often the background work of a server runs.
const (
	limiterSweepEvery     = 10 * time.Second
	idempotencyPruneEvery = 10 * time.Minute
)

// App is the pet store assembled: the store, the keyring, the limiter, the
// in-memory copy of the pets and the HTTP handlers over them. New builds
// it, the same for serve and for a test.
type App struct {
	logger     *slog.Logger
	metrics    *metrics.Metrics // nil without an admin listener: nobody else could read them
	tracer     *tracing.Tracer  // nil: tracing is off (no OTEL_EXPORTER_OTLP_ENDPOINT)
	now        func() time.Time
	trustProxy bool
	env        string        // production or staging
	dbTimeout  time.Duration // --db-timeout: bounds each step of the engine's upkeep too

	store       store.Storage // every call the server makes, bounded by --db-timeout and timed when there are metrics
	keys        *keyring.Ring
	limiter     limits.Limiter
	limitsIn    string              // where the limits are kept, for the log
	startedBans *limits.StartedBans // the bans this server saw start, until they are stored
	quota       *limits.QuotaWatch  // the day quotas this server saw reach 80% and 100%, until they are stored
	webhooks    *webhook.Worker     // sends the outbox's webhooks
	// webhookGuard refuses the addresses webhooks may not reach (nil with
	// --webhook-allow-private).
	webhookGuard *webhook.AddressGuard
	bans         *limits.BanFollower // the database's bans and lifts, read into the limiter
	pets         *petcopy.Cache
	// draining is set after a stop signal while --shutdown-delay lets a
	// load balancer see /readyz fail.
	draining     *atomic.Bool
	handler      http.Handler
	adminHandler http.Handler
	// adminFailures limits failed admin authentications per client
	// address, in this process: a subject of its own, apart from /v1's.
	adminFailures *limits.Local
	adminHosts    []string // --admin-host
	// self is this server as it checks in (servers.go): serve sets it
	// once its port is open; a test's app without it does not check in.
	self domain.Server

	// openapi and adminOpenAPI are the two APIs' documents, served as
	// they are; files holds the reference page's and the console's files.
	openapi, adminOpenAPI []byte
	files                 fs.FS

	closeLimiter func() error
	replica      *replicate.Replicator // nil without --replicate-to
}

// Deps is what an App takes from outside its flags: serve gives the
// process's clock, logger and embedded files; a test its fake clock, the
// files from the source tree and what isolates it.
type Deps struct {
	Now     func() time.Time
	Logger  *slog.Logger
	Metrics *metrics.Metrics
	// Files holds openapi.yaml, admin-openapi.yaml, webui/ and console/,
	// which live at the module's root (go:embed reaches no parent folder).
	Files fs.FS

	// For tests: WrapStore stands between the engine and the rest of the
	// app (to count or fail calls); RedisPrefix, when set, keeps a test's
	// Redis keys apart from every other's; ScriptNow is the Redis script's
	// clock instead of Redis TIME.
	WrapStore   func(store.Storage) store.Storage
	RedisPrefix string
	ScriptNow   func() time.Time
}

// New opens the database cfg names and builds the server on it. The
// copy of the pets is still empty: StartBackground (or a test) loads it.
func New(ctx context.Context, cfg Config, d Deps) (_ *App, err error) {
	if d.Files == nil {
		return nil, errors.New("no files to serve: Deps.Files must hold the API documents, webui/ and console/")
	}
	db, err := cli.OpenFlagged(ctx, "--db", cfg.DB, true, d.Now)
	if err != nil {
		return nil, err
	}
	if d.WrapStore != nil {
		db = d.WrapStore(db)
	}
	a := &App{
		logger: d.Logger, metrics: d.Metrics, now: d.Now, trustProxy: cfg.TrustProxy, env: cfg.Env, dbTimeout: cfg.DBTimeout, adminHosts: cfg.AdminHosts,
		store: bounded.New(db, engineOf(cfg.DB), cfg.DBTimeout, d.Metrics, d.Logger), draining: new(atomic.Bool),
		startedBans: limits.NewStartedBans(cfg.Env, d.Now, d.Logger), quota: limits.NewQuotaWatch(d.Now), closeLimiter: func() error { return nil },
		files: d.Files,
	}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	trace := cfg.Tracing
	trace.TrustParent = cfg.TrustTraceparent
	if a.tracer, err = tracing.Start(trace, tracing.Hooks{Dropped: d.Metrics.SpansDropped, Logger: d.Logger}); err != nil {
		return nil, err
	}
	if a.openapi, err = fs.ReadFile(d.Files, "openapi.yaml"); err != nil {
		return nil, err
	}
	if a.adminOpenAPI, err = fs.ReadFile(d.Files, "admin-openapi.yaml"); err != nil {
		return nil, err
	}
	if a.keys, err = keyring.New(ctx, a.store, cfg.Env, d.Now); err != nil {
		return nil, fmt.Errorf("load API keys: %w", err)
	}
	if a.limiter, a.limitsIn, a.closeLimiter, a.bans, err = newRateLimiter(ctx, cfg, d, a.store); err != nil {
		return nil, err
	}
	a.pets = petcopy.New(a.store, cfg.DBTimeout)
	a.metrics.CountPets(a.pets.Size)
	a.metrics.CountAuditEvents(domain.AuditActions, a.store.AuditCounts)
	// Counted by address: never a key's, so no stored usage to read.
	a.adminFailures = limits.NewLocal(d.Now, cfg.BanAfter, cfg.BanFor, nil)
	a.metrics.CountWebhookBacklog(func(ctx context.Context) (int64, time.Time, error) { return a.store.WebhookBacklog(ctx, cfg.Env) }, d.Now)
	a.webhookGuard = webhook.NewAddressGuard(cfg.WebhookAllowPrivate)
	// An attempt's webhook-timestamp is for the receiver's clock, which a
	// test's fake clock does not move.
	a.webhooks = webhook.NewWorker(a.store, a.store.Keys, webhook.NewSender(a.webhookGuard, "petstore/"+strings.Trim(ReadBuildInfo().Version, "()"), time.Now), d.Now, d.Logger, d.Metrics.CountDelivery, cfg.Env, a.tracer.Provider())
	a.handler = newServer(a)
	a.adminHandler = newAdminServer(a)
	return a, nil
}

// engineOf is the engine under db as traces name it (db.system).
func engineOf(db string) string {
	if store.IsPostgresURL(db) {
		return "postgresql"
	}
	return "sqlite"
}

// Close releases the limiter's connection, closes the database and sends
// the spans still queued (within tracing.ShutdownTimeout).
func (a *App) Close() error {
	return errors.Join(a.closeLimiter(), a.store.Close(), a.tracer.Shutdown())
}

// newRateLimiter is the limiter cfg asks for: in this process, or in the
// Redis --redis names, shared by every server naming it, with the bans the
// database holds under it (bans follows them). where names it for the log;
// close releases it.
func newRateLimiter(ctx context.Context, cfg Config, d Deps, db store.Storage) (
	_ limits.Limiter, where string, close func() error, bans *limits.BanFollower, _ error) {
	floor := limits.NewBanFloor()
	var limiter limits.Limiter
	if cfg.Redis == "" {
		local := limits.NewLocal(d.Now, cfg.BanAfter, cfg.BanFor, db.Usage)
		local.Bans = floor
		limiter, where, close = local, "this process", func() error { return nil }
	} else {
		prefix := d.RedisPrefix
		if prefix == "" {
			prefix = redisPrefix(cfg.Env, db)
		}
		shared, err := limits.NewRedis(ctx, limits.RedisConfig{
			URL: cfg.Redis, Prefix: prefix, BanAfter: cfg.BanAfter, BanFor: cfg.BanFor, Bans: floor,
			Now: d.Now, Usage: db.Usage, DBTimeout: cfg.DBTimeout, Logger: d.Logger, Hooks: publicapi.RedisHooks(d.Metrics), ScriptNow: d.ScriptNow,
		})
		if err != nil {
			return nil, "", nil, nil, err
		}
		limiter, where, close = shared, shared.Link.Where(), shared.Close
	}
	// The bans the database holds are known before the first request.
	bans = &limits.BanFollower{Store: db, Floor: floor, Limiter: limiter, Now: d.Now}
	if err := bans.Refresh(ctx); err != nil {
		close()
		return nil, "", nil, nil, fmt.Errorf("load bans: %w", err)
	}
	return limiter, where, close, bans, nil
}

// redisPrefix begins the Redis keys of the servers of one deployment: its
// environment and, on PostgreSQL, its database and schema, so that two
// deployments sharing a Redis never share a key's limits.
func redisPrefix(env string, db store.Lifecycle) string {
	if ns := db.Namespace(); ns != "" {
		return "petstore:" + env + ":" + ns
	}
	return "petstore:" + env
}

// StartBackground starts what a server does besides answering requests:
// loading the copy of the pets, the engine's upkeep, reloading keys,
// storing usage, last uses and bans, forgetting idle callers and expired
// idempotency records. stop ends it all, then stores what is left.
func (a *App) StartBackground() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	// warn logs a chore's failure, unless the chore was stopped (ctx
	// ended); with the database away, only at debug level: the health
	// probe logs the outage once.
	warn := func(msg string, err error) {
		switch {
		case err == nil || ctx.Err() != nil:
		case domain.DBFailureOf(err) != 0:
			a.logger.Debug(msg, "err", err)
		default:
			a.logger.Warn(msg, "err", err)
		}
	}
	var wg sync.WaitGroup
	every := func(interval time.Duration, fn func()) { wg.Go(func() { domain.Every(ctx, interval, fn) }) }
	wg.Go(func() { a.pets.LoadInBackground(ctx, a.logger) })
	// The engine's upkeep, and the probe behind /readyz beside it. On a
	// shared database the copy of the pets follows the other servers'
	// creates.
	wg.Go(func() { a.store.Maintain(ctx, a.dbTimeout, a.logger) })
	wg.Go(func() { a.pets.Follow(ctx, a.store.PetsAdded()) })
	every(keyring.RefreshEvery, func() { warn("reload API keys", a.keys.Refresh(ctx)) })
	every(keyring.RefreshEvery, func() { warn("read bans and their lifts", a.bans.Refresh(ctx)) })
	every(limits.UsageFlushEvery, func() {
		for _, f := range a.flushes() {
			warn(f.what+"; will retry", f.write(ctx))
		}
		a.webhooks.Poke()
	})
	wg.Go(func() { a.startedBans.StoreAsTheyStart(ctx, a.storeBans, warn) })
	wg.Go(func() { a.webhooks.Run(ctx) })
	a.checkIns(ctx, wg.Go, every, warn)
	every(limiterSweepEvery, func() {
		a.limiter.Sweep()
		a.adminFailures.Sweep()
	})
	every(manage.UsageHistoryPruneEvery, func() {
		_, err := a.store.PruneUsageHistory(ctx, manage.UsageHistoryCutoff(a.now()))
		warn("prune the usage history", err)
	})
	every(idempotencyPruneEvery, func() {
		_, err := a.store.PruneIdempotency(ctx, a.now().Add(-domain.IdempotencyTTL))
		warn("prune idempotency records", err)
	})
	return func() {
		cancel()
		wg.Wait()
		a.flushAtShutdown()
	}
}

// flushAtShutdown stores what is left of what the server noted. Side by
// side: with the database away, each gives up by the deadline, and the
// shutdown waits for one deadline, not five.
func (a *App) flushAtShutdown() {
	var last sync.WaitGroup
	for _, f := range a.flushes() {
		last.Go(func() {
			if err := f.write(context.Background()); err != nil {
				a.logger.Error(f.what+" at shutdown", "err", err)
			}
		})
	}
	last.Wait()
}

// flush is one of the writes of what a server notes in memory, done every
// limits.UsageFlushEvery and at shutdown.
type flush struct {
	what  string
	write func(context.Context) error
}

// flushes are the server's writes of what it noted: usage, last uses,
// bans, quota notices.
//
// The usage history (docs/admin.md, "The usage history"): for each budget
// (the keys of a roll share one) and UTC day, every request that carried a
// valid key, counted once in one of five columns. A request adds one to an
// atomic counter of its key; the flush writes the counts of every key,
// summed by budget and day, in one batch, where each server's counts are
// added to what the others wrote. Days older than manage.UsageHistoryDays
// are pruned hourly.
func (a *App) flushes() []flush {
	return []flush{
		{"store daily usage", func(ctx context.Context) error { return a.limiter.Flush(ctx, a.store.AddUsage) }},
		{"store the usage history", func(ctx context.Context) error { return a.keys.FlushUsage(ctx, a.store.AddUsageHistory) }},
		{"store when keys were last used", a.keys.FlushLastUsed},
		{"store bans and their audit events", a.storeBans},
		{"store quota notices", func(ctx context.Context) error { return a.quota.Flush(ctx, a.store.AddWebhookNotices) }},
	}
}

// storeBans stores the bans this server started and has not stored yet,
// each with its key.banned event.
func (a *App) storeBans(ctx context.Context) error {
	return a.startedBans.Flush(ctx, a.store.AddBans)
}
