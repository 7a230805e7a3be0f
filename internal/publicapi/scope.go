package publicapi

import (
	"net/http"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
)

// RequireScope answers 403 insufficient_scope to a request whose key lacks
// need; it runs after RequireKey, so the request has a key and has been
// counted against its rate limit.
func RequireScope(need domain.ScopeSet) httpapi.Middleware {
	if need == 0 {
		return func(next http.Handler) http.Handler { return next }
	}
	challenge := []string{`Bearer realm="petstore", error="insufficient_scope", scope="` + need.String() + `"`}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			info := httpapi.RecordOf(w)
			if !info.Scoped(need) {
				httpapi.InsufficientScope(w, r, challenge, "this API key", "the key", need, info.Key().Scopes)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
