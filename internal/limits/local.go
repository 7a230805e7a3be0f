package limits

import (
	"context"
	"maps"
	"strconv"
	"sync"
	"time"

	"petstore/internal/domain"

	"golang.org/x/time/rate"
)

// caller is the rate-limit state of one caller. A fresh caller is equal to
// one whose bucket has filled up again, so such callers are forgotten
// (sweep); only an API key's daily count outlives that, in the database.
type caller struct {
	mu        sync.Mutex
	evicted   bool            // removed by sweep: look the caller up again
	id        domain.CallerID // an API key's budget, whose count is stored, or a client address
	limits    domain.Limits
	minute    *rate.Limiter
	policy    string     // the RateLimit-Policy header, fixed by limits
	state     limitState // the day, the wait and the ban (limitRules)
	unflushed []dayCount // requests not yet in the database, by day (keys only)
}

// Decision is the limiter's answer for one request, with what the rate-limit
// headers report: the window with fewer requests left.
type Decision struct {
	Allowed     bool
	Code        string        // why not: rate_limited or temporarily_banned
	BanStarted  bool          // this request started the ban: the one to record
	RetryAfter  time.Duration // how long until a request will be accepted
	Window      string        // "minute" or "day"
	Limit       int64
	Remaining   int64
	Reset       time.Time     // when the window is full again, rounded up to a second
	ResetIn     time.Duration // how long until then, rounded up to a second
	Policy      string
	BannedUntil time.Time // during a ban, its end
	// Today is the UTC day by the limiter's clock: the request counts on it in the key's usage history.
	Today     int64
	OverQuota bool  // rate_limited for the day's quota, not for the minute
	DayCount  int64 // the caller's requests today, this one included when allowed
}

// Limiter decides whether a caller's request may go ahead: *Local in this
// process, *Redis shared by every server that names the same Redis. Both
// count the API keys' requests towards the database through flush.
type Limiter interface {
	// Allow counts one request of id against lim, unless it is over a
	// limit, in which case nothing is spent.
	Allow(ctx context.Context, id domain.CallerID, lim domain.Limits) (Decision, error)
	// Peek reports id's two windows and what allow would report, without
	// counting a request.
	Peek(ctx context.Context, id domain.CallerID, lim domain.Limits) (Standing, error)
	// Flush writes the API keys' requests not yet stored through add.
	Flush(ctx context.Context, add func(context.Context, []domain.UsageCount) error) error
	// Lift ends id's ban that ends at until or sooner, and its wait: a ban
	// lifted in the database.
	Lift(ctx context.Context, id domain.CallerID, until time.Time) error
	// Sweep forgets callers that are as good as new; it returns how many.
	Sweep() int
}

// Window is one of a caller's two allowances at a moment.
type Window struct {
	Limit     int64
	Remaining int64
	Reset     time.Time     // when it is full again, rounded up to a second
	resetIn   time.Duration // how long until then, rounded up to a second
}

// Standing is a caller's two windows at a moment, with what a request would
// be told now (allowed unless the caller is banned): what GET /v1/rate_limit
// shows, without spending anything.
type Standing struct {
	Decision
	Minute, Day Window
}

func policyHeader(lim domain.Limits) string {
	return `"minute";q=` + strconv.FormatInt(lim.PerMinute, 10) + `;w=60, "day";q=` + strconv.FormatInt(lim.PerDay, 10) + `;w=86400`
}

// Local is the limiter that keeps every caller's state in this
// process: per-minute token buckets and per-UTC-day quotas, 429s, and bans of
// callers that keep knocking during a wait.
type Local struct {
	now      func() time.Time
	banAfter int
	banFor   time.Duration
	// usage returns a key's stored count for a day, so a restart or a
	// forgotten caller never starts the day afresh.
	usage func(ctx context.Context, keyID int64, day string) (int64, error)
	// Bans are the bans the database knows, a floor under each caller's.
	Bans *BanFloor

	flushing sync.Mutex // one flush at a time, so that batches go in order
	batches  *domain.Batches

	mu      sync.Mutex
	callers map[domain.CallerID]*caller
	peak    int // most callers held since the map was last made anew
	// unconfirmed is the batch of a flush whose outcome is not known: sent
	// again as it was by the next flush.
	unconfirmed []domain.UsageCount
}

// run runs the limit rules for c at now (cost 0: a look), with its bucket's
// tokens, and spends what they grant; c.mu is held.
func (l *Local) run(c *caller, now time.Time, cost int64) limitAnswer {
	f := limitFigures{Limits: c.limits, banAfter: int64(l.banAfter), banFor: l.banFor}
	run := limitRun{now: now, cost: cost, tokens: c.minute.TokensAt(now), floor: -1, banFloor: l.Bans.At(c.id)}
	a := limitRules(&c.state, &f, &run) // yesterday's unflushed count stays, under its day
	if a.take > 0 {
		c.minute.AllowN(now, int(a.take))
		if c.id.KeyID != 0 {
			c.addUnflushed(a.day)
		}
	}
	return a
}

// perSecond is the refill of a minute bucket under lim: a caller's
// c.minute.Limit(), known without taking the bucket's lock.
func perSecond(lim domain.Limits) float64 { return float64(lim.PerMinute) / 60 }

func NewLocal(now func() time.Time, banAfter int, banFor time.Duration,
	usage func(ctx context.Context, keyID int64, day string) (int64, error)) *Local {
	return &Local{now: now, banAfter: banAfter, banFor: banFor, usage: usage, batches: domain.NewBatches(), callers: make(map[domain.CallerID]*caller)}
}

func (l *Local) Allow(ctx context.Context, id domain.CallerID, lim domain.Limits) (Decision, error) {
	now := l.now()
	today := UnixDay(now)
	for {
		c, err := l.caller(ctx, id, lim, today)
		if err != nil {
			return Decision{}, err
		}
		c.mu.Lock()
		if c.evicted {
			c.mu.Unlock()
			continue
		}
		if c.limits != lim {
			c.retune(now, lim)
		}
		a := l.run(c, now, 1)
		c.mu.Unlock()
		return a.decision(c.limits, c.policy, perSecond(c.limits)), nil
	}
}

func (l *Local) Peek(ctx context.Context, id domain.CallerID, lim domain.Limits) (Standing, error) {
	now := l.now()
	today := UnixDay(now)
	c, err := l.caller(ctx, id, lim, today)
	if err != nil {
		return Standing{}, err
	}
	// A caller swept meanwhile is as good as new: it still reports what a
	// fresh one would.
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.limits != lim {
		c.retune(now, lim)
	}
	return l.run(c, now, 0).standing(c.limits, c.policy, perSecond(c.limits), true), nil
}

// retune gives c the figures lim, when its key was changed in place (keys
// update, PATCH /admin/v1/keys/{id}): the bucket keeps the tokens it has,
// up to the new burst, and refills at the new rate from now on.
func (c *caller) retune(now time.Time, lim domain.Limits) {
	c.limits, c.policy = lim, policyHeader(lim)
	c.minute.SetLimitAt(now, rate.Limit(float64(lim.PerMinute)/60))
	c.minute.SetBurstAt(now, int(lim.PerMinute))
}

// Lift: a caller this limiter does not hold has neither a ban nor a wait.
func (l *Local) Lift(_ context.Context, id domain.CallerID, until time.Time) error {
	l.mu.Lock()
	c := l.callers[id]
	l.mu.Unlock()
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	limitRules(&c.state, &limitFigures{}, &limitRun{now: l.now(), lift: until})
	return nil
}

// pending is how many of keyID's requests on day this limiter counted and
// has not stored yet.
func (l *Local) pending(keyID, day int64) int64 {
	l.mu.Lock()
	c := l.callers[domain.CallerID{KeyID: keyID}]
	n := countOf(l.unconfirmed, keyID, day)
	l.mu.Unlock()
	if c == nil {
		return n
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range c.unflushed {
		if u.day == day {
			n += u.n
		}
	}
	return n
}

func (l *Local) caller(ctx context.Context, id domain.CallerID, lim domain.Limits, today int64) (*caller, error) {
	l.mu.Lock()
	c := l.callers[id]
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	var count int64
	if id.KeyID != 0 {
		var err error
		if count, err = l.usage(ctx, id.KeyID, DayString(today)); err != nil {
			return nil, err
		}
	}
	c = &caller{
		id:     id,
		limits: lim,
		minute: rate.NewLimiter(rate.Limit(perSecond(lim)), int(lim.PerMinute)),
		policy: policyHeader(lim),
		state:  limitState{day: today, dayCount: count},
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if existing := l.callers[id]; existing != nil {
		return existing, nil
	}
	l.callers[id] = c
	l.peak = max(l.peak, len(l.callers))
	return c, nil
}

func UnixDay(t time.Time) int64 { return t.Unix() / 86400 }

func DayString(day int64) string { return time.Unix(day*86400, 0).UTC().Format(time.DateOnly) }

// NextMidnight is the UTC midnight after t, from its Unix day: every
// request's day window asks for it, and t.UTC().Date() with time.Date cost
// ten times as much.
func NextMidnight(t time.Time) time.Time {
	return time.Unix((UnixDay(t)+1)*86400, 0).UTC()
}

// wholeSeconds rounds d up to whole seconds, at least one: Retry-After
// speaks in seconds, and a client that waits that long must get through.
func wholeSeconds(d time.Duration) time.Duration {
	return max(roundUpSecond(d), time.Second)
}

func roundUpSecond(d time.Duration) time.Duration {
	return (d + time.Second - 1) / time.Second * time.Second
}

// Sweep forgets callers that are as good as new: a full bucket, no wait, no
// ban, nothing left to flush. It keeps memory bounded under many callers.
func (l *Local) Sweep() int {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	var unconfirmed map[int64]bool // the keys of counts sent without a known outcome
	for _, u := range l.unconfirmed {
		if unconfirmed == nil {
			unconfirmed = make(map[int64]bool)
		}
		unconfirmed[u.KeyID] = true
	}
	for id, c := range l.callers {
		c.mu.Lock()
		if len(c.unflushed) == 0 && !unconfirmed[id.KeyID] && !now.Before(c.state.bannedUntil) && !now.Before(c.state.waitUntil) &&
			c.minute.TokensAt(now) >= float64(c.limits.PerMinute) {
			c.evicted = true
			delete(l.callers, id)
			n++
		}
		c.mu.Unlock()
	}
	shrink(&l.callers, &l.peak)
	return n
}

// shrink makes *m anew, of the size it holds, once that is under a quarter
// of *peak, the most it held: a Go map keeps its size after deletes, and
// after a crowd has gone only the few who stay are worth the memory.
func shrink[V any](m *map[domain.CallerID]V, peak *int) {
	if len(*m) >= *peak/4 {
		return
	}
	fresh := make(map[domain.CallerID]V, len(*m))
	maps.Copy(fresh, *m)
	*m, *peak = fresh, len(fresh)
}

// dayCount is a number of requests on one UTC day (days since 1970-01-01).
type dayCount struct{ day, n int64 }

func (c *caller) addUnflushed(day int64) {
	if last := len(c.unflushed) - 1; last >= 0 && c.unflushed[last].day == day {
		c.unflushed[last].n++
		return
	}
	c.unflushed = append(c.unflushed, dayCount{day: day, n: 1})
}

// Flush writes the keys' requests counted since the last flush as one
// batch, after the batch of a flush whose outcome is not known, which goes
// again as it was and which the store adds once (FlushInOrder). Until a
// batch is written its callers are not forgotten (Sweep), and pending
// counts it. flush and sweep take l.mu before a caller's lock, and nothing
// takes them the other way round.
func (l *Local) Flush(ctx context.Context, add func(context.Context, []domain.UsageCount) error) error {
	l.flushing.Lock()
	defer l.flushing.Unlock()
	return FlushInOrder(ctx, &l.mu, &l.unconfirmed, l.takeUnflushed, add)
}

// takeUnflushed makes the counts not yet flushed into the next batch; l.mu
// is held.
func (l *Local) takeUnflushed() []domain.UsageCount {
	var counts []domain.UsageCount
	var batch domain.Batch
	for id, c := range l.callers {
		if id.KeyID == 0 {
			continue
		}
		c.mu.Lock()
		for _, u := range c.unflushed {
			if batch.N == 0 {
				batch = l.batches.Next()
			}
			counts = append(counts, domain.UsageCount{KeyID: id.KeyID, Day: DayString(u.day), Count: u.n, Batch: batch})
		}
		c.unflushed = c.unflushed[:0]
		c.mu.Unlock()
	}
	return counts
}

// UsageFlushEvery bounds how far the stored daily usage may lag behind.
const UsageFlushEvery = 2 * time.Second
