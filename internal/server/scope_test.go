package server

// Restricted keys (docs/api.md, "Scopes"): the
// scopes a key is made with, kept and shown.

import (
	"context"
	"net/http"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/testkit"
)

func TestRollKeepsTheScopes(t *testing.T) {
	eachStore(t, func(t *testing.T, opts testOptions) {
		s := newTestServerWith(t, opts)
		for _, scopes := range []domain.ScopeSet{domain.ScopePetsRead, domain.ScopePetsWrite, domain.AllScopes} {
			terms := s.keyTerms("pro")
			terms.Scopes = scopes
			k, _ := s.mustCreate(terms)
			_, rolled, _ := s.roll(k.ID, time.Hour)
			if rolled.Scopes != scopes {
				t.Errorf("a key of %q rolled to one of %q", scopes, rolled.Scopes)
			}
			stored, err := s.store.Keys(context.Background())
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
	eachStore(t, func(t *testing.T, opts testOptions) {
		forEachLimiter(t, opts, func(t *testing.T, s *testServer) {
			terms := s.keyTerms("enterprise", domain.Limits{PerMinute: 2, PerDay: 100})
			terms.Scopes = domain.ScopePetsWrite
			_, writeOnly := s.mustCreate(terms)
			for _, remaining := range []int64{1, 0} {
				w := s.do("GET", "/v1/rate_limit", writeOnly, "")
				wantError(t, w, http.StatusForbidden, httpapi.CodeInsufficientScope)
				if got := testkit.IntHeader(t, w, "X-RateLimit-Remaining"); got != remaining {
					t.Errorf("a 403 says Remaining %d, want %d: it spends a request", got, remaining)
				}
			}
			wantError(t, s.do("GET", "/v1/pets", writeOnly, ""), http.StatusTooManyRequests, httpapi.CodeRateLimited)
			for range s.opts.banAfter {
				wantError(t, s.do("GET", "/v1/pets", writeOnly, ""), http.StatusTooManyRequests, httpapi.CodeRateLimited)
			}
			wantError(t, s.do("GET", "/v1/rate_limit", writeOnly, ""), http.StatusTooManyRequests, httpapi.CodeTemporarilyBanned)
			wantError(t, s.do("GET", "/v1/pets", writeOnly, ""), http.StatusTooManyRequests, httpapi.CodeTemporarilyBanned)
		})
	})
}
