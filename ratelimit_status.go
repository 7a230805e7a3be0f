package main

import (
	"net/http"
	"strconv"

	"petstore/internal/appendjson"
	"petstore/internal/domain"
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
		if key := recordOf(w).key; key == nil || !key.Scopes.Has(need) {
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
		info := recordOf(w)
		key := info.peeking()
		id, lim := key.Budget()
		s, err := limiter.Peek(r.Context(), id, lim)
		if err != nil {
			writeError(w, r, err)
			return
		}
		info.decided(&s.Decision)
		setRateLimitHeaders(w.Header(), info, &s.Decision)
		if !s.Allowed {
			refuse(w, r, &s.Decision)
			return
		}
		writeBody(w, http.StatusOK, appendRateLimitStatus(make([]byte, 0, 160), key, s))
	})
}

// appendRateLimitStatus appends key's plan, scopes and windows s as JSON:
// the body of GET /v1/rate_limit and of the admin API's
// GET /admin/v1/keys/{id}/limits.
func appendRateLimitStatus(b []byte, key *domain.Key, s limits.Standing) []byte {
	b = append(b, `{"plan":`...)
	b = appendjson.String(b, key.Plan)
	b = appendScopes(append(b, `,"scopes":`...), key.Scopes)
	b = appendWindow(append(b, `,"minute":`...), s.Minute)
	b = appendWindow(append(b, `,"day":`...), s.Day)
	return append(b, "}\n"...)
}

func appendWindow(b []byte, win limits.Window) []byte {
	b = append(b, `{"limit":`...)
	b = strconv.AppendInt(b, win.Limit, 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, max(0, win.Remaining), 10)
	b = append(b, `,"reset":`...)
	b = strconv.AppendInt(b, win.Reset.Unix(), 10)
	return append(b, '}')
}

// appendScopes appends s as a JSON array of scope names.
func appendScopes(b []byte, s domain.ScopeSet) []byte {
	b = append(b, '[')
	for i, name := range s.Names() {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendjson.String(b, name)
	}
	return append(b, ']')
}
