package publicapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"petstore/internal/servertest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/limits"
	"petstore/internal/testkit"
)

// Leases (internal/limits/lease.go) under the test's clock, which the script
// reads too: a frozen clock is a burst, a clock moved between requests a
// steady rate.

func TestRateCountEstimatesTheLastTenthOfASecond(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, time.March, 10, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		every    time.Duration // between requests
		min, max int64
	}{
		{"one a second", time.Second, 1, 1},
		{"ten a second", 100 * time.Millisecond, 1, 2},
		{"a hundred a second", 10 * time.Millisecond, 10, 11},
		{"ten thousand a second", 100 * time.Microsecond, 1000, 1001},
		{"three a millisecond, off the period's beat", 333 * time.Microsecond, 300, 302},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c limits.RateCount
			now := start
			for range 3 * int(time.Second/tc.every) {
				c.Add(now)
				if got := c.Recent(now); got < 1 || got > tc.max {
					t.Fatalf("at %v: %d requests in the last 100 ms, want 1 to %d", now.Sub(start), got, tc.max)
				}
				now = now.Add(tc.every)
			}
			now = now.Add(-tc.every)
			if got := c.Recent(now); got < tc.min || got > tc.max {
				t.Errorf("after 3 s: %d requests in the last 100 ms, want %d to %d", got, tc.min, tc.max)
			}
		})
	}
}

// mustAllow asks r for n requests of id and fails unless all are allowed.
func mustAllow(t *testing.T, r *limits.Redis, id domain.CallerID, lim domain.Limits, n int) {
	t.Helper()
	for i := range n {
		d, err := r.Allow(context.Background(), id, lim)
		if err != nil || !d.Allowed {
			t.Fatalf("request %d of %d: %+v, %v; want allowed", i+1, n, d, err)
		}
	}
}

// allowedUntilRefused counts the requests of id r allows before the first
// it refuses, which it returns.
func allowedUntilRefused(t *testing.T, r *limits.Redis, id domain.CallerID, lim domain.Limits) (int, limits.Decision) {
	t.Helper()
	for n := 0; ; n++ {
		d, err := r.Allow(context.Background(), id, lim)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			return n, d
		}
	}
}

// peekAt is what r reports of id's two windows.
func peekAt(t *testing.T, r *limits.Redis, id domain.CallerID, lim domain.Limits) (minute, day int64) {
	t.Helper()
	s, err := r.Peek(context.Background(), id, lim)
	if err != nil {
		t.Fatal(err)
	}
	return s.Minute.Remaining, s.Day.Remaining
}

func TestLeaseSizeFollowsTheRate(t *testing.T) {
	t.Parallel()
	lim := domain.Limits{PerMinute: 100_000_000, PerDay: 1 << 40}
	for _, tc := range []struct {
		name      string
		perSecond int
		min, max  int64 // the largest lease taken, after the first second
	}{
		{"one a second: no lease", 1, 0, 0},
		{"fifty a second", 50, 4, 5},
		{"a thousand a second", 1000, 90, 100},
		{"twenty thousand a second", 20_000, 1900, 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := servertest.Start(t, servertest.Options{Redis: true})
			r := s.Limiter().(*limits.Redis)
			id := domain.CallerID{KeyID: 1}
			every := time.Second / time.Duration(tc.perSecond)
			var largest int64
			for i := range 2 * tc.perSecond {
				before := limits.LeaseLeft(r, id)
				mustAllow(t, r, id, lim, 1)
				if now := limits.LeaseLeft(r, id); i >= tc.perSecond && now > before {
					largest = max(largest, now)
				}
				s.Clock.Advance(every)
			}
			if largest < tc.min || largest > tc.max {
				t.Errorf("largest lease %d tokens, want %d to %d (about 100 ms of requests)", largest, tc.min, tc.max)
			}
		})
	}
}

func TestLeaseShrinksNearTheLimit(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{Redis: true})
	r := s.Limiter().(*limits.Redis)
	id, lim := domain.CallerID{KeyID: 1}, domain.Limits{PerMinute: 6000, PerDay: 1 << 40}
	// A burst: the clock stands still, so the rate here counts every
	// request so far; the share of what is left caps it.
	var sizes []int64
	for accepted := int64(0); accepted < lim.PerMinute; accepted++ {
		if limits.LeaseLeft(r, id) > 0 {
			mustAllow(t, r, id, lim, 1)
			continue
		}
		mustAllow(t, r, id, lim, 1) // it runs the script
		got := limits.LeaseLeft(r, id)
		if want := min(accepted+1, max(1, (lim.PerMinute-accepted)/limits.LeaseShare)) - 1; got != want {
			t.Fatalf("after %d requests, with %d tokens left, a lease of %d, want %d: the rate, at most a 16th of what is left, the request's own aside",
				accepted, lim.PerMinute-accepted, got, want)
		}
		sizes = append(sizes, got)
	}
	if largest := slices.Max(sizes); largest < 300 || sizes[len(sizes)-1] != 0 {
		t.Errorf("the largest lease %d, the last %d; want over 300 and 0", largest, sizes[len(sizes)-1])
	}
	if _, d := allowedUntilRefused(t, r, id, lim); d.RetryAfter != time.Second {
		t.Errorf("after the figure: %+v, want refused with Retry-After 1 s", d)
	}
}

// The headers of requests spent from a lease count down as without one:
// the tokens leased here are the caller's, counted once.
func TestRemainingCountsDownOneARequestWhileLeased(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{Redis: true})
	r := s.Limiter().(*limits.Redis)
	id, lim := domain.CallerID{KeyID: 1}, domain.Limits{PerMinute: 600, PerDay: 1 << 40}
	var fromLease int
	for i := range 100 {
		if limits.LeaseLeft(r, id) > 0 {
			fromLease++
		}
		d, err := r.Allow(context.Background(), id, lim)
		if err != nil || !d.Allowed || d.Remaining != lim.PerMinute-int64(i+1) {
			t.Fatalf("request %d: %+v, %v; want allowed with %d remaining", i+1, d, err, lim.PerMinute-int64(i+1))
		}
	}
	if fromLease == 0 {
		t.Fatal("no request was spent from a lease")
	}
}

func TestLeaseAgesOutAndItsTokensGoBack(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{Redis: true})
	a, b := s.Limiter().(*limits.Redis), s.WithOwnLimiter().Limiter().(*limits.Redis)
	id, lim := domain.CallerID{KeyID: 1}, domain.Limits{PerMinute: 6000, PerDay: 100_000}
	mustAllow(t, a, id, lim, 50)
	k := limits.LeaseLeft(a, id)
	if k == 0 {
		t.Fatal("no lease after a burst of 50")
	}
	if minute, day := peekAt(t, b, id, lim); minute != 5950-k || day != 99_950-k {
		t.Errorf("another server sees %d and %d left, want %d and %d: the lease is out", minute, day, 5950-k, 99_950-k)
	}
	if minute, day := peekAt(t, a, id, lim); minute != 5950 || day != 99_950 {
		t.Errorf("the server holding the lease sees %d and %d left, want 5950 and 99950: its lease is the caller's", minute, day)
	}

	s.Clock.Advance(limits.LeaseLife) // 50 tokens refill meanwhile
	a.ReturnLeases(context.Background(), false)
	if got := limits.LeaseLeft(a, id); got != 0 {
		t.Errorf("%d tokens still leased after the lease aged out", got)
	}
	if minute, day := peekAt(t, b, id, lim); minute != 6000 || day != 99_950 {
		t.Errorf("after the lease aged out, another server sees %d and %d left, want 6000 and 99950", minute, day)
	}
}

func TestStoppedServerGivesItsLeaseBack(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{Redis: true})
	a, b := s.Limiter().(*limits.Redis), s.WithOwnLimiter().Limiter().(*limits.Redis)
	id, lim := domain.CallerID{KeyID: 1}, domain.Plans["free"]
	mustAllow(t, a, id, lim, 10)
	if limits.LeaseLeft(a, id) == 0 {
		t.Fatal("no lease after a burst of 10")
	}
	a.Close()
	if n, _ := allowedUntilRefused(t, b, id, lim); n != 50 {
		t.Errorf("another server allowed %d at once after the first stopped, want the 50 left", n)
	}
}

func TestKilledServerLosesAtMostItsLeaseForTheRestOfItsMinute(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{Redis: true})
	a, b := s.Limiter().(*limits.Redis), s.WithOwnLimiter().Limiter().(*limits.Redis)
	id, lim := domain.CallerID{KeyID: 1}, domain.Plans["free"]
	mustAllow(t, a, id, lim, 10)
	k := int(limits.LeaseLeft(a, id))
	if k == 0 {
		t.Fatal("no lease after a burst of 10")
	}
	limits.Kill(a)
	for _, step := range []struct {
		name  string
		after time.Duration
		want  int
	}{
		{"at once", 0, 50 - k},
		{"a second later, the lease still out", time.Second, 1},
		{"once Redis takes the lease as spent", time.Second, 1},
		{"a minute on", time.Minute, 60},
	} {
		s.Clock.Advance(step.after)
		n, d := allowedUntilRefused(t, b, id, lim)
		if n != step.want {
			t.Errorf("%s: the other server allowed %d, want %d", step.name, n, step.want)
		}
		if d.Code != httpapi.CodeRateLimited || d.RetryAfter != time.Second {
			t.Errorf("%s: refused with %s, Retry-After %v; want rate_limited, 1 s", step.name, d.Code, d.RetryAfter)
		}
	}
}

func TestBanReachesAServerHoldingALeaseOnceItAgesOut(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{Redis: true, BanAfter: 1})
	a, b := s.Limiter().(*limits.Redis), s.WithOwnLimiter().Limiter().(*limits.Redis)
	id, lim := domain.CallerID{KeyID: 1}, domain.Plans["free"]
	mustAllow(t, a, id, lim, 10)
	if limits.LeaseLeft(a, id) < 2 {
		t.Fatalf("a lease of %d after a burst of 10, want 2 or more", limits.LeaseLeft(a, id))
	}
	allowedUntilRefused(t, b, id, lim)
	for range 2 {
		b.Allow(context.Background(), id, lim)
	}
	if d, _ := b.Allow(context.Background(), id, lim); d.Code != httpapi.CodeTemporarilyBanned {
		t.Fatalf("the other server: %+v, want banned", d)
	}
	mustAllow(t, a, id, lim, 1) // its lease is still live
	s.Clock.Advance(limits.LeaseLife)
	if d, _ := a.Allow(context.Background(), id, lim); d.Code != httpapi.CodeTemporarilyBanned {
		t.Errorf("the server that held a lease, once it aged out: %+v, want banned", d)
	}
}

// threeServers are three servers on one database and one Redis, as behind a
// load balancer, with a ban far away. redis counts their round trips to
// Redis, and their fallbacks.
func threeServers(t *testing.T) (servers []*servertest.Server, redis *fallbackEvents) {
	first := servertest.Start(t, servertest.Options{Redis: true, BanAfter: 1 << 30})
	redis = &fallbackEvents{}
	for range 3 {
		s := *first
		s.UseRedisThrough(testkit.RedisURL(t), io.Discard, redis.hooks())
		servers = append(servers, &s)
	}
	return servers, redis
}

// driveUntilRefused sends GET /v1/pets with key from callers on every
// server at once, each as fast as it can until it is refused. It returns
// how many were accepted, and the refusals.
func driveUntilRefused(servers []*servertest.Server, key string, callersEach int) (accepted int64, refusals []*httptest.ResponseRecorder) {
	var n atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range servers {
		for range callersEach {
			wg.Go(func() {
				for {
					w := s.Do("GET", "/v1/pets", key, "")
					if w.Code != 200 {
						mu.Lock()
						refusals = append(refusals, w)
						mu.Unlock()
						return
					}
					n.Add(1)
				}
			})
		}
	}
	wg.Wait()
	return n.Load(), refusals
}

// The two tests of exact figures across three servers run alone, and
// count only a try during which Redis answered every call in its 100 ms:
// each is a burst of twelve callers, and on a loaded machine a starved
// round trip went past that, so that the servers limited alone for a
// moment, as they should while Redis does not answer (docs/api.md).
func TestThreeServersAcceptExactlyTheFigureEachMinute(t *testing.T) {
	for _, tc := range []struct {
		plan string
		lim  domain.Limits
	}{
		{"free", domain.Plans["free"]},
		{"pro", domain.Plans["pro"]},
		{"business", domain.Plans["business"]},
		{"enterprise", domain.Limits{PerMinute: 6000, PerDay: 1_000_000}},
	} {
		t.Run(tc.plan, func(t *testing.T) {
			whileRedisAnswers(t, func(servers []*servertest.Server, redis *fallbackEvents) (problems []string) {
				key := servers[0].MustCreateKey(tc.plan, tc.lim)
				total := int64(0)
				for minute := range 3 {
					accepted, refusals := driveUntilRefused(servers, key, 4)
					if accepted != tc.lim.PerMinute {
						problems = append(problems, fmt.Sprintf("minute %d: %d accepted across three servers, want %d", minute+1, accepted, tc.lim.PerMinute))
					}
					for _, w := range refusals {
						servertest.WantError(t, w, 429, httpapi.CodeRateLimited)
						if got := testkit.IntHeader(t, w, "Retry-After"); got != 1 {
							problems = append(problems, fmt.Sprintf("minute %d: Retry-After %d, want 1", minute+1, got))
						}
					}
					total += accepted
					servers[0].Clock.Advance(time.Minute) // every bucket is full again
				}
				if tc.plan == "enterprise" && redis.calls.Load() > total/20 {
					problems = append(problems, fmt.Sprintf("%d round trips to Redis for %d requests, want at most one in 20: leases this large", redis.calls.Load(), total))
				}
				return problems
			})
		})
	}
}

// whileRedisAnswers runs measure on three fresh servers until it ran with
// no fallback, at most three times, and reports that run's problems.
func whileRedisAnswers(t *testing.T, measure func(servers []*servertest.Server, redis *fallbackEvents) []string) {
	t.Helper()
	for try := 1; ; try++ {
		servers, redis := threeServers(t)
		problems := measure(servers, redis)
		switch {
		case redis.String() == "":
			for _, p := range problems {
				t.Error(p)
			}
			return
		case try == 3:
			t.Fatalf("in each of three tries Redis missed its 100 ms and the servers limited alone (the last went %q): %v", redis, problems)
		}
		t.Logf("try %d: Redis missed its 100 ms and the servers limited alone (the fallback went %q); again on fresh servers", try, redis)
	}
}

func TestThreeServersAcceptExactlyTheDayQuota(t *testing.T) {
	whileRedisAnswers(t, func(servers []*servertest.Server, _ *fallbackEvents) (problems []string) {
		lim := domain.Limits{PerMinute: 1_000_000, PerDay: 3000}
		key := servers[0].MustCreateKey("enterprise", lim)
		for day := range 2 {
			accepted, refusals := driveUntilRefused(servers, key, 4)
			if accepted != lim.PerDay {
				problems = append(problems, fmt.Sprintf("day %d: %d accepted across three servers, want %d", day+1, accepted, lim.PerDay))
			}
			now := servers[0].Clock.Now()
			for _, w := range refusals {
				servertest.WantError(t, w, 429, httpapi.CodeRateLimited)
				if got, want := testkit.IntHeader(t, w, "Retry-After"), int64(limits.NextMidnight(now).Sub(now)/time.Second); got != want {
					problems = append(problems, fmt.Sprintf("day %d: Retry-After %d, want %d: until midnight", day+1, got, want))
				}
			}
			for _, s := range servers {
				if err := s.Limiter().Flush(context.Background(), s.Store().AddUsage); err != nil {
					t.Fatal(err)
				}
			}
			stored, err := servers[0].Store().Usage(context.Background(), 1, limits.DayString(limits.UnixDay(now)))
			if err != nil || stored != lim.PerDay {
				problems = append(problems, fmt.Sprintf("day %d: %d stored, %v; want %d, each request once", day+1, stored, err, lim.PerDay))
			}
			servers[0].Clock.Advance(limits.NextMidnight(now).Sub(now))
		}
		return problems
	})
}
