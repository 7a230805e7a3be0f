package limits

import (
	"context"
	"time"

	"petstore/internal/domain"
)

// Bans in the database (docs/production.md, "Bans"): the server that
// starts a ban stores it with its key.banned event (auditLog, within the
// usage batch's 2 s). Redis holds the truth while it is up; the database is
// a floor under it: every server reads the table at start and what changed
// in it every keyring.RefreshEvery (BanFollower) into a banFloor, which the
// limit rules take in each run (limitRun.banFloor), in process, in the
// fallback and in the script, so that neither a restart nor a Redis outage
// nor an empty Redis lifts a ban early. A ban a server sees in Redis's
// answer goes on its floor at once (BanFloor.Hold), so that a Redis outage
// right after the ban does not lose it on that server. A lift (bans lift, DELETE
// /admin/v1/bans/{subject}) is stored with its time and ban.lifted event;
// each server takes it off its floor and runs it through the rules
// (limitRun.lift), in process and in Redis.

// BanFollower keeps a server's limiter in step with the bans table: it
// reads what changed since it last looked, raises or takes away floors,
// and runs each lift through the limiter. A lift the limiter could not
// apply (Redis away) is tried again at the next look, until its ban ends.
type BanFollower struct {
	Store    domain.BanStore
	Floor    *BanFloor
	Limiter  Limiter
	Now      func() time.Time
	version  int64
	unlifted []domain.Ban
}

// Refresh reads the changes and applies them: first to the floor, so that
// no run raises a lifted ban again, then the lifts to the limiter.
func (f *BanFollower) Refresh(ctx context.Context) error {
	changes, err := f.Store.BanChanges(ctx, f.version)
	if err != nil {
		return err
	}
	now := f.Now()
	if len(changes) > 0 || f.Floor.Held.Load() {
		f.Floor.Apply(changes, now) // floors that ended go too
	}
	if len(changes) > 0 {
		f.version = changes[len(changes)-1].Version
	}
	lifts := f.unlifted
	f.unlifted = nil
	for _, b := range changes {
		if !b.LiftedAt.IsZero() {
			lifts = append(lifts, b)
		}
	}
	for _, b := range lifts {
		if err := f.Limiter.Lift(ctx, b.Subject, b.Until); err != nil && b.Until.After(now) {
			f.unlifted = append(f.unlifted, b) // Redis is away: its outage is logged once, by the limiter
		}
	}
	return nil
}
