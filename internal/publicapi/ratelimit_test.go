package publicapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"petstore/internal/servertest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/keyring"
	"petstore/internal/limits"
	"petstore/internal/testkit"
)

func TestFreeKeyGets60RequestsAMinute(t *testing.T) {
	t.Parallel()
	servertest.ForEachLimiter(t, servertest.Options{}, func(t *testing.T, s *servertest.Server) {
		key := s.MustCreateKey("free")

		first := s.Do("GET", "/v1/pets", key, "")
		if first.Code != 200 {
			t.Fatalf("first request: %d %s", first.Code, first.Body)
		}
		if got := testkit.IntHeader(t, first, "X-RateLimit-Limit"); got != 60 {
			t.Errorf("X-RateLimit-Limit = %d, want 60", got)
		}
		if got := testkit.IntHeader(t, first, "X-RateLimit-Remaining"); got != 59 {
			t.Errorf("a fresh Free key's first response says Remaining %d, want 59", got)
		}
		if got, want := testkit.IntHeader(t, first, "X-RateLimit-Reset"), s.Clock.Now().Add(time.Second).Unix(); got != want {
			t.Errorf("X-RateLimit-Reset = %d, want %d (one token refills in a second)", got, want)
		}
		if got := first.Header().Get("RateLimit-Policy"); got != `"minute";q=60;w=60, "day";q=1000;w=86400` {
			t.Errorf("RateLimit-Policy = %q", got)
		}
		if got := first.Header().Get("RateLimit"); got != `"minute";r=59;t=1` {
			t.Errorf("RateLimit = %q", got)
		}

		for i := 2; i <= 60; i++ {
			if w := s.Do("GET", "/v1/pets", key, ""); w.Code != 200 {
				t.Fatalf("request %d: %d %s", i, w.Code, w.Body)
			}
		}
		w := s.Do("GET", "/v1/pets", key, "")
		servertest.WantError(t, w, 429, httpapi.CodeRateLimited)
		if got := testkit.IntHeader(t, w, "Retry-After"); got != 1 {
			t.Errorf("Retry-After = %d, want 1", got)
		}
		if got := testkit.IntHeader(t, w, "X-RateLimit-Remaining"); got != 0 {
			t.Errorf("X-RateLimit-Remaining on a 429 = %d, want 0", got)
		}
	})
}

func TestRequestAfterRetryAfterSucceedsAndRefusalSpendsNothing(t *testing.T) {
	t.Parallel()
	servertest.ForEachLimiter(t, servertest.Options{}, func(t *testing.T, s *servertest.Server) {
		key := s.MustCreateKey("pro") // 300 a minute: one token every 200ms
		for range 300 {
			s.Do("GET", "/v1/pets", key, "")
		}
		for range 5 { // refused requests must not push the refill further away
			servertest.WantError(t, s.Do("GET", "/v1/pets", key, ""), 429, httpapi.CodeRateLimited)
		}
		w := s.Do("GET", "/v1/pets", key, "")
		retry := testkit.IntHeader(t, w, "Retry-After")
		if retry != 1 {
			t.Fatalf("Retry-After = %d, want 1 (whole seconds, rounded up from 200ms)", retry)
		}
		s.Clock.Advance(time.Duration(retry) * time.Second)
		for i := range 5 { // a second refills 5 tokens
			if w := s.Do("GET", "/v1/pets", key, ""); w.Code != 200 {
				t.Fatalf("request %d after waiting Retry-After: %d %s", i+1, w.Code, w.Body)
			}
		}
		servertest.WantError(t, s.Do("GET", "/v1/pets", key, ""), 429, httpapi.CodeRateLimited)
	})
}

func TestDailyQuotaAndItsMidnightReset(t *testing.T) {
	t.Parallel()
	servertest.ForEachLimiter(t, servertest.Options{}, func(t *testing.T, s *servertest.Server) {
		key := s.MustCreateKey("enterprise", domain.Limits{PerMinute: 1000, PerDay: 5})
		for i := range 5 {
			w := s.Do("GET", "/v1/pets", key, "")
			if w.Code != 200 {
				t.Fatalf("request %d: %d", i+1, w.Code)
			}
			if got := testkit.IntHeader(t, w, "X-RateLimit-Limit"); got != 5 {
				t.Fatalf("the day window binds, X-RateLimit-Limit = %d, want 5", got)
			}
			if got := testkit.IntHeader(t, w, "X-RateLimit-Remaining"); got != int64(4-i) {
				t.Fatalf("request %d: Remaining = %d, want %d", i+1, got, 4-i)
			}
		}
		midnight := limits.NextMidnight(s.Clock.Now())
		w := s.Do("GET", "/v1/pets", key, "")
		servertest.WantError(t, w, 429, httpapi.CodeRateLimited)
		if got, want := testkit.IntHeader(t, w, "Retry-After"), int64(midnight.Sub(s.Clock.Now())/time.Second); got != want {
			t.Errorf("Retry-After = %d, want %d (until the next UTC midnight)", got, want)
		}
		if got := testkit.IntHeader(t, w, "X-RateLimit-Reset"); got != midnight.Unix() {
			t.Errorf("X-RateLimit-Reset = %d, want next UTC midnight %d", got, midnight.Unix())
		}
		if got := w.Header().Get("RateLimit-Policy"); got != `"minute";q=1000;w=60, "day";q=5;w=86400` {
			t.Errorf("RateLimit-Policy = %q", got)
		}

		s.Clock.Advance(midnight.Sub(s.Clock.Now()))
		w = s.Do("GET", "/v1/pets", key, "")
		if w.Code != 200 || testkit.IntHeader(t, w, "X-RateLimit-Remaining") != 4 {
			t.Fatalf("after midnight: %d, Remaining %s; want 200 and 4", w.Code, w.Header().Get("X-RateLimit-Remaining"))
		}
	})
}

func TestCustomEnterpriseLimits(t *testing.T) {
	t.Parallel()
	servertest.ForEachLimiter(t, servertest.Options{}, func(t *testing.T, s *servertest.Server) {
		key := s.MustCreateKey("enterprise", domain.Limits{PerMinute: 2, PerDay: 100})
		for range 2 {
			if w := s.Do("GET", "/v1/pets", key, ""); w.Code != 200 {
				t.Fatal(w.Code)
			}
		}
		w := s.Do("GET", "/v1/pets", key, "")
		servertest.WantError(t, w, 429, httpapi.CodeRateLimited)
		if got := testkit.IntHeader(t, w, "Retry-After"); got != 30 {
			t.Errorf("Retry-After = %d, want 30 (2 a minute refill one every 30s)", got)
		}
		if got := testkit.IntHeader(t, w, "X-RateLimit-Limit"); got != 2 {
			t.Errorf("X-RateLimit-Limit = %d, want 2", got)
		}
		s.Clock.Advance(29 * time.Second)
		servertest.WantError(t, s.Do("GET", "/v1/pets", key, ""), 429, httpapi.CodeRateLimited)
		s.Clock.Advance(time.Second)
		if w := s.Do("GET", "/v1/pets", key, ""); w.Code != 200 {
			t.Fatalf("after 30s: %d", w.Code)
		}
	})
}

func TestBanAfterTooManyRequestsDuringAWait(t *testing.T) {
	t.Parallel()
	servertest.ForEachLimiter(t, servertest.Options{BanAfter: 10, BanFor: 15 * time.Minute}, func(t *testing.T, s *servertest.Server) {
		key := s.MustCreateKey("enterprise", domain.Limits{PerMinute: 1, PerDay: 1000})
		if w := s.Do("GET", "/v1/pets", key, ""); w.Code != 200 {
			t.Fatal(w.Code)
		}
		servertest.WantError(t, s.Do("GET", "/v1/pets", key, ""), 429, httpapi.CodeRateLimited) // the wait starts
		for i := range 10 {
			w := s.Do("GET", "/v1/pets", key, "")
			if w.Code != 429 || !strings.Contains(w.Body.String(), httpapi.CodeRateLimited) {
				t.Fatalf("request %d during the wait: %d %s, want 429 rate_limited", i+1, w.Code, w.Body)
			}
		}
		w := s.Do("GET", "/v1/pets", key, "")
		servertest.WantError(t, w, 429, httpapi.CodeTemporarilyBanned)
		if got := testkit.IntHeader(t, w, "Retry-After"); got != 900 {
			t.Errorf("Retry-After at the ban = %d, want 900", got)
		}

		s.Clock.Advance(10 * time.Minute) // the bucket is full again, the ban is not over
		w = s.Do("GET", "/v1/pets", key, "")
		servertest.WantError(t, w, 429, httpapi.CodeTemporarilyBanned)
		if got := testkit.IntHeader(t, w, "Retry-After"); got != 300 {
			t.Errorf("Retry-After = %d, want the rest of the ban, 300", got)
		}
		s.Clock.Advance(5 * time.Minute)
		if w := s.Do("GET", "/v1/pets", key, ""); w.Code != 200 {
			t.Fatalf("after the ban: %d %s", w.Code, w.Body)
		}
	})
}

func TestWaitingOutTheRetryResetsTheBanCount(t *testing.T) {
	t.Parallel()
	servertest.ForEachLimiter(t, servertest.Options{BanAfter: 3}, func(t *testing.T, s *servertest.Server) {
		key := s.MustCreateKey("enterprise", domain.Limits{PerMinute: 1, PerDay: 1000})
		s.Do("GET", "/v1/pets", key, "")
		for round := range 3 {
			// Each round: a refusal starts a wait, three more are tolerated.
			for range 4 {
				servertest.WantError(t, s.Do("GET", "/v1/pets", key, ""), 429, httpapi.CodeRateLimited)
			}
			s.Clock.Advance(60 * time.Second) // the wait passes: the count starts again
			if w := s.Do("GET", "/v1/pets", key, ""); w.Code != 200 {
				t.Fatalf("round %d: %d %s", round, w.Code, w.Body)
			}
		}
	})
}

func TestRateLimitHeadersOnEveryResponse(t *testing.T) {
	t.Parallel()
	servertest.ForEachLimiter(t, servertest.Options{}, func(t *testing.T, s *servertest.Server) {
		key := s.MustCreateKey("free")
		for _, tc := range []struct {
			name, method, target, key, body string
			status                          int
		}{
			{"list", "GET", "/v1/pets", key, "", 200},
			{"create", "POST", "/v1/pets", key, `{"name":"Rex","categoryId":1}`, 201},
			{"bad request", "GET", "/v1/pets?limit=0", key, "", 400},
			{"not found", "GET", "/v1/pets/999", key, "", 404},
			{"unknown path", "GET", "/v1/nothing", key, "", 404},
			{"method not allowed", "DELETE", "/v1/pets", key, "", 405},
			{"not implemented", "GET", "/v1/store/orders", key, "", 501},
			{"no key", "GET", "/v1/pets", "", "", 401},
			{"bad key", "GET", "/v1/pets", "psk_live_nope", "", 401},
		} {
			t.Run(tc.name, func(t *testing.T) {
				w := s.Do(tc.method, tc.target, tc.key, tc.body)
				if w.Code != tc.status {
					t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
				}
				for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
					testkit.IntHeader(t, w, h)
				}
				if w.Header().Get("RateLimit") == "" || w.Header().Get("RateLimit-Policy") == "" {
					t.Errorf("missing RateLimit or RateLimit-Policy")
				}
			})
		}
	})
}

func TestRequestsWithoutAValidKeyAreLimitedByAddress(t *testing.T) {
	t.Parallel()
	servertest.ForEachLimiter(t, servertest.Options{}, func(t *testing.T, s *servertest.Server) {
		for i := range 60 {
			w := s.From("198.51.100.7:4000", "/v1/pets", "psk_live_guess"+strconv.Itoa(i))
			servertest.WantError(t, w, 401, httpapi.CodeUnauthorized)
			if i == 0 && testkit.IntHeader(t, w, "X-RateLimit-Remaining") != 59 {
				t.Errorf("first 401 says Remaining %s, want 59", w.Header().Get("X-RateLimit-Remaining"))
			}
		}
		w := s.From("198.51.100.7:5000", "/v1/pets", "psk_live_guess")
		servertest.WantError(t, w, 429, httpapi.CodeRateLimited)
		if w.Header().Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
		// Another address is not affected, and a valid key from the throttled
		// address is counted against the key.
		servertest.WantError(t, s.From("198.51.100.8:4000", "/v1/pets", ""), 401, httpapi.CodeUnauthorized)
		key := s.MustCreateKey("free")
		// Made a moment before: the server, which the limited address does
		// not make look its key up, finds it in one reload.
		s.Clock.Advance(keyring.SharedRefreshAge)
		if w := s.From("198.51.100.7:4000", "/v1/pets", key); w.Code != 200 {
			t.Fatalf("valid key from a throttled address: %d", w.Code)
		}
	})
}

func TestForwardedForIsTrustedOnlyWithTrustProxy(t *testing.T) {
	t.Parallel()
	for _, trust := range []bool{false, true} {
		t.Run(fmt.Sprintf("trust-proxy=%v", trust), func(t *testing.T) {
			servertest.ForEachLimiter(t, servertest.Options{TrustProxy: trust}, func(t *testing.T, s *servertest.Server) {
				for i := range 60 {
					s.From("10.0.0.1:1", "/v1/pets", "", "X-Forwarded-For", "203.0.113."+strconv.Itoa(i%2)+", 10.0.0.1")
				}
				// All 60 came from the proxy's address; behind a trusted proxy they
				// were two clients of 30 each.
				w := s.From("10.0.0.1:1", "/v1/pets", "", "X-Forwarded-For", "203.0.113.0")
				if trust && w.Code != 401 {
					t.Fatalf("trusted proxy: %d, want 401 (client 203.0.113.0 made only 30 requests)", w.Code)
				}
				if !trust && w.Code != 429 {
					t.Fatalf("untrusted: %d, want 429 (the header is ignored, the peer made 60)", w.Code)
				}
			})
		})
	}
}

func TestRestartKeepsTheDaysCount(t *testing.T) {
	t.Parallel()
	servertest.ForEachLimiter(t, servertest.Options{}, func(t *testing.T, s *servertest.Server) {
		key := s.MustCreateKey("enterprise", domain.Limits{PerMinute: 1000, PerDay: 10})
		for range 7 {
			s.Do("GET", "/v1/pets", key, "")
		}
		if err := s.Limiter().Flush(context.Background(), s.Store().AddUsage); err != nil {
			t.Fatal(err)
		}
		s.RestartLimiter() // a new limiter on the same database is a restarted server
		w := s.Do("GET", "/v1/pets", key, "")
		if got := testkit.IntHeader(t, w, "X-RateLimit-Remaining"); got != 2 {
			t.Fatalf("after a restart Remaining = %d, want 2 (8 of 10 used today)", got)
		}
	})
}

func TestForgottenCallerKeepsItsDailyCount(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{})
	key := s.MustCreateKey("enterprise", domain.Limits{PerMinute: 1000, PerDay: 10})
	heldByTheKeyring(t, s)
	for range 3 {
		s.Do("GET", "/v1/pets", key, "")
	}
	s.Clock.Advance(time.Minute)
	if n := s.Limiter().Sweep(); n != 0 {
		t.Fatalf("swept %d callers with unflushed usage, want 0", n)
	}
	s.Limiter().Flush(context.Background(), s.Store().AddUsage)
	if n := s.Limiter().Sweep(); n != 1 {
		t.Fatalf("swept %d, want the idle key forgotten", n)
	}
	w := s.Do("GET", "/v1/pets", key, "")
	if got := testkit.IntHeader(t, w, "X-RateLimit-Remaining"); got != 6 {
		t.Fatalf("Remaining = %d, want 6", got)
	}
}

func TestIdleAddressesAreForgotten(t *testing.T) {
	t.Parallel()
	clock := servertest.NewClock()
	l := limits.NewLocal(clock.Now, 10, time.Minute, nil)
	ctx := context.Background()
	var peak int
	for i := range 100_000 {
		addr := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		if _, err := l.Allow(ctx, domain.CallerID{Addr: addr}, domain.AnonymousLimits); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			clock.Advance(time.Second) // 1,000 new addresses a second
			l.Sweep()
		}
		peak = max(peak, limits.Callers(l))
	}
	clock.Advance(time.Second)
	l.Sweep()
	if peak > 2000 {
		t.Errorf("peak callers kept = %d, want at most 2,000 (one second's worth)", peak)
	}
	if limits.Callers(l) != 0 {
		t.Errorf("%d callers kept after all went idle, want 0", limits.Callers(l))
	}
}

// BenchmarkDecision measures one rate-limit decision as the limit
// middleware asks for it: in process; on Redis for 10,000 keys in turn, each
// too quiet for a lease here (a script run each); and on Redis for one hot
// key, leased (mostly no round trip). The Redis ones need the tests'
// Redis (testRedisURL).
func BenchmarkDecision(b *testing.B) {
	noUsage := func(context.Context, int64, string) (int64, error) { return 0, nil }
	b.Run("in-process", func(b *testing.B) {
		l := limits.NewLocal(servertest.NewClock().Now, 10, time.Minute, noUsage)
		benchmarkAllow(b, l, domain.Limits{PerMinute: 1 << 40, PerDay: 1 << 40}, 10_000)
	})
	for _, tc := range []struct {
		name string
		keys int
	}{{"redis-not-leased", 10_000}, {"redis-leased", 1}} {
		b.Run(tc.name, func(b *testing.B) {
			r, err := limits.NewRedis(context.Background(), limits.RedisConfig{
				URL: testkit.RedisURL(b), Prefix: testkit.RedisPrefix(b), BanAfter: 10, BanFor: time.Minute, Now: time.Now,
				Usage: noUsage, DBTimeout: 3 * time.Second, Logger: testkit.DiscardLogger(),
			})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			benchmarkAllow(b, r, domain.Limits{PerMinute: 1 << 30, PerDay: 1 << 40}, tc.keys)
			b.StopTimer()
			if limits.Down(r) {
				b.Fatal("Redis went away during the benchmark")
			}
		})
	}
}

// benchmarkAllow measures l.allow, as the limit middleware calls it, for
// keys keys in turn, each seen once before, under limits they never reach.
func benchmarkAllow(b *testing.B, l limits.Limiter, lim domain.Limits, keys int) {
	ctx := context.Background()
	for i := range keys {
		if _, err := l.Allow(ctx, domain.CallerID{KeyID: int64(i + 1)}, lim); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64 // the goroutines take the keys in turn, none two at once
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			d, err := l.Allow(ctx, domain.CallerID{KeyID: i%int64(keys) + 1}, lim)
			if err != nil || !d.Allowed {
				b.Fatalf("%+v, %v", d, err)
			}
		}
	})
}

// BenchmarkLimiterMemory reports the heap held by the limiter after 100,000
// distinct addresses, before and after the idle ones are swept.
func BenchmarkLimiterMemory(b *testing.B) {
	for range b.N {
		clock := servertest.NewClock()
		l := limits.NewLocal(clock.Now, 10, time.Minute, nil)
		before := heapInUse()
		for i := range 100_000 {
			addr := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
			l.Allow(context.Background(), domain.CallerID{Addr: addr}, domain.AnonymousLimits)
		}
		full := heapInUse()
		clock.Advance(2 * time.Second)
		l.Sweep()
		swept := heapInUse()
		b.ReportMetric(float64(full-before)/(1<<20), "MiB-100k-callers")
		b.ReportMetric(float64(swept-before)/(1<<20), "MiB-after-sweep")
		runtime.KeepAlive(l)
	}
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// A flush (limiter lock, then each caller's) running while a request crosses
// UTC midnight (a caller's lock) must not deadlock the two.
// dayStepLimiter is a limiter whose clock stands at start plus the days
// counted in days, with limits no test reaches.
func dayStepLimiter(start time.Time) (l *limits.Local, days *atomic.Int64, lim domain.Limits) {
	days = new(atomic.Int64)
	now := func() time.Time { return start.AddDate(0, 0, int(days.Load())) }
	l = limits.NewLocal(now, 10, time.Minute, func(context.Context, int64, string) (int64, error) { return 0, nil })
	return l, days, domain.Limits{PerMinute: 1 << 30, PerDay: 1 << 30}
}

// TestMidnightWhileFlushingDoesNotDeadlock: flushes racing the requests
// across many midnights neither deadlock nor lose, double or misdate a
// count: each day's two requests are stored once, under that day.
func TestMidnightWhileFlushingDoesNotDeadlock(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, time.March, 10, 23, 59, 59, 0, time.UTC)
	l, days, lim := dayStepLimiter(start)
	var mu sync.Mutex
	perDay := make(map[string]int64)
	stored := func(_ context.Context, counts []domain.UsageCount) error {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range counts {
			perDay[c.Day] += c.Count
		}
		return nil
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		var allowed atomic.Bool
		var wg sync.WaitGroup
		wg.Go(func() {
			for !allowed.Load() {
				l.Flush(context.Background(), stored)
			}
		})
		// Enough midnights to hit the window reliably (the old lock order
		// deadlocked within some 100,000 of them).
		for i := range 300_000 {
			l.Allow(context.Background(), domain.CallerID{KeyID: 1}, lim)
			if i%2 == 1 {
				days.Add(1)
			}
		}
		allowed.Store(true)
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // seconds normally, even under -race
		t.Fatal("allow and flush deadlocked")
	}
	if err := l.Flush(context.Background(), stored); err != nil {
		t.Fatal(err)
	}
	if len(perDay) != 150_000 {
		t.Errorf("counts stored under %d days, want 150000", len(perDay))
	}
	for d := range 150_000 {
		if day := start.AddDate(0, 0, d).Format(time.DateOnly); perDay[day] != 2 {
			t.Fatalf("%s: %d requests stored, want its 2", day, perDay[day])
		}
	}
}

// heldByTheKeyring reloads s's keys, as the server does within a second,
// for a test that counts the limiter's callers: a key the keyring does not
// hold yet has its sender's address asked about (is it limited?), one more
// caller for the sweep.
func heldByTheKeyring(t *testing.T, s *servertest.Server) {
	t.Helper()
	if err := s.Keys().Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Counts whose write failed stay with their caller, which is therefore not
// forgotten: the next look-up must not start from a lower stored count.
func TestFailedUsageWriteLosesNoCount(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{})
	key := s.MustCreateKey("enterprise", domain.Limits{PerMinute: 1000, PerDay: 10})
	heldByTheKeyring(t, s)
	for range 4 {
		s.Do("GET", "/v1/pets", key, "")
	}
	diskFull := func(context.Context, []domain.UsageCount) error { return errors.New("disk full") }
	if err := s.Limiter().Flush(context.Background(), diskFull); err == nil {
		t.Fatal("flush hid the failed write")
	}
	s.Clock.Advance(time.Hour)
	if n := s.Limiter().Sweep(); n != 0 {
		t.Fatalf("swept %d callers with unwritten counts", n)
	}
	if w := s.Do("GET", "/v1/pets", key, ""); testkit.IntHeader(t, w, "X-RateLimit-Remaining") != 5 {
		t.Fatalf("Remaining = %s, want 5 (5 of 10 used)", w.Header().Get("X-RateLimit-Remaining"))
	}
	if err := s.Limiter().Flush(context.Background(), s.Store().AddUsage); err != nil {
		t.Fatal(err)
	}
	s.Clock.Advance(time.Hour)
	if n := s.Limiter().Sweep(); n != 1 {
		t.Fatalf("swept %d, want the idle key forgotten once its counts are stored", n)
	}
	if w := s.Do("GET", "/v1/pets", key, ""); testkit.IntHeader(t, w, "X-RateLimit-Remaining") != 4 {
		t.Fatalf("after reloading from the database Remaining = %s, want 4", w.Header().Get("X-RateLimit-Remaining"))
	}
}

// A flush whose write was stored but whose answer was lost (a commit the
// connection or the deadline cut off) is sent again as it was, and the
// store adds it once: each request is counted once, in the day's count
// and in the usage history, with limits in process or in Redis.
func TestAFlushWhoseAnswerWasLostCountsEachRequestOnce(t *testing.T) {
	t.Parallel()
	servertest.ForEachLimiter(t, servertest.Options{}, func(t *testing.T, s *servertest.Server) {
		ctx := context.Background()
		key := s.MustCreateKey("enterprise", domain.Limits{PerMinute: 1000, PerDay: 1000})
		heldByTheKeyring(t, s)
		hash := domain.HashKey(key)
		k, ok, err := s.Store().KeyByHash(ctx, hash[:])
		if err != nil || !ok {
			t.Fatalf("the key: %v %v", ok, err)
		}
		id := k.BudgetID
		lost := errors.New("the answer was lost")
		for round := range 3 {
			for range 4 {
				s.Do("GET", "/v1/pets", key, "")
			}
			addUsage, addHistory := s.Store().AddUsage, s.Store().AddUsageHistory
			if round < 2 {
				addUsage = func(ctx context.Context, counts []domain.UsageCount) error {
					return errors.Join(s.Store().AddUsage(ctx, counts), lost)
				}
				addHistory = func(ctx context.Context, rows []domain.UsageDay) error {
					return errors.Join(s.Store().AddUsageHistory(ctx, rows), lost)
				}
			}
			errUsage, errHistory := s.Limiter().Flush(ctx, addUsage), s.Keys().FlushUsage(ctx, addHistory)
			if wantErr := round < 2; (errUsage != nil) != wantErr || (errHistory != nil) != wantErr {
				t.Fatalf("round %d: flushes gave %v and %v", round, errUsage, errHistory)
			}
		}
		day := limits.DayString(limits.UnixDay(s.Clock.Now()))
		if n, err := s.Store().Usage(ctx, id, day); err != nil || n != 12 {
			t.Errorf("the day's stored count is %d (%v), want the 12 requests once", n, err)
		}
		days, err := s.Store().UsageHistory(ctx, id, day)
		if err != nil || len(days) != 1 || days[0].Allowed != 12 {
			t.Errorf("the usage history holds %+v (%v), want the 12 requests once", days, err)
		}
	})
}

// While the database is away, every flush sends the one batch whose
// outcome is not known, as it was, and the requests made meanwhile wait
// merged rather than as a batch a flush: an outage of many flushes holds
// one batch. Once the database answers, that batch is written, then the
// rest as the next, and each request is counted once.
func TestALongOutageHoldsOneUsageBatch(t *testing.T) {
	t.Parallel()
	servertest.ForEachLimiter(t, servertest.Options{}, func(t *testing.T, s *servertest.Server) {
		ctx := context.Background()
		key := s.MustCreateKey("enterprise", domain.Limits{PerMinute: 1000, PerDay: 1000})
		heldByTheKeyring(t, s)
		away := errors.New("the database is away")
		var usageSent [][]domain.UsageCount
		var historySent [][]domain.UsageDay
		for range 20 {
			for range 3 {
				s.Do("GET", "/v1/pets", key, "")
			}
			s.Limiter().Flush(ctx, func(_ context.Context, counts []domain.UsageCount) error {
				usageSent = append(usageSent, slices.Clone(counts))
				return away
			})
			s.Keys().FlushUsage(ctx, func(_ context.Context, rows []domain.UsageDay) error {
				historySent = append(historySent, slices.Clone(rows))
				return away
			})
		}
		for i := range usageSent {
			if !slices.Equal(usageSent[i], usageSent[0]) || !slices.Equal(historySent[i], historySent[0]) {
				t.Fatalf("flush %d sent %+v and %+v, want the first batch again: %+v and %+v",
					i, usageSent[i], historySent[i], usageSent[0], historySent[0])
			}
		}
		usageSent, historySent = nil, nil
		if err := s.Limiter().Flush(ctx, func(ctx context.Context, counts []domain.UsageCount) error {
			usageSent = append(usageSent, counts)
			return s.Store().AddUsage(ctx, counts)
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Keys().FlushUsage(ctx, func(ctx context.Context, rows []domain.UsageDay) error {
			historySent = append(historySent, rows)
			return s.Store().AddUsageHistory(ctx, rows)
		}); err != nil {
			t.Fatal(err)
		}
		if len(usageSent) != 2 || usageSent[1][0].Batch.N != usageSent[0][0].Batch.N+1 ||
			len(historySent) != 2 || historySent[1][0].Batch.N != historySent[0][0].Batch.N+1 {
			t.Fatalf("once back, the flushes sent %+v and %+v, want the waiting batch, then the next", usageSent, historySent)
		}
		hash := domain.HashKey(key)
		k, _, _ := s.Store().KeyByHash(ctx, hash[:])
		day := limits.DayString(limits.UnixDay(s.Clock.Now()))
		if n, err := s.Store().Usage(ctx, k.BudgetID, day); err != nil || n != 60 {
			t.Errorf("the day's stored count is %d (%v), want the 60 requests once", n, err)
		}
		if days, err := s.Store().UsageHistory(ctx, k.BudgetID, day); err != nil || len(days) != 1 || days[0].Allowed != 60 {
			t.Errorf("the usage history holds %+v (%v), want the 60 requests once", days, err)
		}
	})
}

func TestResetDuringABanIsRoundedUp(t *testing.T) {
	t.Parallel()
	servertest.ForEachLimiter(t, servertest.Options{BanAfter: 1, BanFor: 5 * time.Second}, func(t *testing.T, s *servertest.Server) {
		key := s.MustCreateKey("enterprise", domain.Limits{PerMinute: 1, PerDay: 1000})
		s.Do("GET", "/v1/pets", key, "")
		s.Clock.Advance(300 * time.Millisecond)
		for range 2 {
			servertest.WantError(t, s.Do("GET", "/v1/pets", key, ""), 429, httpapi.CodeRateLimited)
		}
		w := s.Do("GET", "/v1/pets", key, "")
		servertest.WantError(t, w, 429, httpapi.CodeTemporarilyBanned)
		banEnds := s.Clock.Now().Add(5 * time.Second)
		if got := testkit.IntHeader(t, w, "X-RateLimit-Reset"); got < banEnds.Unix()+1 || got != domain.CeilSecond(banEnds).Unix() {
			t.Fatalf("X-RateLimit-Reset = %d, ban ends at %v: want %d", got, banEnds, domain.CeilSecond(banEnds).Unix())
		}
	})
}

// A flush takes off exactly what it wrote: requests counted while the
// write runs stay for the next one, and a caller holding many days is
// flushed whole in one pass.
func TestFlushTakesOffWhatItWrote(t *testing.T) {
	t.Parallel()
	l, days, lim := dayStepLimiter(time.Date(2026, time.March, 10, 12, 0, 0, 0, time.UTC))
	key := domain.CallerID{KeyID: 1}
	for range 10_000 { // a request a day for 10,000 days, none written yet
		l.Allow(context.Background(), key, lim)
		days.Add(1)
	}
	l.Allow(context.Background(), key, lim) // today's first

	var stored []domain.UsageCount
	err := l.Flush(context.Background(), func(_ context.Context, counts []domain.UsageCount) error {
		stored = append(stored, counts...)
		l.Allow(context.Background(), key, lim) // counted while the write runs
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, u := range stored {
		total += u.Count
	}
	if len(stored) != 10_001 || total != 10_001 {
		t.Fatalf("the first flush wrote %d days, %d requests; want 10001 and 10001", len(stored), total)
	}
	stored = nil
	if err := l.Flush(context.Background(), func(_ context.Context, counts []domain.UsageCount) error {
		stored = append(stored, counts...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(stored) != 1 || stored[0].Count != 1 {
		t.Fatalf("the second flush wrote %+v; want the one request counted during the first", stored)
	}
}
