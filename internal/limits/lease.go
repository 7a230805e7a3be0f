package limits

import (
	"sync"
	"time"

	"petstore/internal/domain"
)

// Leases (docs/replicas.md, "Leases"): a server takes several tokens of a
// caller's minute bucket and day count in one run of the limit script and
// spends them here, without a round trip. Redis counts them as spent from
// the moment they are taken, and the bucket does not refill them until the
// lease is settled, so the servers together never accept more than one would.
const (
	LeaseTraffic = 100 * time.Millisecond // a lease holds about this much of a caller's traffic here
	LeaseLife    = 500 * time.Millisecond // its unspent tokens go back after this
	// leaseKeep is how long Redis holds a lease as out. A server that
	// stopped without settling it (killed) loses its unspent tokens then,
	// as if spent: they refill with the bucket, never sooner.
	leaseKeep = LeaseLife + time.Second
	// LeaseShare: a lease takes at most 1/LeaseShare of what is left, so
	// near the limit it falls to one token (a round trip a request), and
	// the last requests go to whoever asks first.
	LeaseShare  = 16
	returnEvery = 100 * time.Millisecond // how often aged leases are looked for
	// forgetAfter: a caller with nothing leased is forgotten after this
	// long without a request, so that one seen now and then is not made
	// anew each time.
	forgetAfter = time.Second
	// tokenDebt is one request in the script's debt (1/pm ms units).
	tokenDebt = 60_000
	// spentUnknown is a leaseAsk's spentBy when the server does not know
	// (a time after every now; exact in Lua's doubles).
	spentUnknown = 1 << 53
)

// RateCount estimates a caller's requests on this server in the last
// LeaseTraffic from two counts: the current period's and the one before,
// the older weighted by the part of it still in the window.
type RateCount struct {
	start     time.Time // of the current period
	cur, prev int64
	last      time.Time // of the last request
}

func (c *RateCount) Add(now time.Time) {
	c.roll(now)
	c.cur++
	c.last = now
}

// Recent is the estimate of the requests in the LeaseTraffic before now,
// rounded up.
func (c *RateCount) Recent(now time.Time) int64 {
	c.roll(now)
	older := int64(LeaseTraffic - now.Sub(c.start))
	return c.cur + (c.prev*older+int64(LeaseTraffic)-1)/int64(LeaseTraffic)
}

func (c *RateCount) roll(now time.Time) {
	switch since := now.Sub(c.start); {
	case since >= 2*LeaseTraffic || since < 0:
		c.start, c.cur, c.prev = now, 0, 0
	case since >= LeaseTraffic:
		c.start, c.cur, c.prev = c.start.Add(LeaseTraffic), 0, c.cur
	}
}

// leaseAsk is what one run of the script does with this server's lease of
// the caller. The zero value leaves it alone (a plain run).
type leaseAsk struct {
	owner    string // this server's name in Redis, "" for a plain run
	giveBack int64  // unspent tokens of the lease that go back
	// spentBy is Redis's time (ms) by which the lease's other tokens were
	// spent: until then Redis holds them as out. spentUnknown when this
	// server does not know its lease (a run that failed may have taken
	// one): Redis then holds it as spent now.
	spentBy int64
	want    int64 // tokens wanted, the request's own included
}

// lease is what this server holds of one caller's limits: its recent
// request rate here, and tokens taken from Redis and not spent yet.
//
// Times on this server's clock and on Redis's are tied at the run that
// took the tokens: Redis ran it at answer.nowMs (in whole ms) at some
// moment after sent, so a moment t here is at most answer.nowMs + 1 ms +
// (t - sent) there. The lease ages out by that bound before Redis stops
// holding it as out, and before Redis's midnight.
type lease struct {
	key     any // the Redis key of the caller's state, boxed for the script
	mu      sync.Mutex
	evicted bool // forgotten by toSettle: look the caller up again
	rate    RateCount
	lim     domain.Limits // the figures the tokens were taken under
	left    int64         // tokens not spent yet
	// out: Redis holds this server's lease of the caller as out, until a
	// run settles it (or it expires there).
	out       bool
	sent      time.Time    // when the run that took the tokens was sent
	answer    scriptAnswer // what it answered
	until     time.Time    // when the unspent tokens age out
	lastSpent time.Time    // when one was last spent, zero when none was
	// renewing: a run settling the lease is under way. settledRuns counts
	// the runs that ended, and runEnded is told of each.
	renewing    bool
	settledRuns int
	runEnded    sync.Cond
}

// spend takes a token for a request at now under lim, if a live one is
// left, and returns the caller's state as this server sees it then.
func (l *lease) spend(now time.Time, lim domain.Limits) (scriptAnswer, bool) {
	if l.left == 0 || !now.Before(l.until) || l.lim != lim {
		return scriptAnswer{}, false
	}
	l.left--
	l.lastSpent = now
	return l.view(now), true
}

// view is the caller's state at now as this server sees it: the shared
// state at the last run, with the tokens still leased here counted as the
// caller's. The bucket's refill since that run is not counted: another
// server may have taken it.
func (l *lease) view(now time.Time) scriptAnswer {
	a := l.answer
	a.NowMs += now.Sub(l.sent).Milliseconds()
	a.leased = l.left
	return a
}

// live is how many tokens of the lease a request at now could spend.
func (l *lease) live(now time.Time, lim domain.Limits) int64 {
	if !now.Before(l.until) || l.lim != lim {
		return 0
	}
	return l.left
}

// settle starts a run, sent at now, that settles the lease: its unspent
// tokens go back, and want tokens are asked for. It returns the run's part;
// the caller reports how it ended through settled.
func (l *lease) settle(owner string, want int64, now time.Time) leaseAsk {
	ask := leaseAsk{owner: owner, giveBack: l.left, spentBy: spentUnknown, want: want}
	switch {
	case l.out && l.lastSpent.IsZero():
		ask.spentBy = l.answer.NowMs
	case l.out:
		ask.spentBy = l.answer.NowMs + 1 + ceilMilliseconds(l.lastSpent.Sub(l.sent))
	}
	l.left, l.out, l.lastSpent, l.sent = 0, false, time.Time{}, now
	l.renewing = true
	return ask
}

// settled ends the run settle started: a is its answer under lim when
// Redis answered it, and the tokens it leased are this server's.
func (l *lease) settled(a scriptAnswer, answered bool, lim domain.Limits) {
	if answered && a.Status == Allowed && a.leased > 0 {
		toMidnight := time.Duration((a.Day+1)*86_400_000-a.NowMs-1) * time.Millisecond
		l.answer, l.lim, l.left, l.out = a, lim, a.leased, true
		l.until = l.sent.Add(min(LeaseLife, toMidnight))
	}
	l.renewing = false
	l.settledRuns++
	l.runEnded.Broadcast()
}

// awaitRun waits until the run settling the lease, under way, ends. l.mu
// is held.
func (l *lease) awaitRun() {
	for run := l.settledRuns; l.renewing && l.settledRuns == run; {
		l.runEnded.Wait()
	}
}

func ceilMilliseconds(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// leases are this server's leases, one a caller.
type leases struct {
	owner string                          // this server's name in the lease records in Redis
	key   func(id domain.CallerID) string // the Redis key of a caller's state
	mu    sync.Mutex
	m     map[domain.CallerID]*lease
	peak  int // most leases held since the map was last made anew
}

// get returns id's lease, a new empty one the first time.
func (ls *leases) get(id domain.CallerID) *lease {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.m[id]
	if l == nil {
		l = &lease{key: ls.key(id)}
		l.runEnded.L = &l.mu
		ls.m[id] = l
		ls.peak = max(ls.peak, len(ls.m))
	}
	return l
}

// look prepares a look at id's state at now: it returns the tokens of this
// server's live lease of the caller, the caller's to spend; or it starts
// settling a lease that aged out, in the look's run: held is that lease, to
// be told how the run ended (settled).
func (ls *leases) look(id domain.CallerID, now time.Time, lim domain.Limits) (live int64, held *lease, ask leaseAsk) {
	ls.mu.Lock()
	l := ls.m[id]
	ls.mu.Unlock()
	if l == nil {
		return 0, nil, leaseAsk{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if live = l.live(now, lim); live > 0 || !l.out || l.renewing {
		return live, nil, leaseAsk{}
	}
	return 0, l, l.settle(ls.owner, 0, now)
}

// heldLease is a lease being settled, with its caller and the run's part.
type heldLease struct {
	id  domain.CallerID
	l   *lease
	ask leaseAsk
}

// toSettle starts settling the leases Redis holds as out that aged out by
// now (all of them when all is set), and forgets callers with nothing
// leased and no request lately.
func (ls *leases) toSettle(now time.Time, all bool) []heldLease {
	var held []heldLease
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for id, l := range ls.m {
		l.mu.Lock()
		switch {
		case l.renewing:
		case l.out && (all || !now.Before(l.until)):
			held = append(held, heldLease{id, l, l.settle(ls.owner, 0, now)})
		case !l.out && now.Sub(l.rate.last) >= forgetAfter:
			l.evicted = true
			delete(ls.m, id)
		}
		l.mu.Unlock()
	}
	shrink(&ls.m, &ls.peak)
	return held
}
