package limits

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

	"petstore/internal/batch"
	"petstore/internal/domain"

	"github.com/redis/go-redis/v9"
)

// maxScriptPerMinute keeps the script's arithmetic exact (whole numbers
// below 2^53 in Lua's doubles); a bucket that large never empties.
const maxScriptPerMinute = 1 << 36

// RedisHooks let metrics hear what the Redis limiter does. Either may be nil.
type RedisHooks struct {
	// Fallback is told true when Redis stops answering and this server
	// limits on its own, and false when Redis answers again.
	Fallback func(active bool)
	// Call is told, once each round trip of script runs has ended, when it began.
	Call func(start time.Time)
}

type RedisConfig struct {
	URL      string
	Prefix   string // of every key, so that environments sharing a Redis stay apart
	BanAfter int
	BanFor   time.Duration
	Now      func() time.Time
	// Usage returns a key's stored count for a day (Store.Usage).
	Usage func(ctx context.Context, keyID int64, day string) (int64, error)
	// Bans: the database's are a floor under Redis's, which rebuilds those
	// an empty Redis lost, and the fallback's.
	Bans *BanFloor
	// DBTimeout bounds a seed's wait for the database (--db-timeout),
	// the wait for another seed or a flush included.
	DBTimeout time.Duration
	Logger    *slog.Logger
	Hooks     RedisHooks
	// ScriptNow, in tests only, is the script's clock instead of Redis TIME.
	ScriptNow func() time.Time
}

// Redis keeps every caller's rate-limit state in Redis, one script
// run a request, so that the servers naming one Redis together grant
// exactly what one server would. While Redis does not answer, the
// in-process fallback limits alone.
type Redis struct {
	RedisConfig
	Link     *redisLink
	ledger   *usageLedger
	scripts  *scriptRunner
	leases   leases
	fallback *Local

	figuresMu sync.RWMutex
	figures   map[domain.Limits]*figures
	owner     any // this server's name in Redis's lease records, boxed for the script's arguments

	stop     chan struct{} // closed by close: leases are no longer returned as they age
	stopOnce sync.Once
	loop     sync.WaitGroup
}

// NewRedis connects to cfg.url. A Redis that does not answer yet is
// no error: the limiter starts on its fallback and moves to Redis once it
// answers.
func NewRedis(ctx context.Context, cfg RedisConfig) (*Redis, error) {
	opts, err := RedisOptions(cfg.URL)
	if err != nil {
		return nil, err
	}
	client := redis.NewClient(opts)
	r := &Redis{
		RedisConfig: cfg,
		Link:        &redisLink{client: client, now: cfg.Now, logger: cfg.Logger, onFallback: cfg.Hooks.Fallback},
		scripts:     &scriptRunner{client: client, call: cfg.Hooks.Call},
		figures:     make(map[domain.Limits]*figures),
		// The name of this server's leases in Redis, new at each start.
		leases: leases{owner: rand.Text()[:12], m: make(map[domain.CallerID]*lease)},
		stop:   make(chan struct{}),
	}
	r.scripts.batch = batch.Batcher[ScriptRun]{Name: "redis limit_script batch", Max: maxPipeline, Run: r.scripts.RunBatch}
	r.owner = r.leases.owner
	r.leases.key = r.Key
	r.ledger = &usageLedger{now: cfg.Now, usage: cfg.Usage, dbTimeout: cfg.DBTimeout,
		storing: make(chan struct{}, 1), batches: domain.NewBatches(), unstored: make(map[KeyDay]int64), unsure: make(map[KeyDay]bool)}
	r.fallback = NewLocal(cfg.Now, cfg.BanAfter, cfg.BanFor, r.ledger.knownUsage)
	r.fallback.Bans = cfg.Bans
	r.ledger.fallback = r.fallback
	if err := client.Ping(ctx).Err(); err != nil {
		r.failed(err)
	}
	r.loop.Go(func() { r.returnLeasesEvery(returnEvery) })
	return r, nil
}

// Close settles every lease this server holds (their unspent tokens go
// back), then lets Redis go.
func (r *Redis) Close() error {
	r.stopOnce.Do(func() {
		close(r.stop)
		r.loop.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
		defer cancel()
		r.ReturnLeases(ctx, true)
	})
	return r.Link.client.Close()
}

// failed notes that Redis did not answer; at the start of an outage, the
// counts Redis may come back without become unsure.
func (r *Redis) failed(err error) {
	if r.Link.failed(err) {
		r.ledger.redisWent()
	}
}

// Allow spends a token of this server's lease of the caller when it holds
// a live one. Otherwise the request runs the script, which settles the
// lease and takes a new one in the same run; requests of the caller that
// come meanwhile wait for that run once, then run the script on their own.
func (r *Redis) Allow(ctx context.Context, id domain.CallerID, lim domain.Limits) (Decision, error) {
	shared := sharedLimits(lim)
	waited := false
	for {
		now := r.Now()
		l := r.leases.get(id)
		l.mu.Lock()
		if l.evicted {
			l.mu.Unlock()
			continue
		}
		if !waited {
			l.rate.Add(now)
		}
		if a, ok := l.spend(now, shared); ok {
			l.mu.Unlock()
			r.ledger.granted(id, a.Day)
			return r.standing(a, shared, false).Decision, nil
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
			return s.Decision, err
		}
		ask := l.settle(r.leases.owner, max(1, l.rate.Recent(now)), now)
		l.mu.Unlock()
		a, err := r.ask(ctx, id, l.key, shared, 1, ask)
		l.mu.Lock()
		l.settled(a, err == nil, shared)
		l.mu.Unlock()
		s, err := r.answer(ctx, id, lim, 1, a, err)
		return s.Decision, err
	}
}

// Peek reports the caller's state as allow would: Redis's, with the tokens
// of this server's lease counted as the caller's. A lease that aged out is
// settled first, in the same run.
func (r *Redis) Peek(ctx context.Context, id domain.CallerID, lim domain.Limits) (Standing, error) {
	shared := sharedLimits(lim)
	live, held, ask := r.leases.look(id, r.Now(), shared)
	a, err := r.ask(ctx, id, r.Key(id), shared, 0, ask)
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
func (r *Redis) answer(ctx context.Context, id domain.CallerID, lim domain.Limits, cost int64, a scriptAnswer, err error) (Standing, error) {
	switch {
	case errors.Is(err, errNoRedis):
		return r.decideAlone(ctx, id, lim, cost)
	case err != nil:
		return Standing{}, err
	}
	switch {
	case a.Status == Allowed && cost > 0:
		r.ledger.granted(id, a.Day)
	case a.Status == banned || a.Status == banStarted:
		r.Bans.Hold(id, time.UnixMilli(a.extra), r.Now())
	}
	return r.standing(a, sharedLimits(lim), cost == 0), nil
}

// standing is what a's run tells the caller, under lim, which are shared
// limits.
func (r *Redis) standing(a scriptAnswer, lim domain.Limits, both bool) Standing {
	return a.limitAnswer(lim).standing(lim, r.figuresOf(lim).policy, perSecond(lim), both)
}

// sharedLimits are lim as the script counts them: a bucket too large for
// its arithmetic never empties anyway.
func sharedLimits(lim domain.Limits) domain.Limits {
	lim.PerMinute = min(lim.PerMinute, maxScriptPerMinute)
	return lim
}

// ask runs the script on key, id's state, for one request (cost 1) or a
// look (cost 0) with lim, which are shared limits, and lease. A caller
// whose day count Redis lacks is seeded from the database, in a second
// run. It returns errNoRedis when Redis does not answer, or has not
// answered lately.
func (r *Redis) ask(ctx context.Context, id domain.CallerID, key any, lim domain.Limits, cost int64, lease leaseAsk) (scriptAnswer, error) {
	if r.Link.skip() {
		return scriptAnswer{}, errNoRedis
	}
	// A count Redis may lack is raised to what this server knows, which
	// never exceeds the truth: the database holds each request once, and
	// this server's unwritten requests are not in it yet.
	run := r.Args(key, id, lim)
	run.Cost, run.lease = cost, lease
	var unsure KeyDay
	if id.KeyID != 0 && r.ledger.anyUnsure.Load() {
		if unsure = r.ledger.takeUnsure(id.KeyID); unsure.KeyID != 0 {
			n, err := r.ledger.known(ctx, id.KeyID, unsure.Day)
			if err != nil {
				r.ledger.markUnsure(unsure)
				return scriptAnswer{}, err
			}
			run.floor, run.floorDay = n, unsure.Day
		}
	}
	a, err := r.scripts.Run(ctx, run)
	if err == nil && a.Status == NeedSeed {
		if run.Seed, err = r.ledger.known(ctx, id.KeyID, a.Day); err != nil {
			r.ledger.markUnsure(unsure)
			return scriptAnswer{}, err
		}
		run.floor, run.floorDay = -1, 0
		a, err = r.scripts.Run(ctx, run)
	}
	if err != nil {
		r.ledger.markUnsure(unsure)
		if ctx.Err() == nil {
			r.failed(err)
		}
		return scriptAnswer{}, fmt.Errorf("%w: %v", errNoRedis, err)
	}
	r.Link.answered()
	return a, nil
}

// Args are the arguments of a look (cost 0) at key, id's state, with lim,
// which are shared limits, without a seed, a floor or a lease, and with
// the end of id's ban as the database knows it.
func (r *Redis) Args(key any, id domain.CallerID, lim domain.Limits) scriptArgs {
	var nowMs int64
	if r.ScriptNow != nil {
		nowMs = r.ScriptNow().UnixMilli()
	}
	var banFloor int64
	if until := r.Bans.At(id); !until.IsZero() {
		banFloor = until.UnixMilli()
	}
	return scriptArgs{key: key, nowMs: nowMs, fig: r.figuresOf(lim), durable: id.KeyID != 0, Seed: -1, floor: -1, owner: r.owner,
		banFloor: banFloor}
}

// Lift lifts in the fallback and in Redis; it fails while Redis does not
// answer, which it tries as a request would (once in RedisProbeEvery).
func (r *Redis) Lift(ctx context.Context, id domain.CallerID, until time.Time) error {
	r.fallback.Lift(ctx, id, until)
	if r.Link.skip() {
		return errNoRedis
	}
	run := r.Args(r.Key(id), id, domain.AnonymousLimits) // a lift reads no figures: any will do
	run.lift = until.UnixMilli()
	if _, err := r.scripts.Run(ctx, run); err != nil {
		if ctx.Err() == nil {
			r.failed(err)
		}
		return fmt.Errorf("%w: %v", errNoRedis, err)
	}
	r.Link.answered()
	return nil
}

// ReturnLeases settles the leases that aged out (every lease, when all is
// set): their unspent tokens go back, and Redis stops holding them as out.
// While Redis does not answer they are dropped: Redis takes them as spent
// when they expire there.
func (r *Redis) ReturnLeases(ctx context.Context, all bool) {
	held := r.leases.toSettle(r.Now(), all)
	if len(held) == 0 {
		return
	}
	runs := make([]ScriptRun, len(held))
	for i, h := range held {
		settle := r.Args(h.l.key, h.id, h.l.lim)
		settle.lease = h.ask
		runs[i] = ScriptRun{Cmd: settle.Encode()}
	}
	if !r.Link.down.Load() {
		for chunk := range slices.Chunk(runs, maxPipeline) {
			_ = r.scripts.RunBatch(ctx, chunk) // a failed give-back expires in Redis
		}
	}
	for _, h := range held {
		h.l.mu.Lock()
		h.l.settled(scriptAnswer{}, false, h.l.lim)
		h.l.mu.Unlock()
	}
}

func (r *Redis) returnLeasesEvery(every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
			r.ReturnLeases(ctx, false)
			cancel()
		}
	}
}

// Key is the Redis key of id's state. Every key of one caller would share
// its hash tag, the part in braces, so the script also runs on a Redis
// Cluster.
func (r *Redis) Key(id domain.CallerID) string {
	var buf [96]byte
	b := append(buf[:0], '{')
	b = append(b, r.Prefix...)
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

// figuresOf returns lim's figures, made once.
func (r *Redis) figuresOf(lim domain.Limits) *figures {
	r.figuresMu.RLock()
	f, ok := r.figures[lim]
	r.figuresMu.RUnlock()
	if ok {
		return f
	}
	f = newFigures(lim, r.BanAfter, r.BanFor)
	r.figuresMu.Lock()
	r.figures[lim] = f
	r.figuresMu.Unlock()
	return f
}

// decideAlone answers from the in-process fallback while Redis does not.
// Redis does not count what it grants: the key's count there is unsure
// until raised.
func (r *Redis) decideAlone(ctx context.Context, id domain.CallerID, lim domain.Limits, cost int64) (Standing, error) {
	if cost == 0 {
		return r.fallback.Peek(ctx, id, lim)
	}
	d, err := r.fallback.Allow(ctx, id, lim)
	if err == nil && d.Allowed && id.KeyID != 0 {
		r.ledger.markUnsure(KeyDay{id.KeyID, UnixDay(r.Now())})
	}
	return Standing{Decision: d}, err
}

// Flush writes the requests granted through Redis, then the fallback's.
// What fails to be written stays for the next flush.
func (r *Redis) Flush(ctx context.Context, add func(context.Context, []domain.UsageCount) error) error {
	return errors.Join(r.ledger.flush(ctx, add), r.fallback.Flush(ctx, add))
}

// Sweep forgets the fallback's idle callers, and unsure counts of days
// that are over.
func (r *Redis) Sweep() int {
	r.ledger.forgetPastDays()
	return r.fallback.Sweep()
}
