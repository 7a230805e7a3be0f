package limits

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/testkit"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

// The limit rules are written twice: limitRules in Go, limit.lua in Redis.
// FuzzLimitScriptAgreesWithTheModel runs the same sequences of runs through
// both, the Go side with its minute bucket in golang.org/x/time/rate as the
// in-process limiter keeps it, and demands the same answer and the same
// state after every run. Its seed corpus (testdata/fuzz) runs in plain
// go test; TestLimitComparisonCatchesAChangedComparison proves that it
// catches one comparison changed on either side.
//
// The tolerance, and nothing else may differ:
//   - Tokens are compared at the script's grain, 1/60000 of a token (the
//     script counts the bucket in 1/pm ms); x/time/rate's float tokens are
//     read at that grain (atGrain), its error being far below it.
//   - Retry-After and Reset are whole seconds computed by dividing by the
//     refill rate pm/60, inexact in floats: where the exact value is a whole
//     second, the Go side may say one second more. When a Retry-After
//     differs so, the wait the run started ends on the Go side when the
//     script's does, and the sequence goes on.
//   - The Redis key's time to live is compared to the model's forgetAt
//     within a millisecond (the model's float division again).
//   - A key the model keeps for at most expiryInTransit may be gone when
//     the run's transaction reads it: Redis expired it in the meantime.
//     Both sides then forget the caller.

// A sequence is a header (the figures) and steps of stepSize bytes each.
const (
	headerSize = 6
	stepSize   = 4
	maxSteps   = 96
)

// expiryInTransit is how long a key may live and yet be gone when the
// run's transaction reads its time to live. Redis 7.0 does not freeze its
// clock inside MULTI/EXEC, so a key the script gives a millisecond or two
// can expire between the EVAL and the PTTL after it: microseconds apart on
// an idle machine, a few milliseconds when Redis waits for a core behind
// the fuzzing workers. A key the model keeps longer than this that is gone
// is a disagreement.
const expiryInTransit = 5 * time.Millisecond

// The values a sequence picks from: boundaries, mostly.
var (
	fuzzPerMinute = []int64{1, 3, 7, 60, 90, 300, 1000, domain.MaxLimit}
	fuzzPerDay    = []int64{1, 2, 5, 20, 100, 1000, domain.MaxLimit, 50}
	fuzzBanAfter  = []int64{0, 1, 2, 3, 10}
	fuzzBanFor    = []time.Duration{time.Second, 5 * time.Second, 90 * time.Second, 15 * time.Minute}
	// How long before a UTC midnight a sequence starts.
	fuzzStart   = []time.Duration{0, time.Millisecond, time.Second, 59 * time.Second, 10 * time.Minute, 12 * time.Hour}
	fuzzAdvance = []time.Duration{0, time.Millisecond, 16 * time.Millisecond, 17 * time.Millisecond,
		200 * time.Millisecond, 857 * time.Millisecond, 999 * time.Millisecond, time.Second,
		1001 * time.Millisecond, 8571 * time.Millisecond, 8572 * time.Millisecond, 20 * time.Second,
		59999 * time.Millisecond, time.Minute, 15 * time.Minute, 6 * time.Hour}
	fuzzOwner    = []string{"", "a", "b", "a"}
	fuzzWant     = []int64{0, 1, 2, 3, 8, 40, 1000, 16}
	fuzzGiveBack = []int64{0, 1, 2, 5, 50, 0, 1, 3}
	// spentBy, in ms from now; the first is spentUnknown.
	fuzzSpentBy = []int64{spentUnknown, 0, -1, -100, -1000, -60000, 1, -1500}
	fuzzCount   = []int64{0, 1, 4, 19, 99, 999, 1000, 2}
)

// limitStep is one run of a sequence: the time since the last, and what is
// asked.
type limitStep struct {
	advance time.Duration
	cost    int64
	lease   leaseAsk // spentBy in ms from now, unless spentUnknown
	seed    int64    // the stored count, when the run asks for one
	floor   int64    // -1: none
	// floorYesterday: the floor is of the day before (and does nothing).
	floorYesterday bool
	ban            banStep
}

// banStep is what a step says of bans from the database: a floor under
// the caller's ban, or a lift, each at a moment that tests a boundary.
type banStep uint8

const (
	banNone     banStep = iota
	floorSoon           // a ban Redis lost, ending in a second
	floorLong           // ... in 15 minutes
	floorAtLift         // ending as the last ban lifted did: not raised again
	floorAtBan          // ending as the ban in force does
	liftTheBan          // the lift of the ban in force (or, without one, of one ending in a millisecond)
	liftEarlier         // the lift of a ban that ended a millisecond before the one in force
	liftSoon            // the lift of a ban ending in a second
	floorPast           // a ban that ends now
)

func decodeLimitSteps(data []byte) []limitStep {
	var steps []limitStep
	for len(data) >= stepSize && len(steps) < maxSteps {
		b := data[:stepSize]
		data = data[stepSize:]
		st := limitStep{advance: fuzzAdvance[b[0]&15], cost: int64(b[0]>>4) & 1, seed: fuzzCount[b[2]>>3&7], floor: -1}
		if owner := fuzzOwner[b[0]>>5&3]; owner != "" {
			st.lease = leaseAsk{owner: owner, want: fuzzWant[b[1]&7], giveBack: fuzzGiveBack[b[1]>>3&7], spentBy: fuzzSpentBy[b[2]&7]}
		}
		if b[3]&1 == 1 {
			st.floor, st.floorYesterday = fuzzCount[b[3]>>1&7], b[3]&16 != 0
		}
		if b[3]>>5 == 7 { // one step in eight speaks of bans
			st.ban = banNone + 1 + banStep(b[2]>>6<<1|b[1]>>6&1)
		}
		steps = append(steps, st)
	}
	return steps
}

// limitPair is a caller on both sides: the model's state with its
// x/time/rate bucket, and the script's key in Redis. Time is whole ms.
type limitPair struct {
	ctx       context.Context
	client    *redis.Client
	script    string // limit.lua's text, or a changed copy
	rules     func(limitState, limitFigures, limitRun) (limitState, limitAnswer)
	key       string
	fig       limitFigures
	args      *figures
	perSecond float64
	now       time.Time

	state    limitState
	bucket   *rate.Limiter
	forgetAt time.Time // when the model's state is as good as new: the key expires
}

// compareLimitRules runs the sequence data on both sides. It returns the
// first difference, nil when there is none.
func compareLimitRules(ctx context.Context, client *redis.Client, script, key string,
	rules func(limitState, limitFigures, limitRun) (limitState, limitAnswer), data []byte) error {
	if len(data) < headerSize {
		return nil
	}
	h := data[:headerSize]
	lim := domain.Limits{PerMinute: fuzzPerMinute[h[0]&7], PerDay: fuzzPerDay[h[1]&7]}
	p := &limitPair{ctx: ctx, client: client, script: script, rules: rules, key: key,
		fig:       limitFigures{Limits: lim, banAfter: fuzzBanAfter[h[2]%5], banFor: fuzzBanFor[h[3]&3], durable: h[4]&1 == 1},
		perSecond: float64(lim.PerMinute) / 60,
		now:       time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC).Add(-fuzzStart[h[5]%6]),
	}
	p.args = newFigures(lim, int(p.fig.banAfter), p.fig.banFor)
	p.forget()
	defer client.Del(ctx, key)
	for i, st := range decodeLimitSteps(data[headerSize:]) {
		if err := p.step(st); err != nil {
			return fmt.Errorf("figures %+v, step %d %+v at %s: %w", p.fig, i+1, st, p.now.Format("15:04:05.000"), err)
		}
	}
	return nil
}

// forget makes the caller fresh on both sides, as the key's expiry does.
func (p *limitPair) forget() {
	p.client.Del(p.ctx, p.key)
	p.state, p.forgetAt = limitState{}, time.Time{}
	p.bucket = rate.NewLimiter(rate.Limit(p.perSecond), int(p.fig.PerMinute))
}

func (p *limitPair) step(st limitStep) error {
	p.now = p.now.Add(st.advance)
	if !p.forgetAt.IsZero() && !p.now.Before(p.forgetAt) {
		p.forget()
	}
	run := limitRun{now: p.now, cost: st.cost, tokens: float64(atGrain(p.bucket.TokensAt(p.now))) / tokenDebt,
		seed: -1, floor: st.floor, floorDay: UnixDay(p.now), lease: st.lease}
	if st.floorYesterday {
		run.floorDay--
	}
	if run.lease.owner != "" && run.lease.spentBy != spentUnknown {
		run.lease.spentBy += p.now.UnixMilli()
	}
	p.banStep(st.ban, &run)
	if !run.lift.IsZero() {
		return p.lift(run)
	}
	state, want := p.rules(p.state, p.fig, run)
	got, ttl, err := p.eval(run)
	if err != nil {
		return err
	}
	if want.status == NeedSeed || got.Status == NeedSeed {
		if want.status != got.Status || ttl.set() {
			return fmt.Errorf("status: model %d, script %d (time to live %+v)", want.status, got.Status, ttl)
		}
		// As the Redis limiter does: a second run with the seed.
		run.seed, run.floor, run.floorDay = st.seed, -1, 0
		state, want = p.rules(p.state, p.fig, run)
		if got, ttl, err = p.eval(run); err != nil {
			return err
		}
	}
	if tolerated, err := p.sameAnswer(want, got); err != nil {
		return err
	} else if tolerated && state.waitUntil.Equal(p.now.Add(want.retryAfter)) {
		// The wait this run started ends when the script's does.
		state.waitUntil = p.now.Add(time.Duration(got.extra) * time.Second)
	}
	if !want.write {
		if ttl.set() {
			return fmt.Errorf("the model wrote false, the script set a time to live of %+v", ttl)
		}
		return p.sameState()
	}
	p.bucket = bucketAt(p.perSecond, p.fig.PerMinute, p.now, want.tokens)
	if err := p.keep(state, want, ttl); err != nil {
		return err
	}
	return p.sameState()
}

// keep takes the state a run wrote as the model's, when the script's key
// lives as long as the model says it does. A key that expired in transit
// (expiryInTransit) is forgotten on both sides instead.
func (p *limitPair) keep(state limitState, want limitAnswer, ttl scriptTTL) error {
	forgetAt := state.forgetAt(p.fig, want, p.perSecond)
	ms := forgetAt.Sub(p.now).Milliseconds()
	switch {
	case ttl.gone() && ms <= expiryInTransit.Milliseconds():
		p.forget()
	case ms < ttl.least-1 || ms > ttl.most+1: // also when the script set none: ms is at least 1
		return fmt.Errorf("time to live: model %d ms, script %+v", ms, ttl)
	default:
		p.state, p.forgetAt = state, forgetAt
	}
	return nil
}

// banStep sets run's floor or lift as st asks, from the caller's state.
func (p *limitPair) banStep(st banStep, run *limitRun) {
	orNow := func(t time.Time) time.Time {
		if t.IsZero() {
			return p.now.Add(time.Millisecond)
		}
		return t
	}
	switch st {
	case floorSoon:
		run.banFloor = p.now.Add(time.Second)
	case floorLong:
		run.banFloor = p.now.Add(15 * time.Minute)
	case floorAtLift:
		run.banFloor = p.state.liftedUntil
	case floorAtBan:
		run.banFloor = p.state.bannedUntil
	case liftTheBan:
		run.lift = orNow(p.state.bannedUntil)
	case liftEarlier:
		run.lift = orNow(p.state.bannedUntil).Add(-time.Millisecond)
	case liftSoon:
		run.lift = p.now.Add(time.Second)
	case floorPast:
		run.banFloor = p.now
	}
}

// lift runs a lift on both sides. It changes the ban, the wait and the
// last lift's end, nothing else: the answer says nothing, and the bucket
// stays as it was.
func (p *limitPair) lift(run limitRun) error {
	state, want := p.rules(p.state, p.fig, run)
	got, ttl, err := p.eval(run)
	if err != nil {
		return err
	}
	if want.status != got.Status || !want.write {
		return fmt.Errorf("lift: model %+v, script %+v (time to live %+v)", want, got, ttl)
	}
	if err := p.keep(state, want, ttl); err != nil {
		return fmt.Errorf("after a lift: %w", err)
	}
	return p.sameState()
}

// scriptTTL is the time to live (ms) a run gave the key: Redis counts it
// down on its own clock, so it is read as bounds, most from Redis's time
// before the run, least after it. -1 when the run set none (it wrote
// nothing), -2 when there is no key.
type scriptTTL struct{ least, most int64 }

func (t scriptTTL) set() bool { return t.least >= 0 }

// gone: the key was not there when the transaction read it.
func (t scriptTTL) gone() bool { return t.least == -2 }

// eval runs the script with run's arguments, in one transaction with the
// key's time to live, which it then removes: the key lives in Redis's
// clock, the runs in the sequence's, whose expiry forget plays.
func (p *limitPair) eval(run limitRun) (scriptAnswer, scriptTTL, error) {
	cmd := scriptArgs{key: p.key, nowMs: run.now.UnixMilli(), fig: p.args, Cost: run.cost, durable: p.fig.durable,
		Seed: run.seed, floor: run.floor, floorDay: run.floorDay, owner: run.lease.owner, lease: run.lease,
		banFloor: unixMilli(run.banFloor), lift: unixMilli(run.lift)}.Encode()
	cmd[0], cmd[1] = "eval", p.script
	var before *redis.TimeCmd
	var answer, expires, ttl *redis.Cmd
	var persisted *redis.BoolCmd
	_, err := p.client.TxPipelined(p.ctx, func(pipe redis.Pipeliner) error {
		before = pipe.Time(p.ctx)
		answer = pipe.Do(p.ctx, cmd...)
		expires = pipe.Do(p.ctx, "pexpiretime", p.key)
		ttl = pipe.Do(p.ctx, "pttl", p.key)
		persisted = pipe.Persist(p.ctx, p.key)
		return nil
	})
	if err != nil {
		return scriptAnswer{}, scriptTTL{}, fmt.Errorf("the script: %w", err)
	}
	v, err := answer.Int64Slice()
	if err != nil {
		return scriptAnswer{}, scriptTTL{}, err
	}
	a, err := decodeScriptAnswer(v)
	if err != nil {
		return scriptAnswer{}, scriptTTL{}, err
	}
	least, err1 := ttl.Int64()
	at, err2 := expires.Int64()
	t := scriptTTL{least, least}
	if least >= 0 {
		t.most = at - before.Val().UnixMilli()
	}
	if least >= 0 && !persisted.Val() {
		// It expired after the PTTL, before the PERSIST: as gone.
		t = scriptTTL{-2, -2}
	}
	return a, t, errors.Join(err1, err2, persisted.Err())
}

// sameAnswer compares the model's answer with the script's, and what each
// tells the caller. tolerated: the model's Retry-After is a second longer.
func (p *limitPair) sameAnswer(want limitAnswer, script scriptAnswer) (tolerated bool, err error) {
	got := script.limitAnswer(p.fig.Limits)
	if want.retryAfter == got.retryAfter+time.Second && want.status == got.status {
		want.retryAfter, tolerated = got.retryAfter, true
	}
	if want.status != got.status || !want.now.Equal(got.now) || want.day != got.day || want.dayCount != got.dayCount ||
		want.leased != got.leased || want.retryAfter != got.retryAfter || !want.bannedUntil.Equal(got.bannedUntil) ||
		atGrain(want.tokens) != atGrain(got.tokens) {
		return false, fmt.Errorf("answer: model %+v (tokens %.6f), script %+v", want, want.tokens, script)
	}
	policy := p.args.policy
	w := want.standing(p.fig.Limits, policy, p.perSecond, true)
	g := got.standing(p.fig.Limits, policy, p.perSecond, true)
	near := func(a, b time.Duration) bool { return a-b <= time.Second && b-a <= time.Second }
	for _, pair := range [][2]Window{
		{{w.Limit, w.Remaining, w.Reset, w.ResetIn}, {g.Limit, g.Remaining, g.Reset, g.ResetIn}},
		{w.Minute, g.Minute}, {w.Day, g.Day},
	} {
		a, b := pair[0], pair[1]
		if a.Limit != b.Limit || a.Remaining != b.Remaining || !near(a.Reset.Sub(b.Reset), 0) || !near(a.resetIn, b.resetIn) {
			return false, fmt.Errorf("what the caller is told: model %+v, script %+v", w, g)
		}
	}
	if w.Allowed != g.Allowed || w.Code != g.Code || w.BanStarted != g.BanStarted || w.Window != g.Window ||
		w.Policy != g.Policy || w.RetryAfter != g.RetryAfter {
		return false, fmt.Errorf("what the caller is told: model %+v, script %+v", w, g)
	}
	return tolerated, nil
}

// sameState compares the model's state and bucket with the script's key.
func (p *limitPair) sameState() error {
	h, err := p.client.HGetAll(p.ctx, p.key).Result()
	if err != nil {
		return err
	}
	fresh := p.forgetAt.IsZero()
	if len(h) == 0 || fresh {
		if len(h) == 0 && fresh {
			return nil
		}
		return fmt.Errorf("state: model %+v (fresh %v), script %v", p.state, fresh, h)
	}
	f := map[string]int64{}
	var leases []leaseOut
	for name, v := range h {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("state field %s = %q", name, v)
		}
		switch {
		case strings.HasPrefix(name, "l:"):
			leases = append(leases, leaseOut{owner: name[2:], tokens: n})
		default:
			f[name] = n
		}
	}
	for i := range leases {
		leases[i].until = f["x:"+leases[i].owner]
	}
	sortLeases := func(ls []leaseOut) []leaseOut {
		ls = slices.Clone(ls)
		slices.SortFunc(ls, func(a, b leaseOut) int { return strings.Compare(a.owner, b.owner) })
		return ls
	}
	pm, nowMs := p.fig.PerMinute, p.now.UnixMilli()
	debt := int64(0)
	if f["t"] >= nowMs {
		debt = (f["t"]-nowMs)*pm + f["r"]
	}
	s := p.state
	if f["d"] != s.day || f["n"] != s.dayCount || f["wu"] != unixMilli(s.waitUntil) || f["wc"] != s.waitCount ||
		f["bu"] != unixMilli(s.bannedUntil) || f["lu"] != unixMilli(s.liftedUntil) || !slices.Equal(sortLeases(leases), sortLeases(s.leases)) ||
		pm*tokenDebt-debt != atGrain(p.bucket.TokensAt(p.now)) {
		return fmt.Errorf("state: model %+v with %.6f tokens, script %v", s, p.bucket.TokensAt(p.now), h)
	}
	return nil
}

// forgetAt is when s, written by a run that answered a, is as good as
// new, as limit.lua has it: the bucket full, the wait, the ban, a lift and the
// leases over, and for an API key also the day over. The script's key
// expires then, and the comparison forgets the caller on both sides.
func (s limitState) forgetAt(f limitFigures, a limitAnswer, perSecond float64) time.Time {
	nowMs := a.now.UnixMilli()
	refill := (float64(f.PerMinute) - a.tokens) / perSecond
	ms := max(int64(math.Floor(refill*1000))+1, s.waitUntil.UnixMilli()-nowMs, s.bannedUntil.UnixMilli()-nowMs,
		s.liftedUntil.UnixMilli()-nowMs, 1)
	for _, l := range s.leases {
		if l.until > nowMs {
			ms = max(ms, l.until-nowMs)
		}
	}
	if f.durable {
		ms = max(ms, 86_400_000-nowMs%86_400_000)
	}
	return time.UnixMilli(nowMs + ms)
}

// atGrain is tokens in the script's grain, 1/60000 of a token, rounded:
// what x/time/rate's float holds, within its error.
func atGrain(tokens float64) int64 { return int64(math.Round(tokens * tokenDebt)) }

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// bucketAt is an x/time/rate bucket of perSecond up to burst that holds
// tokens at now: emptied to their whole part a moment before now, and
// refilled since by their fraction.
func bucketAt(perSecond float64, burst int64, now time.Time, tokens float64) *rate.Limiter {
	tokens = max(0, min(tokens, float64(burst)))
	whole := math.Floor(tokens)
	b := rate.NewLimiter(rate.Limit(perSecond), int(burst))
	start := now.Add(-time.Duration((tokens - whole) / perSecond * float64(time.Second)))
	b.ReserveN(start, int(burst-int64(whole)))
	return b
}

// limitComparison is what the tests compare the rules on: the tests'
// Redis, and a key of their own for each sequence.
type limitComparison struct {
	client *redis.Client
	prefix string
	n      atomic.Int64
}

func newLimitComparison(t testing.TB) *limitComparison {
	t.Helper()
	opts, err := redis.ParseURL(testkit.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	c := &limitComparison{client: redis.NewClient(opts), prefix: testkit.RedisPrefix(t)}
	t.Cleanup(func() { c.client.Close() })
	return c
}

func (c *limitComparison) run(script string, rules func(limitState, limitFigures, limitRun) (limitState, limitAnswer), data []byte) error {
	key := "{" + c.prefix + ":fuzz:" + strconv.FormatInt(c.n.Add(1), 10) + "}:limit"
	return compareLimitRules(context.Background(), c.client, script, key, rules, data)
}

// modelRules is limitRules on copies: the comparison keeps the state before
// a run until it knows that the script wrote it, and a sequence's figures
// for every run.
func modelRules(s limitState, f limitFigures, run limitRun) (limitState, limitAnswer) {
	a := limitRules(&s, &f, &run)
	return s, a
}

func FuzzLimitScriptAgreesWithTheModel(f *testing.F) {
	c := newLimitComparison(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := c.run(limitScriptText, modelRules, data); err != nil {
			t.Fatal(err)
		}
	})
}
