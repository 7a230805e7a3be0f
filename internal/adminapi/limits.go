package adminapi

import (
	"net/http"
	"petstore/internal/httpapi"
	"petstore/internal/manage"
)

// What the owner's console (docs/admin.md "Console") asks of the admin API
// beyond the CLI's objects: who the token is, and a key's limits now.

// Identity is the token a request came with: its name and its scopes, so that
// a client shows only what the token may do.
type Identity struct {
	ID     int64    `json:"id"`
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
}

func Whoami() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := httpapi.RecordOf(w).Admin()
		httpapi.WriteJSON(w, http.StatusOK, Identity{ID: t.ID, Name: t.Name, Scopes: t.Scopes.Names()})
	})
}

// KeyLimits answers a key's plan, scopes and both windows now,
// in the shape of GET /v1/rate_limit, read from the limiter without
// spending anything and without counting in the key's usage. The keys of
// a roll share their windows. A banned key's windows are shown as they
// are: the ban is in GET /admin/v1/bans.
func KeyLimits(d Deps) http.Handler {
	return withPathID("a key", func(w http.ResponseWriter, r *http.Request, id int64) {
		k, _, err := manage.FindKey(r.Context(), d.Store, id)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		budget, lim := k.Budget()
		s, err := d.Limiter.Peek(r.Context(), budget, lim)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		httpapi.WriteBody(w, http.StatusOK, httpapi.AppendRateLimitStatus(make([]byte, 0, 160), &k, s))
	})
}

// NoStore keeps every answer of the admin API out of any cache: a key made
// or a key's figures are never kept by a browser or a proxy. Nor is an
// answer ever taken for anything but its Content-Type.
func NoStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}
