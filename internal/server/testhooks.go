package server

import (
	"context"
	"sync"

	"petstore/internal/keyring"
	"petstore/internal/limits"
	"petstore/internal/petcopy"
	"petstore/internal/webhook"
)

// The hooks below are for the tests of a running server in other packages
// (internal/servertest), which must do at once what the server does in the
// background. Nothing else calls them.

// LoadPets fills the copy of the pets, as StartBackground does at a start.
func (a *App) LoadPets(ctx context.Context) error { return a.pets.Load(ctx) }

// Keys is the server's keyring, which a test refreshes at once.
func (a *App) Keys() *keyring.Ring { return a.keys }

// FlushBans stores the bans this server started, as its flush every
// limits.UsageFlushEvery does.
func (a *App) FlushBans(ctx context.Context) error { return a.storeBans(ctx) }

// DeliverDue makes the webhook attempts that are due now, as the worker's
// next rounds do, and waits for them.
func (a *App) DeliverDue(ctx context.Context) {
	for {
		var attempts sync.WaitGroup
		if a.webhooks.Dispatch(ctx, &attempts) == 0 {
			attempts.Wait()
			return
		}
		attempts.Wait()
	}
}

// FlushLimiterUsage stores the day usage the limiter counted, as the flush
// every limits.UsageFlushEvery does.
func (a *App) FlushLimiterUsage(ctx context.Context) error {
	return a.limiter.Flush(ctx, a.store.AddUsage)
}

// Webhooks is the server's webhook worker, whose rounds a test runs at once.
func (a *App) Webhooks() *webhook.Worker { return a.webhooks }

// Quota is the server's watch of the day quotas, which a test flushes at once.
func (a *App) Quota() *limits.QuotaWatch { return a.quota }

// Limiter is the server's limiter, whose figures a test reads and flushes
// at once, or whose leases it looks at.
func (a *App) Limiter() limits.Limiter { return a.limiter }

// WithLimiter is a copy of a that limits through l, as a server started on
// another limiter would: the store, keys and pets stay.
func (a *App) WithLimiter(l limits.Limiter) *App {
	own := *a
	own.limiter = l
	own.handler = newServer(&own)
	own.adminHandler = newAdminServer(&own)
	return &own
}

// RestartLimiter is a copy of a with a new limiter of cfg's kind, holding
// the bans the database holds, and no bans started yet, as a restart of
// the server has: one in process starts from the database, one on Redis
// finds there what the last one left. The store, keys and pets stay.
// stop releases the new limiter.
func (a *App) RestartLimiter(ctx context.Context, cfg Config, d Deps) (_ *App, stop func() error, _ error) {
	limiter, _, stop, bans, err := newRateLimiter(ctx, cfg, d, a.store)
	if err != nil {
		return nil, nil, err
	}
	own := *a
	own.bans, own.startedBans = bans, limits.NewStartedBans(cfg.Env, d.Now, d.Logger)
	return own.WithLimiter(limiter), stop, nil
}

// Pets is the server's copy of the pets, whose size a test reads.
func (a *App) Pets() *petcopy.Cache { return a.pets }
