package keyring_test

// Keys over their lifetime (docs/production.md, "Keys over their lifetime"): expiry, rolls with and without an
// overlap, the budget a roll's keys share, last use written in batches, and
// GET /v1/rate_limit. Each runs on SQLite and on PostgreSQL, and what
// touches the limits with either limiter.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"petstore/internal/servertest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/keyring"
	"petstore/internal/manage"
	"petstore/internal/store"
	"petstore/internal/testkit"

	"github.com/jackc/pgx/v5"
)

const expiredMessage = "the API key has expired"

// mustCreateKeyOf makes a key of plan and returns it with its token.
func mustCreateKeyOf(s *servertest.Server, plan string) (domain.Key, string) {
	s.T.Helper()
	return s.MustCreate(s.KeyTerms(plan))
}

func tryRoll(s *servertest.Server, id int64, overlap time.Duration) (old, rolled domain.Key, token string, err error) {
	ctx := context.Background()
	token = domain.NewKeyToken(s.Env)
	hash := domain.HashKey(token)
	old, rolled, err = s.Store().RollKey(ctx, id, hash[:], overlap, servertest.Actor)
	if err != nil {
		return old, rolled, "", err
	}
	if err := s.Keys().Refresh(ctx); err != nil {
		s.T.Fatal(err)
	}
	return old, rolled, token, nil
}

// wantExpired checks a 401 for an expired key.
func wantExpired(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	servertest.WantError(t, w, http.StatusUnauthorized, httpapi.CodeUnauthorized)
	var e httpapi.Error
	if err := json.Unmarshal(w.Body.Bytes(), &struct {
		Message *string `json:"message"`
	}{&e.Message}); err != nil {
		t.Fatal(err)
	}
	if e.Message != expiredMessage {
		t.Errorf("message %q, want %q", e.Message, expiredMessage)
	}
	if got := w.Header().Get("WWW-Authenticate"); !strings.Contains(got, `error="invalid_token"`) {
		t.Errorf("WWW-Authenticate: %q, want an invalid_token challenge", got)
	}
}

func TestExpiredKeyIsRefusedFromItsExpiry(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts)
		expires := s.Clock.Now().Add(time.Hour)
		// One key the keyring has loaded, one it finds in the database on
		// its first use.
		_, loaded := s.MustCreateKeyExpiring(expires)
		if err := s.Keys().Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, found := s.MustCreateKeyExpiring(expires)

		s.Clock.Advance(time.Hour - time.Second)
		for _, key := range []string{loaded, found} {
			testkit.WantStatus(t, s.Do("GET", "/v1/pets", key, ""), http.StatusOK, "one second before the expiry")
		}
		s.Clock.Advance(time.Second)
		for _, key := range []string{loaded, found} {
			wantExpired(t, s.Do("GET", "/v1/pets", key, ""))
		}
		s.Clock.Advance(time.Second)
		for _, key := range []string{loaded, found} {
			wantExpired(t, s.Do("GET", "/v1/rate_limit", key, ""))
		}
		// Refused like any key without a valid one: counted by address.
		if w := s.Do("GET", "/v1/pets", loaded, ""); w.Header().Get("X-RateLimit-Limit") != "60" {
			t.Errorf("a 401 for an expired key carries X-RateLimit-Limit %q, want the address limit 60", w.Header().Get("X-RateLimit-Limit"))
		}
	})
}

func TestRollWithAnOverlap(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts)
		k, oldToken := mustCreateKeyOf(s, "pro")
		testkit.WantStatus(t, s.Do("GET", "/v1/pets", oldToken, ""), http.StatusOK, "the key before the roll")

		old, rolled, newToken := s.Roll(k.ID, time.Hour)
		if want := s.Clock.Now().Add(time.Hour); !old.ExpiresAt.Equal(want) || old.RolledTo != rolled.ID {
			t.Errorf("old key after the roll: expires %v, rolled to %d; want %v and %d", old.ExpiresAt, old.RolledTo, want, rolled.ID)
		}
		if rolled.Plan != "pro" || rolled.PerMinute != 300 || rolled.PerDay != 10_000 || rolled.Name != k.Name ||
			rolled.Env != k.Env || !rolled.ExpiresAt.IsZero() || rolled.BudgetID != k.ID {
			t.Errorf("new key %+v, want the old one's plan, figures, name, environment and no expiry, spending key %d's budget", rolled, k.ID)
		}
		for _, step := range []time.Duration{0, 30 * time.Minute, 30*time.Minute - time.Second} {
			s.Clock.Advance(step)
			testkit.WantStatus(t, s.Do("GET", "/v1/pets", oldToken, ""), http.StatusOK, "the old key during the overlap")
			testkit.WantStatus(t, s.Do("GET", "/v1/pets", newToken, ""), http.StatusOK, "the new key during the overlap")
		}
		s.Clock.Advance(time.Second)
		wantExpired(t, s.Do("GET", "/v1/pets", oldToken, ""))
		testkit.WantStatus(t, s.Do("GET", "/v1/pets", newToken, ""), http.StatusOK, "the new key after the overlap")
		s.Clock.Advance(24 * time.Hour)
		wantExpired(t, s.Do("GET", "/v1/pets", oldToken, ""))
		testkit.WantStatus(t, s.Do("GET", "/v1/pets", newToken, ""), http.StatusOK, "the new key a day later")
	})
}

func TestRollWithoutOverlapStopsTheOldKeyAtOnce(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts)
		s.Clock.Advance(700 * time.Millisecond) // not on a whole second
		k, oldToken := mustCreateKeyOf(s, "free")
		testkit.WantStatus(t, s.Do("GET", "/v1/pets", oldToken, ""), http.StatusOK, "the key before the roll")
		_, _, newToken := s.Roll(k.ID, 0)
		wantExpired(t, s.Do("GET", "/v1/pets", oldToken, ""))
		testkit.WantStatus(t, s.Do("GET", "/v1/pets", newToken, ""), http.StatusOK, "the new key")
	})
}

func TestRollKeepsAnEarlierExpiryAndChainsOneBudget(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts)
		expires := s.Clock.Now().Add(30 * time.Minute)
		first, _ := s.MustCreateKeyExpiring(expires)
		old, second, _ := s.Roll(first.ID, 24*time.Hour)
		if !old.ExpiresAt.Equal(expires) || !second.ExpiresAt.Equal(expires) {
			t.Errorf("old key expires %v and new key %v, want both at the old key's own expiry %v", old.ExpiresAt, second.ExpiresAt, expires)
		}
		_, third, _ := s.Roll(second.ID, time.Hour)
		if second.BudgetID != first.ID || third.BudgetID != first.ID {
			t.Errorf("budgets %d and %d, want both the first key's %d", second.BudgetID, third.BudgetID, first.ID)
		}
		keys, err := s.Store().Keys(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if k.BudgetID != first.ID {
				t.Errorf("stored key %d spends budget %d, want %d", k.ID, k.BudgetID, first.ID)
			}
		}
	})
}

func TestRollRefusesKeysThatCannotBeRolled(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts)
		ctx := context.Background()
		rolled, _ := mustCreateKeyOf(s, "free")
		s.Roll(rolled.ID, time.Hour)
		revoked, _ := mustCreateKeyOf(s, "free")
		if _, err := s.Store().RevokeKey(ctx, revoked.ID, servertest.Actor); err != nil {
			t.Fatal(err)
		}
		expired, _ := s.MustCreateKeyExpiring(s.Clock.Now().Add(time.Minute))
		s.Clock.Advance(time.Minute)
		before, err := s.Store().Keys(ctx)
		if err != nil {
			t.Fatal(err)
		}

		for _, tt := range []struct {
			name     string
			id       int64
			wantKind domain.Kind
			mentions string
		}{
			{"a key rolled already", rolled.ID, domain.KindInvalid, "rolled to key"},
			{"a revoked key", revoked.ID, domain.KindInvalid, "revoked"},
			{"an expired key", expired.ID, domain.KindInvalid, "expired"},
			{"an unknown id", 999, domain.KindNotFound, "999"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				_, _, _, err := tryRoll(s, tt.id, time.Hour)
				var e *domain.Error
				if !errors.As(err, &e) || e.Kind != tt.wantKind || !strings.Contains(e.Message, tt.mentions) {
					t.Errorf("roll: %v, want a failure of kind %d mentioning %q", err, tt.wantKind, tt.mentions)
				}
			})
		}
		if after, err := s.Store().Keys(ctx); err != nil || len(after) != len(before) {
			t.Errorf("%d keys after the refused rolls (%v), want %d: a refused roll makes no key", len(after), err, len(before))
		}
	})
}

func TestRolledKeysShareOneBudget(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		servertest.ForEachLimiter(t, opts, func(t *testing.T, s *servertest.Server) {
			k, oldToken := mustCreateKeyOf(s, "free")
			for i := range 30 {
				testkit.WantStatus(t, s.Do("GET", "/v1/pets", oldToken, ""), http.StatusOK, "old key, request "+strconv.Itoa(i+1))
			}
			_, _, newToken := s.Roll(k.ID, time.Hour)
			for i := range 30 {
				w := s.Do("GET", "/v1/pets", newToken, "")
				testkit.WantStatus(t, w, http.StatusOK, "new key, request "+strconv.Itoa(31+i))
				if got, want := testkit.IntHeader(t, w, "X-RateLimit-Remaining"), int64(29-i); got != want {
					t.Fatalf("new key, request %d: X-RateLimit-Remaining %d, want %d (the old key's 30 spent)", 31+i, got, want)
				}
			}
			for _, token := range []string{newToken, oldToken} {
				servertest.WantError(t, s.Do("GET", "/v1/pets", token, ""), http.StatusTooManyRequests, httpapi.CodeRateLimited)
			}
			// The day's count is stored under the budget's id, once.
			if err := s.FlushLimiterUsage(context.Background()); err != nil {
				t.Fatal(err)
			}
			day := s.Clock.Now().UTC().Format(time.DateOnly)
			if n, err := s.Store().Usage(context.Background(), k.ID, day); err != nil || n != 60 {
				t.Errorf("stored usage of key %d's budget: %d (%v), want 60", k.ID, n, err)
			}
			// One ban for both: 10 more refusals during the wait, then the ban.
			for range 9 {
				s.Do("GET", "/v1/pets", oldToken, "")
			}
			s.Do("GET", "/v1/pets", newToken, "")
			servertest.WantError(t, s.Do("GET", "/v1/pets", oldToken, ""), http.StatusTooManyRequests, httpapi.CodeTemporarilyBanned)
			servertest.WantError(t, s.Do("GET", "/v1/pets", newToken, ""), http.StatusTooManyRequests, httpapi.CodeTemporarilyBanned)
		})
	})
}

// writeCounter is a store that counts the calls that write.
type writeCounter struct {
	store.Storage
	mu     sync.Mutex
	writes map[string]int
	uses   [][]domain.LastUse
}

func (c *writeCounter) count(name string) {
	c.mu.Lock()
	c.writes[name]++
	c.mu.Unlock()
}

func (c *writeCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.writes {
		n += v
	}
	return n
}

func (c *writeCounter) SetLastUsed(ctx context.Context, uses []domain.LastUse) error {
	c.count("SetLastUsed")
	c.mu.Lock()
	c.uses = append(c.uses, uses)
	c.mu.Unlock()
	return c.Storage.SetLastUsed(ctx, uses)
}

func (c *writeCounter) AddUsage(ctx context.Context, counts []domain.UsageCount) error {
	c.count("AddUsage")
	return c.Storage.AddUsage(ctx, counts)
}

func (c *writeCounter) CreatePets(ctx context.Context, batch []domain.PetInsert) error {
	c.count("CreatePets")
	return c.Storage.CreatePets(ctx, batch)
}

func TestLastUsedIsWrittenInBatchesNeverPerRequest(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		counter := &writeCounter{writes: make(map[string]int)}
		opts.WrapStore = func(st store.Storage) store.Storage { counter.Storage = st; return counter }
		s := servertest.Start(t, opts)
		ctx := context.Background()
		used, token := mustCreateKeyOf(s, "pro")
		idle, _ := mustCreateKeyOf(s, "pro")
		lastUsed := func(id int64) time.Time {
			t.Helper()
			keys, err := s.Store().Keys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if k.ID == id {
					return k.LastUsedAt
				}
			}
			t.Fatalf("no key %d", id)
			return time.Time{}
		}
		flush := func() {
			t.Helper()
			if err := s.Keys().FlushLastUsed(ctx); err != nil {
				t.Fatal(err)
			}
		}

		s.Clock.Advance(25 * time.Second) // 12:00:25
		for range 100 {
			testkit.WantStatus(t, s.Do("GET", "/v1/pets", token, ""), http.StatusOK, "a request")
		}
		if n := counter.total(); n != 0 {
			t.Errorf("100 requests made %d store writes (%v), want none before a flush", n, counter.writes)
		}
		if got := lastUsed(used.ID); !got.IsZero() {
			t.Errorf("last used %v before a flush, want never", got)
		}

		flush()
		minute := time.Date(2026, time.March, 10, 12, 0, 0, 0, time.UTC)
		if got := lastUsed(used.ID); !got.Equal(minute) {
			t.Errorf("last used %v after the flush, want the minute %v", got, minute)
		}
		if got := lastUsed(idle.ID); !got.IsZero() {
			t.Errorf("a key never used was last used %v, want never", got)
		}
		if len(counter.uses) != 1 || len(counter.uses[0]) != 1 {
			t.Errorf("the flush wrote %v, want one write of one key", counter.uses)
		}

		// Used again in the same minute: nothing to write.
		s.Clock.Advance(20 * time.Second)
		s.Do("GET", "/v1/pets", token, "")
		flush()
		flush()
		if n := counter.writes["SetLastUsed"]; n != 1 {
			t.Errorf("%d writes of last use, want still 1: the minute has not changed", n)
		}

		// Not used for a minute: nothing to write either.
		s.Clock.Advance(time.Minute)
		flush()
		if n := counter.writes["SetLastUsed"]; n != 1 {
			t.Errorf("%d writes of last use, want still 1: the key was not used", n)
		}

		s.Clock.Advance(time.Minute) // 12:02:45
		s.Do("GET", "/v1/pets", token, "")
		flush()
		if got, want := lastUsed(used.ID), minute.Add(2*time.Minute); !got.Equal(want) {
			t.Errorf("last used %v, want %v", got, want)
		}
		if n := counter.writes["SetLastUsed"]; n != 2 {
			t.Errorf("%d writes of last use, want 2", n)
		}

		// A reload of the keys (a key made elsewhere) loses no use.
		s.Do("GET", "/v1/pets", token, "")
		mustCreateKeyOf(s, "free")
		if err := s.Keys().Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		s.Clock.Advance(time.Minute)
		s.Do("GET", "/v1/pets", token, "")
		flush()
		if got, want := lastUsed(used.ID), minute.Add(3*time.Minute); !got.Equal(want) {
			t.Errorf("last used after a reload %v, want %v", got, want)
		}
	})
}

// A store that cannot write keeps the note: the next flush writes it.
type failingLastUse struct {
	store.Storage
	fail bool
}

func (f *failingLastUse) SetLastUsed(ctx context.Context, uses []domain.LastUse) error {
	if f.fail {
		return errors.New("disk full")
	}
	return f.Storage.SetLastUsed(ctx, uses)
}

func TestFailedLastUseWriteIsRetried(t *testing.T) {
	t.Parallel()
	failing := &failingLastUse{fail: true}
	s := servertest.Start(t, servertest.Options{WrapStore: func(st store.Storage) store.Storage { failing.Storage = st; return failing }})
	k, token := mustCreateKeyOf(s, "free")
	s.Do("GET", "/v1/pets", token, "")
	if err := s.Keys().FlushLastUsed(context.Background()); err == nil {
		t.Fatal("flush with a failing store: no error")
	}
	failing.fail = false
	if err := s.Keys().FlushLastUsed(context.Background()); err != nil {
		t.Fatal(err)
	}
	keys, err := s.Store().Keys(context.Background())
	if err != nil || len(keys) != 1 || keys[0].ID != k.ID || !keys[0].LastUsedAt.Equal(s.Clock.Now()) {
		t.Errorf("keys %+v (%v), want key %d last used at %v", keys, err, k.ID, s.Clock.Now())
	}
}

func TestLookingUpAKeyAllocatesNothing(t *testing.T) {
	s := servertest.Start(t, servertest.Options{})
	ctx := context.Background()
	_, plain := mustCreateKeyOf(s, "free")
	_, expiring := s.MustCreateKeyExpiring(s.Clock.Now().Add(time.Hour))
	if err := s.Keys().Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{plain, expiring} {
		allocs := testing.AllocsPerRun(100, func() {
			if k, problem, err := s.Keys().Lookup(ctx, token, nil); k == nil {
				t.Fatalf("lookup: %s %v", problem, err)
			}
		})
		if allocs != 0 {
			t.Errorf("a look-up allocates %.0f times, want 0", allocs)
		}
	}
}

// rateLimit asks GET /v1/rate_limit and checks that its headers describe
// the window of its body with fewer requests left.
func rateLimit(s *servertest.Server, t *testing.T, key string) testkit.RateLimitBody {
	t.Helper()
	body, _ := rateLimitAnswer(s, t, key)
	return body
}

func rateLimitAnswer(s *servertest.Server, t *testing.T, key string) (testkit.RateLimitBody, *httptest.ResponseRecorder) {
	t.Helper()
	w := s.Do("GET", "/v1/rate_limit", key, "")
	return testkit.RateLimitOf(t, w), w
}

func TestRateLimitEndpointSpendsNothingAndAgreesWithTheHeaders(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		servertest.ForEachLimiter(t, opts, func(t *testing.T, s *servertest.Server) {
			_, key := mustCreateKeyOf(s, "free")
			midnight := time.Date(2026, time.March, 11, 0, 0, 0, 0, time.UTC).Unix()

			fresh := rateLimit(s, t, key)
			want := testkit.RateLimitBody{Plan: "free", Scopes: "pets:read,pets:write", Minute: testkit.RateLimitWindow{Limit: 60, Remaining: 60, Reset: s.Clock.Now().Unix()}, Day: testkit.RateLimitWindow{Limit: 1000, Remaining: 1000, Reset: midnight}}
			if fresh != want {
				t.Errorf("a fresh key: %+v, want %+v", fresh, want)
			}

			before := s.Do("GET", "/v1/pets", key, "")
			for range 5 {
				body, w := rateLimitAnswer(s, t, key)
				if body.Minute.Remaining != testkit.IntHeader(t, before, "X-RateLimit-Remaining") ||
					body.Minute.Reset != testkit.IntHeader(t, before, "X-RateLimit-Reset") || body.Day.Remaining != 999 {
					t.Fatalf("after one request that said Remaining %s, Reset %s: %+v", before.Header().Get("X-RateLimit-Remaining"),
						before.Header().Get("X-RateLimit-Reset"), body)
				}
				if w.Header().Get("RateLimit-Policy") != before.Header().Get("RateLimit-Policy") {
					t.Errorf("RateLimit-Policy %q, the request before said %q", w.Header().Get("RateLimit-Policy"), before.Header().Get("RateLimit-Policy"))
				}
			}
			if after := s.Do("GET", "/v1/pets", key, ""); testkit.IntHeader(t, after, "X-RateLimit-Remaining") != 58 {
				t.Errorf("the request after five GET /v1/rate_limit: Remaining %d, want 58", testkit.IntHeader(t, after, "X-RateLimit-Remaining"))
			}

			// Half a second later half a token is back: not yet a request.
			s.Clock.Advance(500 * time.Millisecond)
			if body := rateLimit(s, t, key); body.Minute.Remaining != 58 || body.Minute.Reset != s.Clock.Now().Add(2*time.Second).Unix() {
				t.Errorf("half a second later: %+v, want 58 left, full again in 1.5 s rounded up", body.Minute)
			}

			// Over the limit: still answered, and it counts towards no ban.
			for range 58 {
				s.Do("GET", "/v1/pets", key, "")
			}
			servertest.WantError(t, s.Do("GET", "/v1/pets", key, ""), http.StatusTooManyRequests, httpapi.CodeRateLimited)
			for range 20 {
				if body, w := rateLimitAnswer(s, t, key); body.Minute.Remaining != 0 || w.Header().Get("Retry-After") != "" {
					t.Fatalf("over the limit: %+v, Retry-After %q; want 0 left and no Retry-After on a 200", body.Minute, w.Header().Get("Retry-After"))
				}
			}
			for i := range 10 {
				if w := s.Do("GET", "/v1/pets", key, ""); !strings.Contains(w.Body.String(), httpapi.CodeRateLimited) {
					t.Fatalf("refusal %d during the wait: %s, want rate_limited (GET /v1/rate_limit must not count)", i+2, w.Body)
				}
			}
			servertest.WantError(t, s.Do("GET", "/v1/pets", key, ""), http.StatusTooManyRequests, httpapi.CodeTemporarilyBanned)
			w := s.Do("GET", "/v1/rate_limit", key, "")
			servertest.WantError(t, w, http.StatusTooManyRequests, httpapi.CodeTemporarilyBanned)
			if testkit.IntHeader(t, w, "Retry-After") != 900 || testkit.IntHeader(t, w, "X-RateLimit-Remaining") != 0 {
				t.Errorf("banned: Retry-After %s, Remaining %s; want 900 and 0", w.Header().Get("Retry-After"), w.Header().Get("X-RateLimit-Remaining"))
			}
		})
	})
}

func TestRateLimitEndpointShowsTheDayWhenItBinds(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		servertest.ForEachLimiter(t, opts, func(t *testing.T, s *servertest.Server) {
			key := s.MustCreateKey("enterprise", domain.Limits{PerMinute: 100, PerDay: 3})
			last := s.Do("GET", "/v1/pets", key, "")
			body, w := rateLimitAnswer(s, t, key)
			if body.Plan != "enterprise" || body.Day.Limit != 3 || body.Day.Remaining != 2 || body.Minute.Limit != 100 || body.Minute.Remaining != 99 {
				t.Errorf("%+v, want enterprise with 99 of 100 left this minute and 2 of 3 today", body)
			}
			for _, name := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit"} {
				if w.Header().Get(name) != last.Header().Get(name) {
					t.Errorf("%s: %q, the request before said %q", name, w.Header().Get(name), last.Header().Get(name))
				}
			}
			s.Do("GET", "/v1/pets", key, "")
			s.Do("GET", "/v1/pets", key, "")
			if body := rateLimit(s, t, key); body.Day.Remaining != 0 {
				t.Errorf("the day spent: %+v, want none left", body.Day)
			}
		})
	})
}

func TestRateLimitEndpointOfARolledKeyShowsTheSharedBudget(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		servertest.ForEachLimiter(t, opts, func(t *testing.T, s *servertest.Server) {
			k, oldToken := mustCreateKeyOf(s, "free")
			for range 10 {
				s.Do("GET", "/v1/pets", oldToken, "")
			}
			_, _, newToken := s.Roll(k.ID, time.Hour)
			oldView := rateLimit(s, t, oldToken)
			newView := rateLimit(s, t, newToken)
			if oldView != newView || newView.Minute.Remaining != 50 || newView.Day.Remaining != 990 {
				t.Errorf("old key sees %+v, new key %+v; want both 50 left this minute and 990 today", oldView, newView)
			}
		})
	})
}

func TestRateLimitEndpointWithoutAKeyIsLimitedByAddress(t *testing.T) {
	t.Parallel()
	servertest.ForEachLimiter(t, servertest.Options{}, func(t *testing.T, s *servertest.Server) {
		w := s.Do("GET", "/v1/rate_limit", "", "")
		servertest.WantError(t, w, http.StatusUnauthorized, httpapi.CodeUnauthorized)
		if got := testkit.IntHeader(t, w, "X-RateLimit-Remaining"); got != 59 {
			t.Errorf("a 401 spends the address's quota as everywhere: Remaining %d, want 59", got)
		}
	})
}

// Databases made by the release before keys had a lifetime open, keep their
// keys and usage, and gain the new fields.

func TestServersStartingAtOnceMakeOneFirstKey(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts)
		const servers = 8
		var created atomic.Int32
		var wg sync.WaitGroup
		for i := range servers {
			wg.Go(func() {
				terms := s.KeyTerms("free")
				terms.Name = fmt.Sprintf("bootstrap-%d", i)
				k, _ := manage.NewAPIKey(terms)
				_, ok, err := s.Store().CreateFirstKey(context.Background(), k, servertest.Actor, nil)
				if err != nil {
					t.Error(err)
				}
				if ok {
					created.Add(1)
				}
			})
		}
		wg.Wait()
		keys, err := s.Store().Keys(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if created.Load() != 1 || len(keys) != 1 {
			t.Errorf("%d servers starting at once on an empty database: %d said they made the first key, %d keys stored; want 1 and 1",
				servers, created.Load(), len(keys))
		}
		if _, ok, err := s.Store().CreateFirstKey(context.Background(), domain.Key{Hash: []byte("later"), Plan: "free", Env: "production"}, servertest.Actor, nil); ok || err != nil {
			t.Errorf("a first key on a database with a key: created %v, %v; want nothing made", ok, err)
		}
	})
}

// A first key that could not be handed over (its file not written) does
// not stay: neither it nor its key.created event is stored, and the next
// try makes one.
func TestAFirstKeyThatCouldNotBeKeptIsNotStored(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		ctx := context.Background()
		s := servertest.Start(t, opts)
		before, err := s.Store().KeysVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := manage.NewAPIKey(s.KeyTerms("free"))
		refused := errors.New("the file could not be written")
		var given domain.Key
		_, created, err := s.Store().CreateFirstKey(ctx, k, servertest.Actor, func(k domain.Key) error { given = k; return refused })
		if created || !errors.Is(err, refused) || given.ID == 0 {
			t.Fatalf("a first key whose keep fails: created %v, %v, keep given %+v; want the keep's error, after the key had its id", created, err, given)
		}
		keys, _ := s.Store().Keys(ctx)
		events, _ := s.Store().AuditEvents(ctx, domain.AuditFilter{})
		after, _ := s.Store().KeysVersion(ctx)
		if len(keys) != 0 || len(events) != 0 || after != before {
			t.Errorf("after the keep failed: %d keys, %d events, keys version %d to %d; want nothing stored", len(keys), len(events), before, after)
		}
		made, created, err := s.Store().CreateFirstKey(ctx, k, servertest.Actor, func(domain.Key) error { return nil })
		if keys, _ := s.Store().Keys(ctx); !created || err != nil || len(keys) != 1 || keys[0].ID != made.ID {
			t.Errorf("the next try: created %v, %v, keys %+v; want the one key made", created, err, keys)
		}
	})
}

// The databases of earlier releases open, at each schema version they
// may be at, and keep their keys: TestSQLiteDatabaseOfTheLastReleaseOpens
// and TestPostgresDatabaseOfTheLastReleaseOpens.

func TestSQLiteDatabaseOfTheLastReleaseOpens(t *testing.T) {
	t.Parallel()
	for version := 1; version < len(store.Migrations); version++ {
		t.Run(fmt.Sprintf("schema version %d", version), func(t *testing.T) {
			t.Parallel()
			path := t.TempDir() + "/old.db"
			db, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			token := domain.NewKeyToken("production")
			hash := domain.HashKey(token)
			for _, q := range append(migrationsOf(func(m store.Migration) string { return m.SQLite })[:version], fmt.Sprintf(`PRAGMA user_version = %d`, version)) {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.Exec(`INSERT INTO api_keys (hash, name, plan, rpm, rpd, env, created_at, revoked_at) VALUES (?, 'old', 'free', 60, 1000, 'production', 1773100000, NULL), (?, 'gone', 'pro', 300, 10000, 'production', 1773100000, 1773100100)`,
				hash[:], []byte("another hash, 32 bytes long....!")); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`INSERT INTO usage (key_id, day, count) VALUES (1, '2026-03-10', 40)`); err != nil {
				t.Fatal(err)
			}
			db.Close()

			clock := servertest.NewClock()
			opened, err := store.OpenSQLite(context.Background(), path, false, clock.Now)
			if err != nil {
				t.Fatal(err)
			}
			defer opened.Close()
			var got int
			if err := opened.Writer().QueryRow(`PRAGMA user_version`).Scan(&got); err != nil || got != len(store.Migrations) {
				t.Errorf("user_version %d (%v), want %d", got, err, len(store.Migrations))
			}
			wantOldKeysKept(t, opened, clock, token)
		})
	}
}

func TestPostgresDatabaseOfTheLastReleaseOpens(t *testing.T) {
	t.Parallel()
	for version := 1; version < len(store.Migrations); version++ {
		t.Run(fmt.Sprintf("schema version %d", version), func(t *testing.T) {
			t.Parallel()
			url := testkit.PostgresURL(t)
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			token := domain.NewKeyToken("production")
			hash := domain.HashKey(token)
			for _, q := range append([]string{
				`CREATE TABLE petstore_schema (version integer NOT NULL)`,
				fmt.Sprintf(`INSERT INTO petstore_schema (version) VALUES (%d)`, version),
			}, migrationsOf(func(m store.Migration) string { return m.Postgres })[:version]...) {
				if _, err := conn.Exec(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := conn.Exec(ctx, `INSERT INTO api_keys (hash, name, plan, rpm, rpd, env, created_at, revoked_at) VALUES ($1, 'old', 'free', 60, 1000, 'production', 1773100000, NULL), ($2, 'gone', 'pro', 300, 10000, 'production', 1773100000, 1773100100)`,
				hash[:], []byte("another hash, 32 bytes long....!")); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, `INSERT INTO usage (key_id, day, count) VALUES (1, '2026-03-10', 40)`); err != nil {
				t.Fatal(err)
			}
			conn.Close(ctx)

			clock := servertest.NewClock()
			opened, err := store.OpenPostgres(ctx, url, clock.Now)
			if err != nil {
				t.Fatal(err)
			}
			defer opened.Close()
			var got int
			if err := opened.Pool().QueryRow(ctx, `SELECT version FROM petstore_schema`).Scan(&got); err != nil || got != len(store.Migrations) {
				t.Errorf("schema version %d (%v), want %d", got, err, len(store.Migrations))
			}
			wantOldKeysKept(t, opened, clock, token)
		})
	}
}

// wantOldKeysKept checks the two keys and the usage of the last release's
// database, with the new fields at their defaults, and that the new ones
// work on them.
func wantOldKeysKept(t *testing.T, store store.Storage, clock *servertest.Clock, token string) {
	t.Helper()
	ctx := context.Background()
	keys, err := store.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Fatalf("%d keys, want the 2 of the old database", len(keys))
	}
	for _, k := range keys {
		if k.BudgetID != k.ID || !k.ExpiresAt.IsZero() || k.RolledTo != 0 || !k.LastUsedAt.IsZero() || k.Scopes != domain.AllScopes {
			t.Errorf("key %d: budget %d, expires %v, rolled to %d, last used %v, scopes %q; want its own budget, no expiry, no roll, never used, every scope",
				k.ID, k.BudgetID, k.ExpiresAt, k.RolledTo, k.LastUsedAt, k.Scopes)
		}
	}
	if keys[0].Name != "old" || keys[0].Plan != "free" || !keys[0].RevokedAt.IsZero() || keys[1].RevokedAt.IsZero() {
		t.Errorf("keys %+v, want the old free key active and the pro one revoked", keys)
	}
	if n, err := store.Usage(ctx, 1, "2026-03-10"); err != nil || n != 40 {
		t.Errorf("usage %d (%v), want the 40 stored", n, err)
	}
	ring, err := keyring.New(ctx, store, "production", clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	if k, problem, err := ring.Lookup(ctx, token, nil); k == nil || err != nil {
		t.Fatalf("the old key: %s %v", problem, err)
	}
	if err := ring.FlushLastUsed(ctx); err != nil {
		t.Fatal(err)
	}
	next := domain.NewKeyToken("production")
	hash := domain.HashKey(next)
	old, rolled, err := store.RollKey(ctx, 1, hash[:], time.Hour, servertest.Actor)
	if err != nil || rolled.BudgetID != 1 || old.RolledTo != rolled.ID {
		t.Errorf("roll the old key: %+v %+v %v", old, rolled, err)
	}
}

// migrationsOf is one engine's SQL of each migration, in order.
func migrationsOf(engine func(store.Migration) string) []string {
	var sqls []string
	for _, m := range store.Migrations {
		sqls = append(sqls, engine(m))
	}
	return sqls
}

// TestEveryServerRefusesARolledKeyAfterTheOverlap: three servers on one
// PostgreSQL with limits in Redis all take a rolled key until the overlap
// ends, and all refuse it from then on.
func TestEveryServerRefusesARolledKeyAfterTheOverlap(t *testing.T) {
	t.Parallel()
	a := servertest.Start(t, servertest.Options{Postgres: true, Redis: true})
	servers := []*servertest.Server{a, a.AnotherServer(), a.AnotherServer()}
	k, oldToken := mustCreateKeyOf(a, "pro")
	for _, s := range servers {
		testkit.WantStatus(t, s.Do("GET", "/v1/pets", oldToken, ""), http.StatusOK, "the key before the roll")
	}
	_, _, newToken := a.Roll(k.ID, 3*time.Second)
	a.Clock.Advance(3*time.Second - time.Millisecond)
	for _, s := range servers {
		if err := s.Keys().Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		testkit.WantStatus(t, s.Do("GET", "/v1/pets", oldToken, ""), http.StatusOK, "the old key just before the overlap ends")
	}
	a.Clock.Advance(time.Millisecond)
	for _, s := range servers {
		wantExpired(t, s.Do("GET", "/v1/pets", oldToken, ""))
		testkit.WantStatus(t, s.Do("GET", "/v1/pets", newToken, ""), http.StatusOK, "the new key after the overlap")
	}
}
