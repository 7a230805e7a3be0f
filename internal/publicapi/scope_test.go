package publicapi_test

// Restricted keys (docs/api.md, "Scopes"): the
// scopes a key is made with, kept and shown.

import (
	"context"
	"net/http"
	"petstore/internal/servertest"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/testkit"
)

func TestRollKeepsTheScopes(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts)
		for _, scopes := range []domain.ScopeSet{domain.ScopePetsRead, domain.ScopePetsWrite, domain.AllScopes} {
			terms := s.KeyTerms("pro")
			terms.Scopes = scopes
			k, _ := s.MustCreate(terms)
			_, rolled, _ := s.Roll(k.ID, time.Hour)
			if rolled.Scopes != scopes {
				t.Errorf("a key of %q rolled to one of %q", scopes, rolled.Scopes)
			}
			stored, err := s.Store().Keys(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, sk := range stored {
				if (sk.ID == k.ID || sk.ID == rolled.ID) && sk.Scopes != scopes {
					t.Errorf("key %d stored with %q, want %q", sk.ID, sk.Scopes, scopes)
				}
			}
		}
	})
}

// TestInsufficientScopeComesAfterTheRateLimitAndSpendsIt: a 403 is an
// answered request like any other; over the limit or banned, the 429 comes
// first.
func TestInsufficientScopeComesAfterTheRateLimitAndSpendsIt(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		servertest.ForEachLimiter(t, opts, func(t *testing.T, s *servertest.Server) {
			terms := s.KeyTerms("enterprise", domain.Limits{PerMinute: 2, PerDay: 100})
			terms.Scopes = domain.ScopePetsWrite
			_, writeOnly := s.MustCreate(terms)
			for _, remaining := range []int64{1, 0} {
				w := s.Do("GET", "/v1/rate_limit", writeOnly, "")
				servertest.WantError(t, w, http.StatusForbidden, httpapi.CodeInsufficientScope)
				if got := testkit.IntHeader(t, w, "X-RateLimit-Remaining"); got != remaining {
					t.Errorf("a 403 says Remaining %d, want %d: it spends a request", got, remaining)
				}
			}
			servertest.WantError(t, s.Do("GET", "/v1/pets", writeOnly, ""), http.StatusTooManyRequests, httpapi.CodeRateLimited)
			for range s.Cfg.BanAfter {
				servertest.WantError(t, s.Do("GET", "/v1/pets", writeOnly, ""), http.StatusTooManyRequests, httpapi.CodeRateLimited)
			}
			servertest.WantError(t, s.Do("GET", "/v1/rate_limit", writeOnly, ""), http.StatusTooManyRequests, httpapi.CodeTemporarilyBanned)
			servertest.WantError(t, s.Do("GET", "/v1/pets", writeOnly, ""), http.StatusTooManyRequests, httpapi.CodeTemporarilyBanned)
		})
	})
}
