package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Redis limits: a request never waits long for a Redis that is gone, and
// while it is gone at most one request in redisProbeEvery tries it again.
const (
	redisTimeout    = 100 * time.Millisecond // dial, read, write, waiting for a pooled connection
	redisProbeEvery = 500 * time.Millisecond
	// maxScriptPerMinute keeps the script's arithmetic exact (whole numbers
	// below 2^53 in Lua's doubles); a bucket that large never empties.
	maxScriptPerMinute = 1 << 36
)

// limitScript decides one request of one caller atomically: the ban, the
// minute bucket (GCRA: burst = the per-minute figure, one request a
// 60000/pm ms), the day count (a fixed UTC day), and after a refusal the
// wait and the ban that follows too many requests during it. It spends only
// when both windows allow, and a refusal spends nothing. Time is Redis's
// TIME in whole milliseconds.
//
// A run may also settle a server's lease of the caller and take a new one
// (ratelimit_lease.go): the lease's unspent tokens go back (the bucket moved
// back, never before now; the day count lowered), and several tokens are
// taken at once, about what the server asked for, at most 1/share of what is
// left. Tokens leased out count as spent, and the bucket does not refill
// them until their lease is settled or expires: the debt stays at least the
// tokens leased out, so a token spent late never lets the servers together
// accept more than the bucket allows.
//
// KEYS[1] is the caller's state, a hash:
//
//	t, r    the bucket's theoretical arrival time (TAT): t ms + r/pm ms
//	d, n    the UTC day (days since 1970-01-01) and the requests granted on it
//	wu, wc  after a refusal: the wait's end (ms), requests sent during it
//	bu      the ban's end (ms)
//	l:S x:S server S's lease: the tokens leased out, and when (ms) Redis
//	        stops holding them as out and takes them as spent
//
// It lives until every part is as good as new: the bucket full, the wait,
// the ban and the leases over, and for an API key also the day over.
//
// ARGV: 1 now in ms, 0 for Redis TIME (only tests pass one); 2 per minute;
// 3 per day; 4 cost: 1 counts a request, 0 only looks; 5 ban after; 6 ban
// for (ms); 7 "1" for an API key, whose day count is also stored in the
// database: a missing count is rebuilt from there, never started at 0;
// 8 seed: the stored count of today, -1 when not read yet; 9 floor: a count
// the caller is known to have reached (-1: none), which Redis's count is
// raised to if it is below, after an outage; 10 the day of floor; 11 the
// server whose lease this run settles, "" for none; 12 its unspent tokens;
// 13 Redis's time (ms) by which its other tokens were spent (2^53 when the
// server does not know: held as spent now);
// 14 tokens wanted, the request's own included; 15 how long (ms) a lease is
// held as out; 16 share.
//
// It returns {status, now (ms), debt, day count, day, extra, leased}: status
// 0 allowed (or looked at: not banned), 1 limited with extra the
// Retry-After in seconds, 2 banned with extra the ban's end (ms), 3 the day
// count is missing and needs a seed (nothing changed), 4 banned by this
// very run (the one run of all servers' that starts the ban), extra as for
// 2. debt is how far the TAT is ahead of now in 1/pm ms, 60000 a request: 0
// when the bucket is full. leased is how many tokens beyond the request's own went to the
// server's new lease; debt and day count include them.
var limitScript = redis.NewScript(limitScriptText)

const limitScriptText = `
local key = KEYS[1]
local now = tonumber(ARGV[1])
if now == 0 then
	local t = redis.call('TIME')
	now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local pm, pd, cost = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local banAfter, banFor = tonumber(ARGV[5]), tonumber(ARGV[6])
local durable, seed = ARGV[7] == '1', tonumber(ARGV[8])
local floor, floorDay = tonumber(ARGV[9]), tonumber(ARGV[10])
local owner, giveBack, spentBy = ARGV[11], tonumber(ARGV[12]), tonumber(ARGV[13])
local want, keep, share = tonumber(ARGV[14]), tonumber(ARGV[15]), tonumber(ARGV[16])

local msPerDay, token = 86400000, 60000
local today = math.floor(now / msPerDay)
local f, out, outUntil = {}, {}, {}
local s = redis.call('HGETALL', key)
for i = 1, #s, 2 do
	local name, v = s[i], tonumber(s[i + 1])
	local kind = string.sub(name, 1, 2)
	if kind == 'l:' then
		out[string.sub(name, 3)] = v
	elseif kind == 'x:' then
		outUntil[string.sub(name, 3)] = v
	else
		f[name] = v
	end
end
local t, r, n = f.t or 0, f.r or 0, f.n or 0
local wu, wc, bu = f.wu or 0, f.wc or 0, f.bu or 0
local changed = false
if f.d ~= today then
	if durable then
		if seed < 0 then
			return {3, now, 0, 0, today, 0, 0}
		end
		n = seed -- set only while the count is missing: the first seed wins
	else
		n = 0
	end
	changed = true
elseif floor > n and floorDay == today then
	n = floor
	changed = true
end

-- The debt, at least the tokens leased out: the bucket does not refill
-- them while they are out. Leases that expired are held as spent now, and
-- their records go. The lease this run settles was out whole until its
-- spent tokens were spent (by spentBy), and its unspent ones until now,
-- when they go back.
local debt = 0
if t >= now then
	debt = (t - now) * pm + r
end
local leasedOut, gone = 0, {}
for who, c in pairs(out) do
	leasedOut = leasedOut + c
	if who == owner or (outUntil[who] or 0) <= now then
		gone[#gone + 1] = 'l:' .. who
		gone[#gone + 1] = 'x:' .. who
	end
end
local mine = out[owner]
if mine and (outUntil[owner] or 0) > now then
	local back = math.min(giveBack, mine)
	local others = leasedOut - mine
	debt = math.max(debt, (others + back) * token, (leasedOut * token) - math.max(0, now - spentBy) * pm)
	debt = math.max(0, debt - back * token)
	n = math.max(0, n - back)
else
	debt = math.max(debt, leasedOut * token)
end
local lease, leaseUntil = 0, math.min(now + keep, (today + 1) * msPerDay)

-- Numbers reach Redis as text of 14 significant digits: milliseconds since
-- 1970 have 13 until the year 2286.
local function save()
	t, r = now + math.floor(debt / pm), debt % pm
	local ttl = math.max(t - now + 1, wu - now, bu - now, 1)
	for who, u in pairs(outUntil) do
		if u > now and who ~= owner then
			ttl = math.max(ttl, u - now)
		end
	end
	if durable then
		ttl = math.max(ttl, msPerDay - now % msPerDay)
	end
	redis.call('HSET', key, 't', t, 'r', r, 'd', today, 'n', n, 'wu', wu, 'wc', wc, 'bu', bu)
	if #gone > 0 then
		redis.call('HDEL', key, unpack(gone))
	end
	if lease > 0 then
		redis.call('HSET', key, 'l:' .. owner, lease, 'x:' .. owner, leaseUntil)
		ttl = math.max(ttl, leaseUntil - now)
	end
	redis.call('PEXPIRE', key, ttl)
end

if now < bu then
	if changed or #gone > 0 then
		save()
	end
	return {2, now, debt, n, today, bu, 0}
end
if cost == 0 then
	if (changed and durable) or #gone > 0 then
		save()
	end
	return {0, now, debt, n, today, 0, 0}
end
if debt <= (pm - 1) * token and n < pd then
	local take = 1
	if owner ~= '' and want > 1 then
		local left = math.min(math.floor((pm * token - debt) / token), pd - n)
		take = math.max(1, math.min(want, math.floor(left / share)))
	end
	debt, n, wu, wc, lease = debt + take * token, n + take, 0, 0, take - 1
	save()
	return {0, now, debt, n, today, 0, lease}
end

-- Refused: nothing is spent. Tell the caller how long to wait, in whole
-- seconds, and ban one that keeps sending during the wait.
local wait
if n >= pd then
	wait = msPerDay - now % msPerDay
else
	wait = (debt - (pm - 1) * token) / pm
end
wait = math.max(1, math.ceil(wait / 1000))
if now < wu then
	wc = wc + 1
	if wc > banAfter then
		bu, wu, wc = now + banFor, 0, 0
		save()
		return {4, now, debt, n, today, bu, 0}
	end
else
	wu, wc = now + wait * 1000, 0
end
save()
return {1, now, debt, n, today, wait, 0}
`

// The script's status, its answer's first number.
const (
	scriptAllowed  = 0
	scriptLimited  = 1
	scriptBanned   = 2
	scriptNeedSeed = 3
	scriptBanStart = 4
)

// scriptAnswer is what limitScript returns, in its order.
type scriptAnswer struct {
	status, nowMs, debt, count, day, extra, leased int64
}

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
// exactly what one server would. The API keys' requests it grants are also
// counted here and written to the database in batches (flush), from where
// a day count that Redis lost is rebuilt before anything more is granted.
// While Redis does not answer, the in-process fallback limits alone.
type redisLimiter struct {
	redisConfig
	client   *redis.Client
	fallback *localLimiter

	down      atomic.Bool
	downSince atomic.Int64 // UnixNano
	probeAt   atomic.Int64 // while down: when (UnixNano) a request may try Redis again
	outages   atomic.Int64

	// storing is held while a flush writes, and while a seed reads the
	// database and the counts not yet written, so that a seed sees each
	// request once: written or still here.
	storing  chan struct{} // a lock whose wait a seed bounds
	mu       sync.Mutex
	unstored map[keyDay]int64 // granted through Redis, not yet in the database
	// unsure are the counts Redis may lack after an outage: of the keys this
	// server granted requests to alone, or had not stored when Redis went.
	unsure    map[keyDay]bool
	anyUnsure atomic.Bool

	figuresMu sync.RWMutex
	figures   map[limits]*figures
	owner     any // this server's name in Redis's lease records, boxed for the script's arguments

	scripts batcher[scriptRun] // concurrent requests share a round trip

	leases   leases
	stop     chan struct{} // closed by close: leases are no longer returned as they age
	stopOnce sync.Once
	loop     sync.WaitGroup
}

// keyDay names one API key's count of one UTC day.
type keyDay struct{ keyID, day int64 }

// redisOptions are the client options for a --redis URL: short timeouts and
// no retries (a retried script could count a request twice; the fallback
// answers instead), and no maintenance notifications, which Valkey refuses.
func redisOptions(rawURL string) (*redis.Options, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		// url.Error repeats the URL, password and all: keep only why.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("--redis must be a URL like redis://HOST:PORT/N: %v", err)
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = redisTimeout
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = redisTimeout
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = redisTimeout
	}
	if opts.PoolTimeout == 0 {
		opts.PoolTimeout = redisTimeout
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = -1
	}
	opts.DialerRetries = 1
	opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return opts, nil
}

// newRedisLimiter connects to cfg.url. A Redis that does not answer yet is
// no error: the limiter starts on its fallback and moves to Redis once it
// answers.
func newRedisLimiter(ctx context.Context, cfg redisConfig) (*redisLimiter, error) {
	opts, err := redisOptions(cfg.url)
	if err != nil {
		return nil, err
	}
	redis.SetLogger(redisLog{cfg.logger})
	r := &redisLimiter{
		redisConfig: cfg,
		client:      redis.NewClient(opts),
		storing:     make(chan struct{}, 1),
		unstored:    make(map[keyDay]int64),
		unsure:      make(map[keyDay]bool),
		figures:     make(map[limits]*figures),
		// The name of this server's leases in Redis, new at each start.
		leases: leases{owner: rand.Text()[:12], m: make(map[callerID]*lease)},
		stop:   make(chan struct{}),
	}
	r.owner = r.leases.owner
	r.leases.key = r.key
	r.fallback = newLocalLimiter(cfg.now, cfg.banAfter, cfg.banFor, r.knownUsage)
	r.scripts = batcher[scriptRun]{max: maxPipeline, run: r.runScripts}
	if err := r.client.Ping(ctx).Err(); err != nil {
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
	return r.client.Close()
}

// where names the Redis for a log line, without its password.
func (r *redisLimiter) where() string {
	opts := r.client.Options()
	return "redis://" + opts.Addr + "/" + strconv.Itoa(opts.DB)
}

// allow spends a token of this server's lease of the caller when it holds
// a live one. Otherwise the request runs the script, which settles the
// lease and takes a new one in the same run; requests of the caller that
// come meanwhile wait for that run once, then run the script on their own.
func (r *redisLimiter) allow(ctx context.Context, id callerID, lim limits) (decision, error) {
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
			r.granted(id, a.day)
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
func (r *redisLimiter) peek(ctx context.Context, id callerID, lim limits) (standing, error) {
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
func (r *redisLimiter) answer(ctx context.Context, id callerID, lim limits, cost int, a scriptAnswer, err error) (standing, error) {
	switch {
	case errors.Is(err, errNoRedis):
		return r.decideAlone(ctx, id, lim, cost)
	case err != nil:
		return standing{}, err
	}
	if a.status == scriptAllowed && cost > 0 {
		r.granted(id, a.day)
	}
	// The tokens leased to this server are the caller's to spend.
	a.debt -= a.leased * tokenDebt
	a.count -= a.leased
	return r.standing(a, sharedLimits(lim), cost == 0), nil
}

// sharedLimits are lim as the script counts them: a bucket too large for
// its arithmetic never empties anyway.
func sharedLimits(lim limits) limits {
	lim.PerMinute = min(lim.PerMinute, maxScriptPerMinute)
	return lim
}

// granted counts a request of id granted on day, to be written to the
// database (API keys only).
func (r *redisLimiter) granted(id callerID, day int64) {
	if id.keyID == 0 {
		return
	}
	r.mu.Lock()
	r.unstored[keyDay{id.keyID, day}]++
	r.mu.Unlock()
}

// ask runs the script on key, id's state, for one request (cost 1) or a
// look (cost 0) with lim, which are shared limits, and lease. A caller whose day count Redis lacks is
// seeded from the database, in a second run. It returns errNoRedis when
// Redis does not answer, or has not answered lately.
func (r *redisLimiter) ask(ctx context.Context, id callerID, key any, lim limits, cost int, lease leaseAsk) (scriptAnswer, error) {
	if r.skipRedis() {
		return scriptAnswer{}, errNoRedis
	}
	// A count Redis may lack is raised to what this server knows, which
	// never exceeds the truth: the database holds each request once, and
	// this server's unwritten requests are not in it yet.
	floor, floorDay := int64(-1), int64(0)
	var unsure keyDay
	if id.keyID != 0 && r.anyUnsure.Load() {
		if unsure = r.takeUnsure(id.keyID); unsure.keyID != 0 {
			n, err := r.known(ctx, id.keyID, unsure.day)
			if err != nil {
				r.markUnsure(unsure)
				return scriptAnswer{}, err
			}
			floor, floorDay = n, unsure.day
		}
	}
	a, err := r.run(r.scriptRun(key, id, lim, cost, -1, floor, floorDay, lease))
	if err == nil && a.status == scriptNeedSeed {
		var seed int64
		if seed, err = r.known(ctx, id.keyID, a.day); err != nil {
			r.markUnsure(unsure)
			return scriptAnswer{}, err
		}
		a, err = r.run(r.scriptRun(key, id, lim, cost, seed, -1, 0, lease))
	}
	if err != nil {
		r.markUnsure(unsure)
		if ctx.Err() == nil {
			r.failed(err)
		}
		return scriptAnswer{}, fmt.Errorf("%w: %v", errNoRedis, err)
	}
	r.answered()
	return a, nil
}

// run runs the script once. Runs of concurrent requests share a round
// trip: they go to Redis together in one pipeline, whatever becomes of the
// request that sends them.
func (r *redisLimiter) run(sr scriptRun) (scriptAnswer, error) {
	done, err := r.scripts.do(context.Background(), sr)
	if err != nil {
		return scriptAnswer{}, err
	}
	return done.answer, done.err
}

// The script's arguments that are the same in every run, boxed once: a
// number beyond 255 or a string made an argument costs an allocation.
var (
	scriptHash      any = limitScript.Hash()
	scriptLeaseKeep any = leaseKeep.Milliseconds()
	scriptNone      any = int64(-1)
	scriptUnknown   any = int64(spentUnknown)
)

// scriptArg is n as an argument of the script.
func scriptArg(n int64) any {
	switch n {
	case -1:
		return scriptNone
	case spentUnknown:
		return scriptUnknown
	}
	return n
}

// scriptRun is a run of limitScript on key, the caller's state, with its
// arguments (see limitScript).
func (r *redisLimiter) scriptRun(key any, id callerID, lim limits, cost int, seed, floor, floorDay int64, ask leaseAsk) scriptRun {
	var nowMs int64
	if r.scriptNow != nil {
		nowMs = r.scriptNow().UnixMilli()
	}
	durable := 0
	if id.keyID != 0 {
		durable = 1
	}
	var owner any = ""
	if ask.owner != "" {
		owner = r.owner
	}
	f := r.figuresOf(lim)
	return scriptRun{cmd: []any{"evalsha", scriptHash, 1, key,
		nowMs, f.perMinute, f.perDay, cost, f.banAfter, f.banFor, durable, scriptArg(seed), scriptArg(floor), floorDay,
		owner, ask.giveBack, scriptArg(ask.spentBy), ask.want, scriptLeaseKeep, leaseShare}}
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
		runs[i] = r.scriptRun(h.l.key, h.id, h.l.lim, 0, -1, -1, 0, h.ask)
	}
	if !r.down.Load() {
		for batch := range slices.Chunk(runs, maxPipeline) {
			_ = r.runScripts(ctx, batch) // a failed give-back expires in Redis
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

// scriptRun is one run of limitScript in a pipeline, with its answer.
type scriptRun struct {
	cmd    []any // EVALSHA, the script's hash, one key, the key, the script's ARGV
	answer scriptAnswer
	err    error
}

// maxPipeline bounds the script runs sent in one round trip.
const maxPipeline = 128

// runScripts sends a batch of script runs in one round trip. A Redis that
// lost the script (restarted, flushed) is sent its text with the runs that
// it refused, in a second one.
func (r *redisLimiter) runScripts(ctx context.Context, batch []scriptRun) error {
	cmds := make([]*redis.Cmd, len(batch))
	r.send(ctx, batch, cmds, func(int) bool { return true }, false)
	r.send(ctx, batch, cmds, func(i int) bool { return cmds[i].Err() != nil && redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") }, true)
	for i, cmd := range cmds {
		v, err := cmd.Int64Slice()
		if err == nil && len(v) != 7 {
			err = fmt.Errorf("rate-limit script returned %d numbers, want 7", len(v))
		}
		if err != nil {
			batch[i].err = err
			continue
		}
		batch[i].answer = scriptAnswer{v[0], v[1], v[2], v[3], v[4], v[5], v[6]}
	}
	return nil
}

// send sends, in one round trip, the runs of batch that pick picks, into
// their places in cmds: by the script's hash, or withText by its text. One
// run goes alone, as a plain command: a pipeline would try a refused
// connection twice, which the probe of a Redis that is away must not.
func (r *redisLimiter) send(ctx context.Context, batch []scriptRun, cmds []*redis.Cmd, pick func(i int) bool, withText bool) {
	var start time.Time
	if r.hooks.call != nil {
		start = time.Now()
	}
	var picked []int
	for i := range batch {
		if pick(i) {
			cmds[i] = redis.NewCmd(ctx, batch[i].command(withText)...)
			picked = append(picked, i)
		}
	}
	switch len(picked) {
	case 0:
		return
	case 1:
		// The error is on the command.
		_ = r.client.Process(ctx, cmds[picked[0]])
	default:
		_, _ = r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range picked {
				_ = p.Process(ctx, cmds[i])
			}
			return nil
		})
	}
	if r.hooks.call != nil {
		r.hooks.call(start)
	}
}

// command is the run's command: EVALSHA, or withText EVAL with the text.
func (sr scriptRun) command(withText bool) []any {
	if !withText {
		return sr.cmd
	}
	cmd := slices.Clone(sr.cmd)
	cmd[0], cmd[1] = "eval", limitScriptText
	return cmd
}

// standing turns the script's answer into what the in-process limiter
// would report for the same state, with both windows when asked.
func (r *redisLimiter) standing(a scriptAnswer, lim limits, both bool) standing {
	now := time.UnixMilli(a.nowMs)
	tokens := float64(lim.PerMinute) - float64(a.debt)/60_000
	perSecond := float64(lim.PerMinute) / 60
	var s standing
	s.decision = report(now, lim, r.figuresOf(lim).policy, tokens, perSecond, a.count)
	if both {
		s.minute, s.day = windows(now, lim, tokens, perSecond, a.count)
	}
	s.today = unixDay(now)
	switch a.status {
	case scriptAllowed:
		s.allowed = true
	case scriptLimited:
		s.code, s.retryAfter = codeRateLimited, time.Duration(a.extra)*time.Second
		s.overQuota = a.count >= lim.PerDay
	case scriptBanned, scriptBanStart:
		s.decision = reportBan(s.decision, now, time.UnixMilli(a.extra))
		s.banStarted = a.status == scriptBanStart
	}
	return s
}

// key is the Redis key of id's state. Every key of one caller would share
// its hash tag, the part in braces, so the script also runs on a Redis
// Cluster.
func (r *redisLimiter) key(id callerID) string {
	var buf [96]byte
	b := append(buf[:0], '{')
	b = append(b, r.prefix...)
	if id.keyID != 0 {
		b = append(b, ":k:"...)
		b = strconv.AppendInt(b, id.keyID, 10)
	} else {
		b = append(b, ":a:"...)
		b = id.addr.AppendTo(b)
	}
	b = append(b, "}:limit"...)
	return string(b)
}

// figures are what a caller's figures make: the RateLimit-Policy header,
// and the script's arguments, boxed once.
type figures struct {
	policy                              string
	perMinute, perDay, banAfter, banFor any
}

// figuresOf returns lim's figures, made once per figures.
func (r *redisLimiter) figuresOf(lim limits) *figures {
	r.figuresMu.RLock()
	f, ok := r.figures[lim]
	r.figuresMu.RUnlock()
	if ok {
		return f
	}
	f = &figures{policyHeader(lim), lim.PerMinute, lim.PerDay, r.banAfter, r.banFor.Milliseconds()}
	r.figuresMu.Lock()
	r.figures[lim] = f
	r.figuresMu.Unlock()
	return f
}

// known is keyID's count for day as this server knows it: what the
// database holds and what this server granted and has not written yet. It
// seeds a count Redis has lost; other servers' unwritten requests (their
// last flush interval's, at most) are not in it.
func (r *redisLimiter) known(ctx context.Context, keyID, day int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.dbTimeout)
	defer cancel()
	select {
	case r.storing <- struct{}{}:
	case <-ctx.Done():
		return 0, errDatabase(dbTimeout, fmt.Errorf("wait for the stored usage: %w", ctx.Err()))
	}
	defer func() { <-r.storing }()
	n, err := r.usage(ctx, keyID, dayString(day))
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	n += r.unstored[keyDay{keyID, day}]
	r.mu.Unlock()
	return n + r.fallback.pending(keyID, day), nil
}

// knownUsage is known for the fallback, which names days as text.
func (r *redisLimiter) knownUsage(ctx context.Context, keyID int64, day string) (int64, error) {
	t, err := time.Parse(time.DateOnly, day)
	if err != nil {
		return 0, err
	}
	return r.known(ctx, keyID, unixDay(t))
}

// decideAlone answers from the in-process fallback while Redis does not.
// Redis does not count what it grants: the key's count there is unsure
// until raised.
func (r *redisLimiter) decideAlone(ctx context.Context, id callerID, lim limits, cost int) (standing, error) {
	if cost == 0 {
		return r.fallback.peek(ctx, id, lim)
	}
	d, err := r.fallback.allow(ctx, id, lim)
	if err == nil && d.allowed && id.keyID != 0 {
		r.markUnsure(keyDay{id.keyID, unixDay(r.now())})
	}
	return standing{decision: d}, err
}

// takeUnsure takes keyID's count today off the unsure ones, if it is one,
// for one script run to raise; markUnsure puts it (back) on.
func (r *redisLimiter) takeUnsure(keyID int64) keyDay {
	k := keyDay{keyID, unixDay(r.now())}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.unsure[k] {
		return keyDay{}
	}
	delete(r.unsure, k)
	return k
}

func (r *redisLimiter) markUnsure(k keyDay) {
	if k.keyID == 0 {
		return
	}
	r.mu.Lock()
	r.unsure[k] = true
	r.anyUnsure.Store(true)
	r.mu.Unlock()
}

// skipRedis reports whether a request goes straight to the fallback: Redis
// is down and another request tried it less than redisProbeEvery ago.
func (r *redisLimiter) skipRedis() bool {
	if !r.down.Load() {
		return false
	}
	now := r.now().UnixNano()
	at := r.probeAt.Load()
	return now < at || !r.probeAt.CompareAndSwap(at, now+int64(redisProbeEvery))
}

// failed notes that Redis did not answer; the first failure of an outage
// is logged, counted and told to the fallback hook.
func (r *redisLimiter) failed(err error) {
	now := r.now()
	r.probeAt.Store(now.Add(redisProbeEvery).UnixNano())
	if !r.down.CompareAndSwap(false, true) {
		return
	}
	r.downSince.Store(now.UnixNano())
	r.outages.Add(1)
	// A Redis that went away may come back without what this server
	// counted there and has not written yet.
	r.mu.Lock()
	for k := range r.unstored {
		r.unsure[k] = true
	}
	r.anyUnsure.Store(len(r.unsure) > 0)
	r.mu.Unlock()
	r.logger.Warn("Redis does not answer: this server limits requests on its own until it does", "err", err)
	if r.hooks.fallback != nil {
		r.hooks.fallback(true)
	}
}

// answered notes that Redis answered, ending an outage.
func (r *redisLimiter) answered() {
	if !r.down.Load() || !r.down.CompareAndSwap(true, false) {
		return
	}
	outage := r.now().Sub(time.Unix(0, r.downSince.Load()))
	r.logger.Info("Redis answers again: rate limits are shared again", "outage", outage.Round(time.Millisecond))
	if r.hooks.fallback != nil {
		r.hooks.fallback(false)
	}
}

// flush writes the requests granted through Redis, then the fallback's.
// What fails to be written stays for the next flush.
func (r *redisLimiter) flush(ctx context.Context, add func(context.Context, []usageCount) error) error {
	r.storing <- struct{}{}
	defer func() { <-r.storing }()
	r.mu.Lock()
	taken := r.unstored
	if len(taken) > 0 {
		r.unstored = make(map[keyDay]int64, len(taken))
	}
	r.mu.Unlock()
	var err error
	if len(taken) > 0 {
		counts := make([]usageCount, 0, len(taken))
		for k, n := range taken {
			counts = append(counts, usageCount{KeyID: k.keyID, Day: dayString(k.day), Count: n})
		}
		if err = add(ctx, counts); err != nil {
			r.mu.Lock()
			for k, n := range taken {
				r.unstored[k] += n
			}
			r.mu.Unlock()
		}
	}
	return errors.Join(err, r.fallback.flush(ctx, add))
}

// sweep forgets the fallback's idle callers, and unsure counts of days
// that are over.
func (r *redisLimiter) sweep() int {
	today := unixDay(r.now())
	r.mu.Lock()
	for k := range r.unsure {
		if k.day != today {
			delete(r.unsure, k)
		}
	}
	r.anyUnsure.Store(len(r.unsure) > 0)
	r.mu.Unlock()
	return r.fallback.sweep()
}

// redisLog passes go-redis's own log lines (a failed dial, say) on at
// debug level: the limiter logs each outage once itself.
type redisLog struct{ logger *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	l.logger.DebugContext(ctx, fmt.Sprintf(format, v...), "from", "go-redis")
}
