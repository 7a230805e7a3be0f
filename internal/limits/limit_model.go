package limits

import (
	"math"
	"time"

	"petstore/internal/domain"
)

// The codes of a refusal, as the Error shape names them (internal/httpapi/errors.go's
// table takes them from here): the limiter's answer carries one.
const (
	CodeRateLimited       = "rate_limited"
	CodeTemporarilyBanned = "temporarily_banned"
)

// limit.lua is limitRules in Lua, proven equal to it by
// FuzzLimitScriptAgreesWithTheModel. The minute bucket is not in here: the
// in-process limiter keeps it in golang.org/x/time/rate and the script as a
// theoretical arrival time, and either hands its tokens at now in
// (limitRun.tokens).

// The status of a run, named for what it tells the caller: limit.lua
// answers it as its first number.
const (
	Allowed    = 0 // allowed, or a look at a caller that is not banned
	limited    = 1 // refused for a while (retryAfter)
	banned     = 2 // refused during a ban
	NeedSeed   = 3 // the day count is missing: run again with a seed
	banStarted = 4 // refused: this very run started the ban
)

// limitFigures are a caller's allowances and the ban settings.
type limitFigures struct {
	domain.Limits
	banAfter int64         // requests allowed during a wait before a ban
	banFor   time.Duration // how long a ban lasts
	// durable: an API key, whose day count is also stored in the database:
	// a missing count is seeded from there, never started at 0.
	durable bool
}

// limitState is one caller's state apart from its minute bucket. A fresh
// caller is the zero value.
type limitState struct {
	day, dayCount int64     // the UTC day (days since 1970-01-01) and the requests granted on it
	waitUntil     time.Time // after a refusal: when a request will be accepted again
	waitCount     int64     // requests sent during that wait
	bannedUntil   time.Time // the end of a ban
	// liftedUntil is the end of the last ban lifted: a floor no later is
	// not raised again (a run that read it before the lift may come after).
	liftedUntil time.Time
	leases      []leaseOut
}

// leaseOut is a server's lease of a caller's tokens (lease.go):
// counted as spent, and not refilled until settled or held as spent.
type leaseOut struct {
	owner  string
	tokens int64
	until  int64 // ms since 1970: from then on the tokens are held as spent
}

// limitRun is what one run is asked.
type limitRun struct {
	now    time.Time
	cost   int64   // 1 counts a request, 0 only looks
	tokens float64 // in the minute bucket at now, leased tokens not held back
	// seed is a durable caller's stored count of today, -1 when not read
	// yet; floor a count the caller is known to have reached on floorDay
	// (-1: none), which the day count is raised to (after an outage).
	seed, floor, floorDay int64
	lease                 leaseAsk  // this server's lease, settled and taken anew
	banFloor              time.Time // the database's end of the caller's ban, zero for none (floorBan)
	lift                  time.Time // when set, the run is a lift and nothing else (liftBan)
}

// limitAnswer is what a run decides. tokens and dayCount are after the run,
// with the tokens leased out spent; leased of them are the asking server's.
type limitAnswer struct {
	status      int64
	now         time.Time
	tokens      float64
	dayCount    int64
	day         int64
	retryAfter  time.Duration // limited: whole seconds
	bannedUntil time.Time     // banned
	take        int64         // taken from the bucket and the day: the request's and the lease's
	leased      int64         // of take, leased to the asking server
	write       bool          // the state changed: the script stores it
}

// limitRules decides run (a request or a look) for a caller in state s with
// figures f, and makes s the caller's state after it. Its steps are
// limit.lua's, under the same names and in the same order.
func limitRules(s *limitState, f *limitFigures, run *limitRun) limitAnswer {
	a := limitAnswer{now: run.now, day: UnixDay(run.now)}
	if !run.lift.IsZero() {
		liftBan(s, run.lift)
		a.tokens, a.write = run.tokens, true // the bucket, the leases and the day as they were
		return a
	}
	changed, seeded := turnDay(s, f, run, a.day)
	if !seeded {
		a.status = NeedSeed
		return a
	}
	tokens, gone := spendable(s, f, run)
	floored := floorBan(s, run)
	switch {
	case run.now.Before(s.bannedUntil):
		a.status, a.bannedUntil, a.write = banned, s.bannedUntil, changed || gone || floored
	case run.cost == 0:
		a.write = (changed && f.durable) || gone
	case tokens >= 1 && s.dayCount < f.PerDay:
		tokens = grant(s, f, run, tokens, &a)
	default:
		refuse(s, f, run, tokens, &a)
	}
	a.tokens, a.dayCount = tokens, s.dayCount
	if a.write && (gone || a.leased > 0) {
		nowMs := run.now.UnixMilli()
		until := min(nowMs+leaseKeep.Milliseconds(), (a.day+1)*86_400_000)
		s.leases = settleLeases(s.leases, run.lease.owner, nowMs, a.leased, until)
	}
	return a
}

// liftBan ends a ban that ends at lift or sooner (the ban lifted in the
// database), with its wait, so that the next request is not banned again
// at once; and keeps lift as the end of the last ban lifted.
func liftBan(s *limitState, lift time.Time) {
	if !s.bannedUntil.After(lift) {
		s.bannedUntil, s.waitUntil, s.waitCount = time.Time{}, time.Time{}, 0
	}
	if lift.After(s.liftedUntil) {
		s.liftedUntil = lift
	}
}

// turnDay starts the count of a new day: at 0, or for a durable caller at
// run's seed; or raises today's count to run's floor. changed: the day or
// its count moved. seeded is false when a durable caller's count is
// missing and run brings no seed: nothing else is decided then.
func turnDay(s *limitState, f *limitFigures, run *limitRun, today int64) (changed, seeded bool) {
	if s.day != today {
		switch {
		case !f.durable:
			s.dayCount = 0
		case run.seed < 0:
			return false, false
		default:
			s.dayCount = run.seed // set only while the count is missing: the first seed wins
		}
		s.day = today
		return true, true
	}
	if run.floor > s.dayCount && run.floorDay == today {
		s.dayCount = run.floor
		return true, true
	}
	return false, true
}

// spendable is the tokens run may spend: at most those not leased out, as
// the bucket does not refill those while they are out. Leases that expired
// are held as spent now, and go. The lease this run settles was out whole
// until its spent tokens were spent (by spentBy), and its unspent ones
// until now, when they go back. gone: a lease goes.
func spendable(s *limitState, f *limitFigures, run *limitRun) (tokens float64, gone bool) {
	tokens = run.tokens
	if len(s.leases) == 0 {
		return tokens, false
	}
	pm := float64(f.PerMinute)
	nowMs := run.now.UnixMilli()
	var leasedOut, mine int64
	var mineLive bool
	for _, l := range s.leases {
		leasedOut += l.tokens
		if l.owner == run.lease.owner {
			mine, mineLive = l.tokens, l.until > nowMs
		}
		gone = gone || l.owner == run.lease.owner || l.until <= nowMs
	}
	if mineLive {
		back := min(run.lease.giveBack, mine)
		refilled := float64(max(0, nowMs-run.lease.spentBy)) * pm / tokenDebt
		debt := max(pm-tokens, float64(leasedOut-mine+back), float64(leasedOut)-refilled)
		tokens = pm - max(0, debt-float64(back))
		s.dayCount = max(0, s.dayCount-back)
	} else {
		tokens = min(tokens, pm-float64(leasedOut))
	}
	return tokens, gone
}

// floorBan raises the ban to the database's, which a Redis lost (restarted
// empty) forgot, unless it was lifted. floored: it did.
func floorBan(s *limitState, run *limitRun) (floored bool) {
	floored = run.banFloor.After(run.now) && run.banFloor.After(s.bannedUntil) && run.banFloor.After(s.liftedUntil)
	if floored {
		s.bannedUntil, s.waitUntil, s.waitCount = run.banFloor, time.Time{}, 0
	}
	return floored
}

// grant spends the request's token, and for a lease as many more as its
// share of what the minute and the day have left, from tokens and the day;
// it returns the tokens left.
func grant(s *limitState, f *limitFigures, run *limitRun, tokens float64, a *limitAnswer) float64 {
	take := int64(1)
	if run.lease.owner != "" && run.lease.want > 1 {
		left := min(int64(math.Floor(tokens)), f.PerDay-s.dayCount)
		take = max(1, min(run.lease.want, left/LeaseShare))
	}
	s.dayCount += take
	s.waitUntil, s.waitCount = time.Time{}, 0
	a.take, a.leased, a.write = take, take-1, true
	return tokens - float64(take)
}

// refuse spends nothing: it tells the caller how long to wait, and bans
// one that keeps sending during the wait.
func refuse(s *limitState, f *limitFigures, run *limitRun, tokens float64, a *limitAnswer) {
	now := run.now
	a.write = true
	var wait time.Duration
	if s.dayCount >= f.PerDay {
		wait = NextMidnight(now).Sub(now)
	} else {
		wait = time.Duration(math.Ceil((1 - tokens) / perSecond(f.Limits) * float64(time.Second)))
	}
	wait = wholeSeconds(wait)
	switch {
	case !now.Before(s.waitUntil):
		s.waitUntil, s.waitCount = now.Add(wait), 0
		a.status, a.retryAfter = limited, wait
	case s.waitCount+1 > f.banAfter:
		// To the millisecond, as the bans table and Redis keep it: a
		// lift names the stored end, and ends only a ban that ends
		// then or sooner.
		s.bannedUntil, s.waitUntil, s.waitCount = now.Add(f.banFor).Truncate(time.Millisecond), time.Time{}, 0
		a.status, a.bannedUntil = banStarted, s.bannedUntil
	default:
		s.waitCount++
		a.status, a.retryAfter = limited, wait
	}
}

// settleLeases are leases without owner's and those held as spent by nowMs,
// with owner's new lease of tokens (none when 0). They are made anew: the
// state before the run is left as it was.
func settleLeases(leases []leaseOut, owner string, nowMs, tokens, until int64) []leaseOut {
	var kept []leaseOut
	for _, l := range leases {
		if l.owner != owner && l.until > nowMs {
			kept = append(kept, l)
		}
	}
	if tokens > 0 {
		kept = append(kept, leaseOut{owner, tokens, until})
	}
	return kept
}

// standing is what a run's answer tells the caller, under lim with the
// RateLimit-Policy header policy, with both windows when asked: the tokens
// leased to the asking server are the caller's to spend.
func (a limitAnswer) standing(lim domain.Limits, policy string, perSecond float64, both bool) Standing {
	s := Standing{Decision: a.decision(lim, policy, perSecond)}
	if both {
		s.Minute, s.Day = windows(a.now, lim, a.tokens+float64(a.leased), perSecond, a.dayCount-a.leased)
	}
	return s
}

// decision is the part of standing a request is answered with: allow runs
// on every request, and needs neither window apart.
func (a limitAnswer) decision(lim domain.Limits, policy string, perSecond float64) Decision {
	d := report(a.now, lim, policy, a.tokens+float64(a.leased), perSecond, a.dayCount-a.leased)
	d.Today = UnixDay(a.now)
	switch a.status {
	case Allowed:
		d.Allowed = true
	case limited:
		d.Code, d.RetryAfter = CodeRateLimited, a.retryAfter
		// The rules refuse for the day once its count, every lease out
		// included, has reached the quota.
		d.OverQuota = a.dayCount >= lim.PerDay
	case banned, banStarted:
		d = reportBan(d, a.now, a.bannedUntil)
		d.BanStarted = a.status == banStarted
	}
	return d
}

// report describes the binding window of a caller with tokens in its minute
// bucket (refilled at perSecond up to lim.PerMinute) and dayCount requests
// today: the window with fewer requests left, or on a tie the one that is
// full again sooner. Both limiters describe their callers through it, so
// that their headers agree.
func report(now time.Time, lim domain.Limits, policy string, tokens, perSecond float64, dayCount int64) Decision {
	minute, day := windows(now, lim, tokens, perSecond, dayCount)
	d := Decision{Policy: policy, Window: "day", Limit: day.Limit, Remaining: day.Remaining, Reset: day.Reset, ResetIn: day.resetIn,
		DayCount: dayCount}
	if minute.Remaining < day.Remaining || (minute.Remaining == day.Remaining && !minute.Reset.After(day.Reset)) {
		d.Window, d.Limit, d.Remaining, d.Reset, d.ResetIn = "minute", minute.Limit, minute.Remaining, minute.Reset, minute.resetIn
	}
	return d
}

// windows are both windows of a caller, as report sees them.
func windows(now time.Time, lim domain.Limits, tokens, perSecond float64, dayCount int64) (minute, day Window) {
	refill := refillTime(lim, tokens, perSecond)
	minute = Window{lim.PerMinute, int64(math.Floor(tokens)), domain.CeilSecond(now.Add(refill)), roundUpSecond(refill)}
	dayReset := NextMidnight(now)
	// roundUpSecond(dayReset.Sub(now)) in whole seconds, as dayReset is
	// one: without Sub's work on a time with a monotonic reading.
	day = Window{lim.PerDay, max(0, lim.PerDay-dayCount), dayReset, time.Duration(dayReset.Unix()-now.Unix()) * time.Second}
	return minute, day
}

// refillTime is how long a minute bucket holding tokens takes to be full.
func refillTime(lim domain.Limits, tokens, perSecond float64) time.Duration {
	return time.Duration(math.Ceil((float64(lim.PerMinute) - tokens) / perSecond * float64(time.Second)))
}

// reportBan turns d into the answer during a ban that lasts until until:
// nothing left until it ends.
func reportBan(d Decision, now, until time.Time) Decision {
	d.Code, d.RetryAfter, d.BannedUntil = CodeTemporarilyBanned, wholeSeconds(until.Sub(now)), until
	d.Remaining, d.Reset, d.ResetIn = 0, domain.CeilSecond(until), d.RetryAfter
	return d
}
