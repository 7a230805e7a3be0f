package limits

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"petstore/internal/domain"
)

// Bans in the database (docs/replicas.md, "Bans across servers"): Redis holds
// the truth while it is up; the database is a floor under it, read at start
// and followed every keyring.RefreshEvery (BanFollower) into a BanFloor, which
// the limit rules take in each run (limitRun.banFloor), in process, in the
// fallback and in the script. A lift goes off the floor and through the rules
// (limitRun.lift), in process and in Redis.

// BanFollower keeps a server's limiter in step with the bans table. A lift
// the limiter could not apply (Redis away) is tried again at the next look,
// until its ban ends.
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

// BanFloor is the bans a server knows, by subject: those the database
// holds, and those this server saw in Redis's answers (hold). The limit
// rules take each as a floor under their own state. Looking one up costs
// nothing while none is held.
type BanFloor struct {
	Held  atomic.Bool
	mu    sync.RWMutex
	until map[domain.CallerID]time.Time
	// Lifted are the ends of the bans lifted, by subject, until they
	// pass: an answer that read such a ban before its lift does not hold
	// it again.
	Lifted map[domain.CallerID]time.Time
}

func NewBanFloor() *BanFloor {
	return &BanFloor{until: make(map[domain.CallerID]time.Time), Lifted: make(map[domain.CallerID]time.Time)}
}

// At is the end of id's ban as the floor knows it; zero for none. A nil
// floor knows none.
func (f *BanFloor) At(id domain.CallerID) time.Time {
	if f == nil || !f.Held.Load() {
		return time.Time{}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.until[id]
}

// Hold raises id's floor to until at once: a ban this server saw in
// Redis's answer, which its fallback then keeps should Redis go away
// before the ban is stored and read back (docs/replicas.md). A ban lifted
// that ends as late is not held again.
func (f *BanFloor) Hold(id domain.CallerID, until, now time.Time) {
	if !f.At(id).Before(until) {
		return // held already: the ban's every later answer
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if until.After(now) && until.After(f.until[id]) && until.After(f.Lifted[id]) {
		f.until[id] = until
		f.Held.Store(true)
	}
}

// Apply takes changes, read from the bans table, in: bans in force raise
// their subject's floor, lifted ones take it away. Floors and lifts that
// ended by now go.
func (f *BanFloor) Apply(changes []domain.Ban, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range changes {
		switch {
		case !b.LiftedAt.IsZero():
			delete(f.until, b.Subject)
			if b.Until.After(f.Lifted[b.Subject]) {
				f.Lifted[b.Subject] = b.Until
			}
		case b.Until.After(f.until[b.Subject]):
			f.until[b.Subject] = b.Until
		}
	}
	for _, m := range []map[domain.CallerID]time.Time{f.until, f.Lifted} {
		maps.DeleteFunc(m, func(_ domain.CallerID, until time.Time) bool { return !until.After(now) })
	}
	f.Held.Store(len(f.until) > 0)
}
