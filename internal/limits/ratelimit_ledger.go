package limits

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"petstore/internal/domain"
)

// usageLedger holds the API keys' requests the Redis limiter granted until
// they are written to the database in batches (flush), and knows each
// key's count as this server does: what is stored and what it granted
// since. From there a day count that Redis lost is rebuilt, and a count
// Redis may lack after an outage is raised.
type usageLedger struct {
	now func() time.Time
	// usage returns a key's stored count for a day (Store.Usage); pending
	// the fallback's requests of a key on a day not stored yet.
	usage     func(ctx context.Context, keyID int64, day string) (int64, error)
	pending   func(keyID, day int64) int64
	dbTimeout time.Duration // bounds known's wait for the database, another seed or a flush included

	// storing is held while a flush writes, and while known reads the
	// database and the counts not yet written, so that it sees each
	// request once: written or still here.
	storing  chan struct{} // a lock whose wait known bounds
	mu       sync.Mutex
	unstored map[KeyDay]int64 // granted through Redis, not yet in the database
	// unsure are the counts Redis may lack after an outage: of the keys this
	// server granted requests to alone, or had not stored when Redis went.
	unsure    map[KeyDay]bool
	anyUnsure atomic.Bool
}

// KeyDay names one API key's count of one UTC day.
type KeyDay struct{ KeyID, Day int64 }

func newUsageLedger(now func() time.Time, dbTimeout time.Duration,
	usage func(ctx context.Context, keyID int64, day string) (int64, error), pending func(keyID, day int64) int64) *usageLedger {
	return &usageLedger{now: now, usage: usage, pending: pending, dbTimeout: dbTimeout,
		storing: make(chan struct{}, 1), unstored: make(map[KeyDay]int64), unsure: make(map[KeyDay]bool)}
}

// granted counts a request of id granted on day, to be written to the
// database (API keys only).
func (u *usageLedger) granted(id domain.CallerID, day int64) {
	if id.KeyID == 0 {
		return
	}
	u.mu.Lock()
	u.unstored[KeyDay{id.KeyID, day}]++
	u.mu.Unlock()
}

// known is keyID's count for day as this server knows it: what the
// database holds and what this server granted and has not written yet. It
// seeds a count Redis has lost; other servers' unwritten requests (their
// last flush interval's, at most) are not in it.
func (u *usageLedger) known(ctx context.Context, keyID, day int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, u.dbTimeout)
	defer cancel()
	select {
	case u.storing <- struct{}{}:
	case <-ctx.Done():
		return 0, domain.Unavailable(domain.DBTimeout, fmt.Errorf("wait for the stored usage: %w", ctx.Err()))
	}
	defer func() { <-u.storing }()
	n, err := u.usage(ctx, keyID, DayString(day))
	if err != nil {
		return 0, err
	}
	u.mu.Lock()
	n += u.unstored[KeyDay{keyID, day}]
	u.mu.Unlock()
	return n + u.pending(keyID, day), nil
}

// knownUsage is known for the fallback, which names days as text.
func (u *usageLedger) knownUsage(ctx context.Context, keyID int64, day string) (int64, error) {
	t, err := time.Parse(time.DateOnly, day)
	if err != nil {
		return 0, err
	}
	return u.known(ctx, keyID, UnixDay(t))
}

// takeUnsure takes keyID's count today off the unsure ones, if it is one,
// for one script run to raise; markUnsure puts it (back) on.
func (u *usageLedger) takeUnsure(keyID int64) KeyDay {
	k := KeyDay{keyID, UnixDay(u.now())}
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.unsure[k] {
		return KeyDay{}
	}
	delete(u.unsure, k)
	return k
}

func (u *usageLedger) markUnsure(k KeyDay) {
	if k.KeyID == 0 {
		return
	}
	u.mu.Lock()
	u.unsure[k] = true
	u.anyUnsure.Store(true)
	u.mu.Unlock()
}

// redisWent notes that Redis stopped answering: it may come back without
// what this server counted there and has not written yet.
func (u *usageLedger) redisWent() {
	u.mu.Lock()
	for k := range u.unstored {
		u.unsure[k] = true
	}
	u.anyUnsure.Store(len(u.unsure) > 0)
	u.mu.Unlock()
}

// flush writes the requests granted through Redis. What fails to be
// written stays for the next flush.
func (u *usageLedger) flush(ctx context.Context, add func(context.Context, []domain.UsageCount) error) error {
	u.storing <- struct{}{}
	defer func() { <-u.storing }()
	u.mu.Lock()
	taken := u.unstored
	if len(taken) > 0 {
		u.unstored = make(map[KeyDay]int64, len(taken))
	}
	u.mu.Unlock()
	if len(taken) == 0 {
		return nil
	}
	counts := make([]domain.UsageCount, 0, len(taken))
	for k, n := range taken {
		counts = append(counts, domain.UsageCount{KeyID: k.KeyID, Day: DayString(k.Day), Count: n})
	}
	err := add(ctx, counts)
	if err != nil {
		u.mu.Lock()
		for k, n := range taken {
			u.unstored[k] += n
		}
		u.mu.Unlock()
	}
	return err
}

// forgetPastDays drops the unsure counts of days that are over.
func (u *usageLedger) forgetPastDays() {
	today := UnixDay(u.now())
	u.mu.Lock()
	for k := range u.unsure {
		if k.Day != today {
			delete(u.unsure, k)
		}
	}
	u.anyUnsure.Store(len(u.unsure) > 0)
	u.mu.Unlock()
}
