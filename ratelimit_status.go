package main

import (
	"net/http"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/limits"
)

// GET /v1/rate_limit: a caller's plan and both windows, read without
// spending anything (GitHub's GET /rate_limit is the model).

// uncounted sends a request with a valid key that holds need to peeked,
// which reports the key's rate-limit state itself without spending any, and
// every other request to counted: limited and refused, as anywhere (by
// client address without a key; a key without the scope spends a request
// on its 403, as on any operation).
func uncounted(need domain.ScopeSet, peeked, counted http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if key := httpapi.RecordOf(w).Key(); key == nil || !key.Scopes.Has(need) {
			counted.ServeHTTP(w, r)
			return
		}
		peeked.ServeHTTP(w, r)
	})
}

// handleRateLimit answers the caller's plan and windows, with the usual
// headers, which describe the same state: nothing is spent. A caller over a
// limit is still answered (with nothing remaining); a banned one is refused
// as everywhere, and this request does not count towards a ban.
func handleRateLimit(limiter limits.Limiter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := httpapi.RecordOf(w)
		key := info.Peeking()
		id, lim := key.Budget()
		s, err := limiter.Peek(r.Context(), id, lim)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		info.Decided(&s.Decision)
		setRateLimitHeaders(w.Header(), info, &s.Decision)
		if !s.Allowed {
			httpapi.Refuse(w, r, &s.Decision)
			return
		}
		httpapi.WriteBody(w, http.StatusOK, httpapi.AppendRateLimitStatus(make([]byte, 0, 160), key, s))
	})
}
