package limits

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"petstore/internal/domain"
	"petstore/internal/tracing"
)

// usageLedger holds the API keys' requests the Redis limiter granted until
// they are written to the database in batches (flush), and knows each
// key's count as this server does: what is stored and what it granted
// since. From there a day count that Redis lost is rebuilt, and a count
// Redis may lack after an outage is raised.
type usageLedger struct {
	now       func() time.Time
	usage     func(ctx context.Context, keyID int64, day string) (int64, error)
	fallback  *Local        // its requests not stored yet are known too
	dbTimeout time.Duration // bounds known's wait for the database, another seed or a flush included

	// storing is held while a flush writes, and while known reads the
	// database and the counts not yet written, so that it sees each
	// request once: written or still here.
	storing  chan struct{} // a lock whose wait known bounds
	batches  *domain.Batches
	mu       sync.Mutex
	unstored map[KeyDay]int64 // granted through Redis, not yet in the database
	// unconfirmed is the batch of a flush whose outcome is not known: sent
	// again as it was by the next flush, and counted by known meanwhile.
	unconfirmed []domain.UsageCount
	// unsure are the counts Redis may lack after an outage: of the keys this
	// server granted requests to alone, or had not stored when Redis went.
	unsure    map[KeyDay]bool
	anyUnsure atomic.Bool
}

// KeyDay names one API key's count of one UTC day.
type KeyDay struct{ KeyID, Day int64 }

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
	n += u.unstored[KeyDay{keyID, day}] + countOf(u.unconfirmed, keyID, day)
	u.mu.Unlock()
	return n + u.fallback.pending(keyID, day), nil
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
	for _, c := range u.unconfirmed {
		if t, err := time.Parse(time.DateOnly, c.Day); err == nil {
			u.unsure[KeyDay{c.KeyID, UnixDay(t)}] = true
		}
	}
	u.anyUnsure.Store(len(u.unsure) > 0)
	u.mu.Unlock()
}

// flush writes the counts granted since the last flush as one batch, after
// the batch of a flush whose outcome is not known, which goes again as it
// was and which the store adds once (FlushInOrder).
func (u *usageLedger) flush(ctx context.Context, add func(context.Context, []domain.UsageCount) error) error {
	u.storing <- struct{}{}
	defer func() { <-u.storing }()
	return FlushInOrder(ctx, &u.mu, &u.unconfirmed, u.takeUnstored, add)
}

// takeUnstored makes the counts granted and not yet stored into the next
// batch; u.mu is held.
func (u *usageLedger) takeUnstored() []domain.UsageCount {
	if len(u.unstored) == 0 {
		return nil
	}
	batch := u.batches.Next()
	counts := make([]domain.UsageCount, 0, len(u.unstored))
	for k, n := range u.unstored {
		counts = append(counts, domain.UsageCount{KeyID: k.KeyID, Day: DayString(k.Day), Count: n, Batch: batch})
	}
	u.unstored = make(map[KeyDay]int64, len(u.unstored))
	return counts
}

// countOf is keyID's count on day among counts.
func countOf(counts []domain.UsageCount, keyID, day int64) int64 {
	var n int64
	d := DayString(day)
	for _, c := range counts {
		if c.KeyID == keyID && c.Day == d {
			n += c.Count
		}
	}
	return n
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

// quotaThresholds are the shares of a day quota, in percent, whose crossing
// webhooks send (docs/webhooks.md, "What is sent").
var quotaThresholds = []int{80, 100}

// QuotaNotice is a budget's day count reaching a threshold of its quota.
// The store keeps one per budget, day and threshold: the first server to
// store it sends it, every other finds it there.
type QuotaNotice struct {
	BudgetID  int64
	KeyID     int64 // the key whose request reached it
	KeyName   string
	Env       string // the key's, whose endpoints take the notice
	Plan      string
	Threshold int
	Used      int64
	Limit     int64
	Day       string // YYYY-MM-DD, UTC
	At        time.Time
	Cause     string // the trace context of the request that reached it (tracing.Cause), "" when not sampled
}

// Notice is n as the store keeps it, with the mark that makes it once: its
// budget, day and threshold.
func (n QuotaNotice) Notice() (domain.WebhookNotice, error) {
	ev, err := domain.NewWebhookEvent(domain.WebhookQuotaThreshold, n.At, map[string]any{
		"keyId": n.KeyID, "keyName": n.KeyName, "plan": n.Plan, "threshold": n.Threshold,
		"used": n.Used, "limit": n.Limit, "day": n.Day,
	})
	mark := fmt.Sprintf("quota:%d:%s:%d", n.BudgetID, n.Day, n.Threshold)
	ev.Cause = n.Cause
	return domain.WebhookNotice{Mark: mark, Event: ev, ForgetAt: n.At.Add(domain.KeepQuotaMarks), Env: n.Env}, err
}

// QuotaWatch sees each request's day count as the limiter decided it and
// keeps the thresholds reached, until the usage flush stores them. A budget
// under 80% costs a request one comparison. A nil *QuotaWatch sees nothing.
type QuotaWatch struct {
	now func() time.Time

	mu      sync.Mutex
	day     int64
	seen    map[quotaSeen]bool // what this server has noticed today
	Pending []QuotaNotice
}

// quotaSeen is a threshold of a budget's quota, noticed today.
type quotaSeen struct {
	budget    int64
	threshold int
}

func NewQuotaWatch(now func() time.Time) *QuotaWatch {
	return &QuotaWatch{now: now, seen: make(map[quotaSeen]bool)}
}

// Observe looks at the day count d reports for key, whose budget has
// limit lim, in the request of ctx: a notice it starts keeps the trace
// context of the request's span when it is sampled, so that the notice's
// deliveries link to the request.
func (q *QuotaWatch) Observe(ctx context.Context, key *domain.Key, lim domain.Limits, d Decision) {
	if q == nil || key == nil || d.DayCount*100 < lim.PerDay*int64(quotaThresholds[0]) {
		return
	}
	now := q.now()
	today := UnixDay(now)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.day != today {
		q.day, q.seen = today, make(map[quotaSeen]bool)
	}
	for _, t := range quotaThresholds {
		if d.DayCount*100 < lim.PerDay*int64(t) {
			break
		}
		seen := quotaSeen{key.BudgetID, t}
		if q.seen[seen] || len(q.Pending) >= domain.MaxPendingAuditEvents {
			continue
		}
		q.seen[seen] = true
		q.Pending = append(q.Pending, QuotaNotice{
			BudgetID: key.BudgetID, KeyID: key.ID, KeyName: key.Name, Env: key.Env, Plan: key.Plan, Threshold: t,
			Used: d.DayCount, Limit: lim.PerDay, Day: DayString(today), At: now, Cause: tracing.Cause(ctx),
		})
	}
}

// Flush stores the notices seen since the last flush through add; what
// fails stays for the next.
func (q *QuotaWatch) Flush(ctx context.Context, add func(context.Context, []domain.WebhookNotice) error) error {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	taken := q.Pending
	q.Pending = nil
	q.mu.Unlock()
	if len(taken) == 0 {
		return nil
	}
	notices := make([]domain.WebhookNotice, len(taken))
	var err error
	for i, n := range taken {
		if notices[i], err = n.Notice(); err != nil {
			break
		}
	}
	if err == nil {
		err = add(ctx, notices)
	}
	if err != nil {
		q.mu.Lock()
		q.Pending = append(taken, q.Pending...)
		q.mu.Unlock()
	}
	return err
}
