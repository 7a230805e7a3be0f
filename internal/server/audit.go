package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"petstore/internal/domain"
	"petstore/internal/limits"
)

// The audit trail (docs/production.md, "The audit trail"): every
// change to a key is an event kept in the database, append only, with who
// made it and when. The commands write theirs in the transaction of the
// change itself; the server writes the start of each ban, in batches.

// auditLog keeps the bans the server starts, each with its key.banned
// event, until a flush stores them in one batch: at once in the
// background (storeAsTheyStart), again every limits.UsageFlushEvery for what
// failed, before the admin API lists or lifts bans, and at shutdown. The
// request that starts a ban never waits for the database, and a ban is
// listed, and can be lifted, as soon as it is refused
// (docs/production.md#bans). A nil *auditLog records nothing.
type auditLog struct {
	env    string
	now    func() time.Time
	logger *slog.Logger
	wake   chan struct{} // a ban waits to be stored

	flushing sync.Mutex // one flush at a time: a second waits for the first's batch to be stored
	mu       sync.Mutex
	pending  []domain.StartedBan
	dropped  int
}

func newAuditLog(env string, now func() time.Time, logger *slog.Logger) *auditLog {
	return &auditLog{env: env, now: now, logger: logger, wake: make(chan struct{}, 1)}
}

// storeAsTheyStart runs store (a flush) as soon as a ban is recorded,
// until ctx ends.
func (a *auditLog) storeAsTheyStart(ctx context.Context, store func(context.Context) error, warn func(string, error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
			warn("store bans and their audit events; will retry", store(ctx))
		}
	}
}

// banned records the start of a ban of id that d tells of: of key's
// budget, or without a key, of the client address id names.
func (a *auditLog) banned(key *domain.Key, id domain.CallerID, d limits.Decision) {
	if a == nil {
		return
	}
	now := a.now()
	until := d.Reset
	e := domain.AuditEvent{
		At: domain.AuditTime(now), Action: domain.AuditKeyBanned, Actor: domain.ServerActor, Env: a.env,
		Details: domain.AuditDetails{
			PerMinute: domain.AnonymousLimits.PerMinute, PerDay: domain.AnonymousLimits.PerDay,
			BannedUntil: &until, BanFor: d.RetryAfter.String(),
		},
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
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) >= domain.MaxPendingAuditEvents {
		a.dropped++
		return
	}
	a.pending = append(a.pending, b)
	select {
	case a.wake <- struct{}{}:
	default: // already woken: that flush takes this ban too
	}
}

// flush stores the bans recorded since the last flush through add. What
// fails to be stored stays for the next flush; bans that did not fit
// meanwhile are logged as lost.
func (a *auditLog) flush(ctx context.Context, add func(context.Context, []domain.StartedBan) error) error {
	if a == nil {
		return nil
	}
	a.flushing.Lock()
	defer a.flushing.Unlock()
	a.mu.Lock()
	taken := a.pending
	a.pending = nil
	dropped := a.dropped
	a.dropped = 0
	a.mu.Unlock()
	if dropped > 0 {
		a.logger.Error("bans and their audit events lost: the database did not take them in time", "bans", dropped)
	}
	if len(taken) == 0 {
		return nil
	}
	if err := add(ctx, taken); err != nil {
		a.mu.Lock()
		kept := taken[:min(len(taken), max(0, domain.MaxPendingAuditEvents-len(a.pending)))]
		a.dropped += len(taken) - len(kept)
		a.pending = append(kept, a.pending...)
		a.mu.Unlock()
		return err
	}
	return nil
}
