package main

import (
	"net/http"

	"petstore/internal/domain"
)

// requireScope answers 403 insufficient_scope to a request whose key lacks
// need; it runs after requireKey, so the request has a key and has been
// counted against its rate limit.
func requireScope(need domain.ScopeSet) middleware {
	if need == 0 {
		return func(next http.Handler) http.Handler { return next }
	}
	challenge := []string{`Bearer realm="petstore", error="insufficient_scope", scope="` + need.String() + `"`}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			info := recordOf(w)
			if !info.scoped(need) {
				insufficientScope(w, r, challenge, "this API key", "the key", need, info.key.Scopes)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// insufficientScope is the 403 to a credential that has scopes has and
// lacks need; holder and it name the credential ("this API key", "the
// key").
func insufficientScope(w http.ResponseWriter, r *http.Request, challenge []string, holder, it string, need, has domain.ScopeSet) {
	w.Header()["Www-Authenticate"] = challenge
	writeError(w, r, errorf(codeInsufficientScope, "%s lacks the %s scope, which %s %s needs; %s has %s",
		holder, need, r.Method, r.URL.Path, it, has.Described()))
}
