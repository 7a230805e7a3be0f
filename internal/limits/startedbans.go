package limits

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"petstore/internal/domain"
	"petstore/internal/tracing"
)

// The audit trail (docs/production.md, "The audit trail"): every
// change to a key is an event kept in the database, append only, with who
// made it and when. The commands write theirs in the transaction of the
// change itself; the server writes the start of each ban, in batches.
// StartedBans is QuotaWatch's twin (ledger.go): both note in memory what a
// request started, for the usage flush to store.

// StartedBans keeps the bans the server starts, each with its key.banned
// event, until a flush stores them in one batch: at once in the
// background (StoreAsTheyStart), again every UsageFlushEvery for what
// failed, before the admin API lists or lifts bans, and at shutdown. The
// request that starts a ban never waits for the database, and a ban is
// listed, and can be lifted, as soon as it is refused
// (docs/production.md#bans). A nil *StartedBans records nothing.
type StartedBans struct {
	env    string
	now    func() time.Time
	logger *slog.Logger
	wake   chan struct{} // a ban waits to be stored

	flushing sync.Mutex // one flush at a time: a second waits for the first's batch to be stored
	mu       sync.Mutex
	pending  []domain.StartedBan
	dropped  int
}

// NewStartedBans keeps the bans a server of env starts, timed by now; a
// ban lost for want of room is logged to logger.
func NewStartedBans(env string, now func() time.Time, logger *slog.Logger) *StartedBans {
	return &StartedBans{env: env, now: now, logger: logger, wake: make(chan struct{}, 1)}
}

// StoreAsTheyStart runs store (a flush) as soon as a ban is recorded,
// until ctx ends.
func (sb *StartedBans) StoreAsTheyStart(ctx context.Context, store func(context.Context) error, warn func(string, error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sb.wake:
			warn("store bans and their audit events; will retry", store(ctx))
		}
	}
}

// Banned records the start of a ban of id that d tells of: of key's
// budget, or without a key, of the client address id names, in the
// request of ctx, whose sampled span its webhook links to.
func (sb *StartedBans) Banned(ctx context.Context, key *domain.Key, id domain.CallerID, d Decision) {
	if sb == nil {
		return
	}
	now := sb.now()
	until := d.Reset
	e := domain.AuditEvent{
		At: domain.AuditTime(now), Action: domain.AuditKeyBanned, Actor: domain.ServerActor, Env: sb.env,
		Details: domain.AuditDetails{
			PerMinute: domain.AnonymousLimits.PerMinute, PerDay: domain.AnonymousLimits.PerDay,
			BannedUntil: &until, BanFor: d.RetryAfter.String(),
		},
		Cause: tracing.Cause(ctx),
	}
	if key != nil {
		e.KeyID = key.ID
		e.Details.Plan, e.Details.PerMinute, e.Details.PerDay = key.Plan, key.PerMinute, key.PerDay
		if key.BudgetID != key.ID {
			e.Details.Budget = key.BudgetID
		}
	} else {
		e.Address = id.AddressText()
	}
	b := domain.StartedBan{Ban: domain.Ban{Subject: id, Since: domain.AuditTime(now), Until: domain.AuditTime(d.BannedUntil)}, Event: e}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if len(sb.pending) >= domain.MaxPendingAuditEvents {
		sb.dropped++
		return
	}
	sb.pending = append(sb.pending, b)
	select {
	case sb.wake <- struct{}{}:
	default: // already woken: that flush takes this ban too
	}
}

// Flush stores the bans recorded since the last flush through add. What
// fails to be stored stays for the next flush; bans that did not fit
// meanwhile are logged as lost.
func (sb *StartedBans) Flush(ctx context.Context, add func(context.Context, []domain.StartedBan) error) error {
	if sb == nil {
		return nil
	}
	sb.flushing.Lock()
	defer sb.flushing.Unlock()
	sb.mu.Lock()
	taken := sb.pending
	sb.pending = nil
	dropped := sb.dropped
	sb.dropped = 0
	sb.mu.Unlock()
	if dropped > 0 {
		sb.logger.Error("bans and their audit events lost: the database did not take them in time", "bans", dropped)
	}
	if len(taken) == 0 {
		return nil
	}
	if err := add(ctx, taken); err != nil {
		sb.mu.Lock()
		kept := taken[:min(len(taken), max(0, domain.MaxPendingAuditEvents-len(sb.pending)))]
		sb.dropped += len(taken) - len(kept)
		sb.pending = append(kept, sb.pending...)
		sb.mu.Unlock()
		return err
	}
	return nil
}
