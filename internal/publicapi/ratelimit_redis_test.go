package publicapi_test

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"petstore/internal/servertest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/limits"
	"petstore/internal/testkit"
)

// The rules both limiters share run against each through forEachLimiter
// (ratelimit_test.go). These are the Redis limiter's own: servers sharing
// one Redis, a day count rebuilt from the database, the fallback while
// Redis is away. They need a Redis, and touch no key outside their prefix.

func TestRedisRunsOfOneBatchShareARoundTripEvenAfterAScriptFlush(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Redis: true})
	var events fallbackEvents
	r := s.UseRedisThrough(testkit.RedisURL(t), io.Discard, events.hooks())
	lim := domain.Limits{PerMinute: 60, PerDay: 1000}
	batch := make([]limits.ScriptRun, 3)
	for i := range batch {
		id := domain.CallerID{Addr: netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)})}
		run := r.Args(r.Key(id), id, lim)
		run.Cost = 1
		batch[i] = limits.ScriptRun{Cmd: run.Encode()}
	}
	batch = append(batch, batch[0]) // the same caller twice: counted twice, in order
	// Cached by this test, not by whichever ran before on this Redis.
	if err := limits.LimitScript.Load(context.Background(), limits.Client(r)).Err(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		flush  bool
		counts []int64 // each run's count of the day, after it
		trips  int64
	}{
		{"script cached", false, []int64{1, 1, 1, 2}, 1},
		{"script flushed: the refused runs go again with its text", true, []int64{3, 2, 2, 4}, 2},
	} {
		if tc.flush {
			if err := limits.Client(r).ScriptFlush(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		}
		runs := slices.Clone(batch)
		before := events.calls.Load()
		if err := limits.RunScripts(context.Background(), r, runs); err != nil {
			t.Fatal(err)
		}
		counts := make([]int64, len(runs))
		for i, run := range runs {
			if run.Err != nil || run.Answer.Status != limits.Allowed {
				t.Fatalf("%s: run %d: %+v, %v; want allowed", tc.name, i, run.Answer, run.Err)
			}
			counts[i] = run.Answer.Count
		}
		if !slices.Equal(counts, tc.counts) {
			t.Errorf("%s: counts %v, want %v", tc.name, counts, tc.counts)
		}
		if trips := events.calls.Load() - before; trips != tc.trips {
			t.Errorf("%s: %d round trips for a batch of %d, want %d", tc.name, trips, len(runs), tc.trips)
		}
	}
}

func TestRedisServersShareOneLimitAndOneBan(t *testing.T) {
	t.Parallel()
	a := servertest.Start(t, servertest.Options{Redis: true})
	b := a.WithOwnLimiter()
	servers := []*servertest.Server{a, b}
	key := a.MustCreateKey("free")
	for i := range 60 {
		if w := servers[i%2].Do("GET", "/v1/pets", key, ""); w.Code != 200 {
			t.Fatalf("request %d: %d %s", i+1, w.Code, w.Body)
		}
	}
	for _, s := range servers { // the wait starts, and the second counts towards a ban
		w := s.Do("GET", "/v1/pets", key, "")
		servertest.WantError(t, w, 429, httpapi.CodeRateLimited)
		if got := testkit.IntHeader(t, w, "Retry-After"); got != 1 {
			t.Errorf("Retry-After = %d, want 1", got)
		}
	}
	for i := range 9 {
		servertest.WantError(t, servers[i%2].Do("GET", "/v1/pets", key, ""), 429, httpapi.CodeRateLimited)
	}
	servertest.WantError(t, a.Do("GET", "/v1/pets", key, ""), 429, httpapi.CodeTemporarilyBanned)
	a.Clock.Advance(time.Minute) // the bucket is full again, the ban is not over
	w := b.Do("GET", "/v1/pets", key, "")
	servertest.WantError(t, w, 429, httpapi.CodeTemporarilyBanned)
	if got := testkit.IntHeader(t, w, "Retry-After"); got != 840 {
		t.Errorf("Retry-After on the other server = %d, want the rest of the ban, 840", got)
	}
}

func TestRedisRebuildsADayCountFromTheDatabase(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{Redis: true})
	other := s.WithOwnLimiter()
	key := s.MustCreateKey("enterprise", domain.Limits{PerMinute: 1000, PerDay: 10})
	for range 4 {
		s.Do("GET", "/v1/pets", key, "")
	}
	if err := s.Limiter().Flush(context.Background(), s.Store().AddUsage); err != nil {
		t.Fatal(err)
	}
	for range 3 { // counted in Redis, not yet in the database
		s.Do("GET", "/v1/pets", key, "")
	}

	testkit.DeleteRedisKeys(t, testkit.RedisURL(t), s.RedisPrefix) // Redis restarted empty
	w := s.Do("GET", "/v1/pets", key, "")
	if got := testkit.IntHeader(t, w, "X-RateLimit-Remaining"); got != 2 {
		t.Fatalf("after Redis lost the count, Remaining = %d, want 2 (4 stored + 3 unwritten + this one)", got)
	}
	w = other.Do("GET", "/v1/pets", key, "")
	if got := testkit.IntHeader(t, w, "X-RateLimit-Remaining"); got != 1 {
		t.Fatalf("the other server: Remaining = %d, want 1: the rebuilt count is shared", got)
	}
	for _, server := range []*servertest.Server{s, other} {
		if err := server.Limiter().Flush(context.Background(), s.Store().AddUsage); err != nil {
			t.Fatal(err)
		}
	}
	stored, err := s.Store().Usage(context.Background(), 1, limits.DayString(limits.UnixDay(s.Clock.Now())))
	if err != nil || stored != 9 {
		t.Fatalf("stored count = %d, %v; want 9, each request once", stored, err)
	}
}

// When servers seed a lost count at once, the first seed wins and a later
// one is ignored: a server's own unwritten requests can be missed, at most
// those of its last flush interval.
func TestRedisFirstSeedWins(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{Redis: true})
	r := s.Limiter().(*limits.Redis)
	id, lim := domain.CallerID{KeyID: 7}, domain.Plans["free"]
	key := r.Key(id)
	look := r.Args(key, id, lim)
	a, err := limits.RunScript(r, look)
	if err != nil || a.Status != limits.NeedSeed {
		t.Fatalf("a missing count: %+v, %v; want status %d", a, err, limits.NeedSeed)
	}
	for _, seed := range []int64{5, 9} {
		look.Seed = seed
		a, err := limits.RunScript(r, look)
		if err != nil || a.Status != limits.Allowed || a.Count != 5 {
			t.Fatalf("seed %d: %+v, %v; want the count 5 of the first seed", seed, a, err)
		}
	}
}

func TestRedisScriptTakesTheTimeFromRedis(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{Redis: true})
	r := s.Limiter().(*limits.Redis)
	r.ScriptNow = nil
	before := time.Now()
	run := r.Args(r.Key(domain.CallerID{KeyID: 1}), domain.CallerID{}, domain.Plans["free"])
	run.Cost = 1
	a, err := limits.RunScript(r, run)
	if err != nil {
		t.Fatal(err)
	}
	if got := time.UnixMilli(a.NowMs); got.Before(before.Add(-5*time.Second)) || got.After(time.Now().Add(5*time.Second)) {
		t.Fatalf("the script's now is %v, want Redis's clock, near %v", got, before)
	}
	if a.Day != limits.UnixDay(time.UnixMilli(a.NowMs)) {
		t.Fatalf("day %d, want the day of now", a.Day)
	}
}

func TestPeekSpendsNothing(t *testing.T) {
	t.Parallel()
	servertest.ForEachLimiter(t, servertest.Options{BanAfter: 1}, func(t *testing.T, s *servertest.Server) {
		ctx := context.Background()
		id, lim := domain.CallerID{KeyID: 42}, domain.Plans["free"]
		peek := func(wantMinute, wantDay int64) limits.Standing {
			t.Helper()
			p, err := s.Limiter().Peek(ctx, id, lim)
			if err != nil {
				t.Fatal(err)
			}
			if p.Minute.Remaining != wantMinute || p.Day.Remaining != wantDay {
				t.Fatalf("peek: minute %d left, day %d left; want %d and %d", p.Minute.Remaining, p.Day.Remaining, wantMinute, wantDay)
			}
			return p
		}
		p := peek(60, 1000)
		peek(60, 1000)
		if !p.Allowed || p.Window != "minute" || p.Remaining != 60 || !p.Minute.Reset.Equal(s.Clock.Now()) || !p.Day.Reset.Equal(limits.NextMidnight(s.Clock.Now())) {
			t.Fatalf("peek of a fresh caller: %+v", p)
		}
		for range 60 {
			s.Limiter().Allow(ctx, id, lim)
		}
		p = peek(0, 940)
		if !p.Allowed || !p.Minute.Reset.Equal(s.Clock.Now().Add(time.Minute)) {
			t.Fatalf("a caller out of requests is not refused a look: %+v", p)
		}
		for range 3 {
			s.Limiter().Allow(ctx, id, lim)
		}
		if p := peek(0, 940); p.Allowed || p.Code != httpapi.CodeTemporarilyBanned {
			t.Fatalf("peek of a banned caller: %+v, want banned", p)
		}
	})
}

// startRedisProxy is a faultProxy between a server and the test's Redis;
// its URL reaches Redis through it.
func startRedisProxy(t *testing.T) (*testkit.FaultProxy, string) {
	t.Helper()
	return testkit.FaultProxyTo(t, testkit.RedisURL(t))
}

// fallbackEvents records what the limiter tells the fallback hook.
type fallbackEvents struct {
	mu     sync.Mutex
	events []bool
	calls  atomic.Int64
}

func (e *fallbackEvents) hooks() limits.RedisHooks {
	return limits.RedisHooks{
		Fallback: func(active bool) {
			e.mu.Lock()
			e.events = append(e.events, active)
			e.mu.Unlock()
		},
		Call: func(time.Time) { e.calls.Add(1) },
	}
}

func (e *fallbackEvents) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	for _, on := range e.events {
		if on {
			b.WriteString("down ")
		} else {
			b.WriteString("up ")
		}
	}
	return strings.TrimSpace(b.String())
}

func TestRedisAwayFallsBackAndComesBack(t *testing.T) {
	t.Parallel()
	proxy, redisURL := startRedisProxy(t)
	s := servertest.Start(t, servertest.Options{Redis: true})
	logs := &testkit.SyncBuffer{}
	var events fallbackEvents
	r := s.UseRedisThrough(redisURL, logs, events.hooks())
	key := s.MustCreateKey("enterprise", domain.Limits{PerMinute: 1000, PerDay: 20})
	for i := range 10 {
		if w := s.Do("GET", "/v1/pets", key, ""); w.Code != 200 {
			t.Fatalf("request %d through Redis: %d %s", i+1, w.Code, w.Body)
		}
	}
	if events.calls.Load() == 0 {
		t.Error("the call hook heard no script run")
	}

	proxy.Set("drop")
	// This server now limits alone, from the count it knows: 10 of 20.
	for i := range 10 {
		w := s.Do("GET", "/v1/pets", key, "")
		if w.Code != 200 || testkit.IntHeader(t, w, "X-RateLimit-Remaining") != int64(9-i) {
			t.Fatalf("request %d while Redis is away: %d, Remaining %s; want 200 and %d",
				i+11, w.Code, w.Header().Get("X-RateLimit-Remaining"), 9-i)
		}
	}
	servertest.WantError(t, s.Do("GET", "/v1/pets", key, ""), 429, httpapi.CodeRateLimited)
	dialed := proxy.Accepted.Load()
	for range 20 {
		s.Do("GET", "/v1/pets", "", "")
	}
	if got := proxy.Accepted.Load(); got != dialed {
		t.Errorf("%d connections tried within the probe interval, want none", got-dialed)
	}
	s.Clock.Advance(limits.RedisProbeEvery)
	s.Do("GET", "/v1/pets", key, "") // one probe, still refused
	if got := proxy.Accepted.Load(); got > dialed+1 {
		t.Errorf("a probe dialed %d times, want once", got-dialed)
	}

	proxy.Set("pass")
	s.Clock.Advance(limits.RedisProbeEvery)
	// Back on Redis, whose count is raised to the 20 this server knows of.
	w := s.Do("GET", "/v1/pets", key, "")
	servertest.WantError(t, w, 429, httpapi.CodeRateLimited)
	if got := testkit.IntHeader(t, w, "X-RateLimit-Remaining"); got != 0 {
		t.Errorf("Remaining = %d after the outage, want 0: 20 of 20 used", got)
	}
	if got := limits.Outages(r); got != 1 {
		t.Errorf("outages = %d, want 1", got)
	}
	if got := events.String(); got != "down up" {
		t.Errorf("fallback hook heard %q, want \"down up\"", got)
	}
	log := logs.String()
	if strings.Count(log, "level=WARN") != 1 || strings.Count(log, "Redis does not answer") != 1 ||
		strings.Count(log, "Redis answers again") != 1 {
		t.Errorf("want one warning when Redis went and one line when it came back, got:\n%s", log)
	}
	if err := r.Flush(context.Background(), s.Store().AddUsage); err != nil {
		t.Fatal(err)
	}
	if stored, _ := s.Store().Usage(context.Background(), 1, limits.DayString(limits.UnixDay(s.Clock.Now()))); stored != 20 {
		t.Errorf("stored count = %d, want 20", stored)
	}
}

// Two servers limit alone while Redis is away, and Redis comes back empty
// (a restart) or with what it had (a network fault): either way each
// request is counted once, whichever server granted it.
func TestRedisCountAfterAnOutageHasEachRequestOnce(t *testing.T) {
	t.Parallel()
	for _, restarted := range []bool{true, false} {
		t.Run(fmt.Sprintf("restarted=%v", restarted), func(t *testing.T) {
			proxy, redisURL := startRedisProxy(t)
			a := servertest.Start(t, servertest.Options{Redis: true})
			a.UseRedisThrough(redisURL, io.Discard, limits.RedisHooks{})
			b := *a
			b.UseRedisThrough(redisURL, io.Discard, limits.RedisHooks{})
			key := a.MustCreateKey("enterprise", domain.Limits{PerMinute: 1000, PerDay: 100})
			for range 10 {
				a.Do("GET", "/v1/pets", key, "")
			}
			proxy.Set("drop")
			for range 5 {
				for _, s := range []*servertest.Server{a, &b} {
					if w := s.Do("GET", "/v1/pets", key, ""); w.Code != 200 {
						t.Fatalf("while Redis is away: %d %s", w.Code, w.Body)
					}
				}
			}
			if restarted {
				testkit.DeleteRedisKeys(t, testkit.RedisURL(t), a.RedisPrefix)
			}
			for _, s := range []*servertest.Server{a, &b} {
				if err := s.Limiter().Flush(context.Background(), a.Store().AddUsage); err != nil {
					t.Fatal(err)
				}
			}
			proxy.Set("pass")
			a.Clock.Advance(limits.RedisProbeEvery)
			for i, s := range []*servertest.Server{a, &b, a, &b} {
				a.Clock.Advance(2 * limits.LeaseTraffic) // too few requests for a lease
				w := s.Do("GET", "/v1/pets", key, "")
				if got := testkit.IntHeader(t, w, "X-RateLimit-Remaining"); got != int64(79-i) {
					t.Fatalf("request %d after the outage: Remaining %d, want %d (20 counted before it)", i+1, got, 79-i)
				}
			}
		})
	}
}

func TestRedisThatHangsIsCutShort(t *testing.T) {
	t.Parallel()
	proxy, redisURL := startRedisProxy(t)
	s := servertest.Start(t, servertest.Options{Redis: true})
	r := s.UseRedisThrough(redisURL, io.Discard, limits.RedisHooks{})
	key := s.MustCreateKey("free")
	s.Do("GET", "/v1/pets", key, "")
	proxy.Set("stall")
	start := time.Now()
	w := s.Do("GET", "/v1/pets", key, "")
	if took := time.Since(start); took > time.Second {
		t.Errorf("a request waited %v for a Redis that does not answer", took)
	}
	if w.Code != 200 || !limits.Down(r) {
		t.Fatalf("got %d, fallback %v; want 200 from the fallback", w.Code, limits.Down(r))
	}
}

func TestRedisUnreachableAtStart(t *testing.T) {
	t.Parallel()
	closed := testkit.FreeAddr(t)
	s := servertest.Start(t, servertest.Options{})
	logs := &testkit.SyncBuffer{}
	r := s.UseRedisThrough("redis://"+closed+"/0", logs, limits.RedisHooks{})
	key := s.MustCreateKey("free")
	for i := range 3 { // one token refills in the two probe intervals
		w := s.Do("GET", "/v1/pets", key, "")
		if w.Code != 200 || testkit.IntHeader(t, w, "X-RateLimit-Remaining") != []int64{59, 58, 58}[i] {
			t.Fatalf("request %d: %d, Remaining %s", i+1, w.Code, w.Header().Get("X-RateLimit-Remaining"))
		}
		s.Clock.Advance(limits.RedisProbeEvery)
	}
	if got := limits.Outages(r); got != 1 || strings.Count(logs.String(), "Redis does not answer") != 1 {
		t.Errorf("outages = %d, log:\n%s\nwant one outage, logged once", got, logs)
	}
}

// TestRedisServersAcceptTheRequestAfterRetryAfter: the Retry-After of a
// 429 from one of three servers sharing a Redis is exactly long enough: a
// request a moment before it is refused, one when it has passed accepted,
// through any of them.
func TestRedisServersAcceptTheRequestAfterRetryAfter(t *testing.T) {
	t.Parallel()
	a := servertest.Start(t, servertest.Options{Redis: true})
	servers := []*servertest.Server{a, a.WithOwnLimiter(), a.WithOwnLimiter()}
	key := a.MustCreateKey("free")
	for i := range 60 {
		if w := servers[i%3].Do("GET", "/v1/pets", key, ""); w.Code != 200 {
			t.Fatalf("request %d: %d %s", i+1, w.Code, w.Body)
		}
	}
	w := servers[0].Do("GET", "/v1/pets", key, "")
	servertest.WantError(t, w, 429, httpapi.CodeRateLimited)
	retry := time.Duration(testkit.IntHeader(t, w, "Retry-After")) * time.Second
	a.Clock.Advance(retry - 10*time.Millisecond)
	servertest.WantError(t, servers[1].Do("GET", "/v1/pets", key, ""), 429, httpapi.CodeRateLimited)
	a.Clock.Advance(10 * time.Millisecond)
	if w := servers[2].Do("GET", "/v1/pets", key, ""); w.Code != 200 {
		t.Errorf("after waiting Retry-After %v: %d %s, want 200", retry, w.Code, w.Body)
	}
}
