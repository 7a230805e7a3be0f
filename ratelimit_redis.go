package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"petstore/internal/domain"

	"github.com/redis/go-redis/v9"
)

// maxScriptPerMinute keeps the script's arithmetic exact (whole numbers
// below 2^53 in Lua's doubles); a bucket that large never empties.
const maxScriptPerMinute = 1 << 36

// redisHooks let metrics hear what the Redis limiter does. Either may be nil.
type redisHooks struct {
	// fallback is told true when Redis stops answering and this server
	// limits on its own, and false when Redis answers again.
	fallback func(active bool)
	// call is told when each round trip of script runs began, once it has
	// ended.
	call func(start time.Time)
}

// redisConfig is what newRedisLimiter needs.
type redisConfig struct {
	url      string
	prefix   string // of every key, so that environments sharing a Redis stay apart
	banAfter int
	banFor   time.Duration
	now      func() time.Time
	// usage returns a key's stored count for a day (Store.Usage).
	usage func(ctx context.Context, keyID int64, day string) (int64, error)
	// bans are the bans the database knows: a floor under Redis's, which
	// rebuilds those an empty Redis lost, and the fallback's.
	bans *banFloor
	// dbTimeout bounds a seed's wait for the database (--db-timeout),
	// the wait for another seed or a flush included.
	dbTimeout time.Duration
	logger    *slog.Logger
	hooks     redisHooks
	// scriptNow, in tests only, is the script's clock instead of Redis TIME.
	scriptNow func() time.Time
}

// redisLimiter keeps every caller's rate-limit state in Redis, one script
// run a request, so that the servers naming one Redis together grant
// exactly what one server would. Its jobs are each a type of their own:
// the connection and its outages (redisLink), the API keys' requests on
// their way to the database (usageLedger), the shared round trips
// (scriptRunner) and this server's leases (leases). While Redis does not
// answer, the in-process fallback limits alone.
type redisLimiter struct {
	redisConfig
	link     *redisLink
	ledger   *usageLedger
	scripts  *scriptRunner
	leases   leases
	fallback *localLimiter

	figuresMu sync.RWMutex
	figures   map[domain.Limits]*figures
	owner     any // this server's name in Redis's lease records, boxed for the script's arguments

	stop     chan struct{} // closed by close: leases are no longer returned as they age
	stopOnce sync.Once
	loop     sync.WaitGroup
}

// newRedisLimiter connects to cfg.url. A Redis that does not answer yet is
// no error: the limiter starts on its fallback and moves to Redis once it
// answers.
func newRedisLimiter(ctx context.Context, cfg redisConfig) (*redisLimiter, error) {
	opts, err := redisOptions(cfg.url)
	if err != nil {
		return nil, err
	}
	client := redis.NewClient(opts)
	r := &redisLimiter{
		redisConfig: cfg,
		link:        &redisLink{client: client, now: cfg.now, logger: cfg.logger, onFallback: cfg.hooks.fallback},
		scripts:     newScriptRunner(client, cfg.hooks.call),
		figures:     make(map[domain.Limits]*figures),
		// The name of this server's leases in Redis, new at each start.
		leases: leases{owner: rand.Text()[:12], m: make(map[domain.CallerID]*lease)},
		stop:   make(chan struct{}),
	}
	r.owner = r.leases.owner
	r.leases.key = r.key
	r.ledger = newUsageLedger(cfg.now, cfg.dbTimeout, cfg.usage, func(keyID, day int64) int64 { return r.fallback.pending(keyID, day) })
	r.fallback = newLocalLimiter(cfg.now, cfg.banAfter, cfg.banFor, r.ledger.knownUsage)
	r.fallback.bans = cfg.bans
	if err := client.Ping(ctx).Err(); err != nil {
		r.failed(err)
	}
	r.loop.Go(func() { r.returnLeasesEvery(returnEvery) })
	return r, nil
}

// close settles every lease this server holds (their unspent tokens go
// back), then lets Redis go.
func (r *redisLimiter) close() error {
	r.stopOnce.Do(func() {
		close(r.stop)
		r.loop.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
		defer cancel()
		r.returnLeases(ctx, true)
	})
	return r.link.client.Close()
}

// failed notes that Redis did not answer; at the start of an outage, the
// counts Redis may come back without become unsure.
func (r *redisLimiter) failed(err error) {
	if r.link.failed(err) {
		r.ledger.redisWent()
	}
}

// allow spends a token of this server's lease of the caller when it holds
// a live one. Otherwise the request runs the script, which settles the
// lease and takes a new one in the same run; requests of the caller that
// come meanwhile wait for that run once, then run the script on their own.
func (r *redisLimiter) allow(ctx context.Context, id domain.CallerID, lim domain.Limits) (decision, error) {
	shared := sharedLimits(lim)
	waited := false
	for {
		now := r.now()
		l := r.leases.get(id)
		l.mu.Lock()
		if l.evicted {
			l.mu.Unlock()
			continue
		}
		if !waited {
			l.rate.add(now)
		}
		if a, ok := l.spend(now, shared); ok {
			l.mu.Unlock()
			r.ledger.granted(id, a.day)
			return r.standing(a, shared, false).decision, nil
		}
		if l.renewing {
			if !waited {
				l.awaitRun() // a script run: it ends within redisTimeout
				l.mu.Unlock()
				waited = true
				continue
			}
			l.mu.Unlock()
			a, err := r.ask(ctx, id, l.key, shared, 1, leaseAsk{})
			s, err := r.answer(ctx, id, lim, 1, a, err)
			return s.decision, err
		}
		ask := l.settle(r.leases.owner, max(1, l.rate.recent(now)), now)
		l.mu.Unlock()
		a, err := r.ask(ctx, id, l.key, shared, 1, ask)
		l.mu.Lock()
		l.settled(a, err == nil, shared)
		l.mu.Unlock()
		s, err := r.answer(ctx, id, lim, 1, a, err)
		return s.decision, err
	}
}

// peek reports the caller's state as allow would: Redis's, with the tokens
// of this server's lease counted as the caller's. A lease that aged out is
// settled first, in the same run.
func (r *redisLimiter) peek(ctx context.Context, id domain.CallerID, lim domain.Limits) (standing, error) {
	shared := sharedLimits(lim)
	live, held, ask := r.leases.look(id, r.now(), shared)
	a, err := r.ask(ctx, id, r.key(id), shared, 0, ask)
	if held != nil {
		held.mu.Lock()
		held.settled(a, err == nil, shared)
		held.mu.Unlock()
	}
	a.leased = live
	return r.answer(ctx, id, lim, 0, a, err)
}

// errNoRedis says that Redis did not answer a run: the fallback answers.
var errNoRedis = errors.New("no answer from Redis")

// answer turns a's run, or its error, into the request's answer. A run
// Redis did not answer goes to the fallback.
func (r *redisLimiter) answer(ctx context.Context, id domain.CallerID, lim domain.Limits, cost int64, a scriptAnswer, err error) (standing, error) {
	switch {
	case errors.Is(err, errNoRedis):
		return r.decideAlone(ctx, id, lim, cost)
	case err != nil:
		return standing{}, err
	}
	switch {
	case a.status == scriptAllowed && cost > 0:
		r.ledger.granted(id, a.day)
	case a.status == scriptBanned || a.status == scriptBanStart:
		// Held here at once, not only once stored and read back: the
		// fallback keeps it should Redis go away now.
		r.bans.hold(id, time.UnixMilli(a.extra), r.now())
	}
	return r.standing(a, sharedLimits(lim), cost == 0), nil
}

// standing is what a's run tells the caller, under lim, which are shared
// limits: the tokens leased to this server are the caller's to spend.
func (r *redisLimiter) standing(a scriptAnswer, lim domain.Limits, both bool) standing {
	return a.limitAnswer(lim).standing(lim, r.figuresOf(lim).policy, perSecond(lim), both)
}

// sharedLimits are lim as the script counts them: a bucket too large for
// its arithmetic never empties anyway.
func sharedLimits(lim domain.Limits) domain.Limits {
	lim.PerMinute = min(lim.PerMinute, maxScriptPerMinute)
	return lim
}

// ask runs the script on key, id's state, for one request (cost 1) or a
// look (cost 0) with lim, which are shared limits, and lease. A caller whose day count Redis lacks is
// seeded from the database, in a second run. It returns errNoRedis when
// Redis does not answer, or has not answered lately.
func (r *redisLimiter) ask(ctx context.Context, id domain.CallerID, key any, lim domain.Limits, cost int64, lease leaseAsk) (scriptAnswer, error) {
	if r.link.skip() {
		return scriptAnswer{}, errNoRedis
	}
	// A count Redis may lack is raised to what this server knows, which
	// never exceeds the truth: the database holds each request once, and
	// this server's unwritten requests are not in it yet.
	run := r.args(key, id, lim)
	run.cost, run.lease = cost, lease
	var unsure keyDay
	if id.KeyID != 0 && r.ledger.anyUnsure.Load() {
		if unsure = r.ledger.takeUnsure(id.KeyID); unsure.keyID != 0 {
			n, err := r.ledger.known(ctx, id.KeyID, unsure.day)
			if err != nil {
				r.ledger.markUnsure(unsure)
				return scriptAnswer{}, err
			}
			run.floor, run.floorDay = n, unsure.day
		}
	}
	a, err := r.scripts.run(run)
	if err == nil && a.status == scriptNeedSeed {
		if run.seed, err = r.ledger.known(ctx, id.KeyID, a.day); err != nil {
			r.ledger.markUnsure(unsure)
			return scriptAnswer{}, err
		}
		run.floor, run.floorDay = -1, 0
		a, err = r.scripts.run(run)
	}
	if err != nil {
		r.ledger.markUnsure(unsure)
		if ctx.Err() == nil {
			r.failed(err)
		}
		return scriptAnswer{}, fmt.Errorf("%w: %v", errNoRedis, err)
	}
	r.link.answered()
	return a, nil
}

// args are the arguments of a look (cost 0) at key, id's state, with lim,
// which are shared limits, without a seed, a floor or a lease, and with
// the end of id's ban as the database knows it.
func (r *redisLimiter) args(key any, id domain.CallerID, lim domain.Limits) scriptArgs {
	var nowMs int64
	if r.scriptNow != nil {
		nowMs = r.scriptNow().UnixMilli()
	}
	var banFloor int64
	if until := r.bans.at(id); !until.IsZero() {
		banFloor = until.UnixMilli()
	}
	return scriptArgs{key: key, nowMs: nowMs, fig: r.figuresOf(lim), durable: id.KeyID != 0, seed: -1, floor: -1, owner: r.owner,
		banFloor: banFloor}
}

// lift ends id's ban that ends at until or sooner, and its wait, in the
// fallback and in Redis; it fails while Redis does not answer. While Redis
// is away, a lift tries it as a request would (once in redisProbeEvery).
func (r *redisLimiter) lift(ctx context.Context, id domain.CallerID, until time.Time) error {
	r.fallback.lift(ctx, id, until)
	if r.link.skip() {
		return errNoRedis
	}
	run := r.args(r.key(id), id, domain.AnonymousLimits) // a lift reads no figures: any will do
	run.lift = until.UnixMilli()
	if _, err := r.scripts.run(run); err != nil {
		if ctx.Err() == nil {
			r.failed(err)
		}
		return fmt.Errorf("%w: %v", errNoRedis, err)
	}
	r.link.answered()
	return nil
}

// returnLeases settles the leases that aged out (every lease, when all is
// set): their unspent tokens go back, and Redis stops holding them as out.
// While Redis does not answer they are dropped: Redis takes them as spent
// when they expire there.
func (r *redisLimiter) returnLeases(ctx context.Context, all bool) {
	held := r.leases.toSettle(r.now(), all)
	if len(held) == 0 {
		return
	}
	runs := make([]scriptRun, len(held))
	for i, h := range held {
		settle := r.args(h.l.key, h.id, h.l.lim)
		settle.lease = h.ask
		runs[i] = scriptRun{cmd: settle.encode()}
	}
	if !r.link.down.Load() {
		for batch := range slices.Chunk(runs, maxPipeline) {
			_ = r.scripts.runBatch(ctx, batch) // a failed give-back expires in Redis
		}
	}
	for _, h := range held {
		h.l.mu.Lock()
		h.l.settled(scriptAnswer{}, false, h.l.lim)
		h.l.mu.Unlock()
	}
}

// returnLeasesEvery gives leases that aged out back until stop is closed.
func (r *redisLimiter) returnLeasesEvery(every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
			r.returnLeases(ctx, false)
			cancel()
		}
	}
}

// key is the Redis key of id's state. Every key of one caller would share
// its hash tag, the part in braces, so the script also runs on a Redis
// Cluster.
func (r *redisLimiter) key(id domain.CallerID) string {
	var buf [96]byte
	b := append(buf[:0], '{')
	b = append(b, r.prefix...)
	if id.KeyID != 0 {
		b = append(b, ":k:"...)
		b = strconv.AppendInt(b, id.KeyID, 10)
	} else {
		b = append(b, ":a:"...)
		b = id.Addr.AppendTo(b)
	}
	b = append(b, "}:limit"...)
	return string(b)
}

// figuresOf returns lim's figures, made once per figures.
func (r *redisLimiter) figuresOf(lim domain.Limits) *figures {
	r.figuresMu.RLock()
	f, ok := r.figures[lim]
	r.figuresMu.RUnlock()
	if ok {
		return f
	}
	f = newFigures(lim, r.banAfter, r.banFor)
	r.figuresMu.Lock()
	r.figures[lim] = f
	r.figuresMu.Unlock()
	return f
}

// decideAlone answers from the in-process fallback while Redis does not.
// Redis does not count what it grants: the key's count there is unsure
// until raised.
func (r *redisLimiter) decideAlone(ctx context.Context, id domain.CallerID, lim domain.Limits, cost int64) (standing, error) {
	if cost == 0 {
		return r.fallback.peek(ctx, id, lim)
	}
	d, err := r.fallback.allow(ctx, id, lim)
	if err == nil && d.allowed && id.KeyID != 0 {
		r.ledger.markUnsure(keyDay{id.KeyID, unixDay(r.now())})
	}
	return standing{decision: d}, err
}

// flush writes the requests granted through Redis, then the fallback's.
// What fails to be written stays for the next flush.
func (r *redisLimiter) flush(ctx context.Context, add func(context.Context, []domain.UsageCount) error) error {
	return errors.Join(r.ledger.flush(ctx, add), r.fallback.flush(ctx, add))
}

// sweep forgets the fallback's idle callers, and unsure counts of days
// that are over.
func (r *redisLimiter) sweep() int {
	r.ledger.forgetPastDays()
	return r.fallback.sweep()
}
