package main

import (
	"net/http"
	"petstore/internal/manage"
)

// What the owner's console (docs/admin.md "Console") asks of the admin API
// beyond the CLI's objects: who the token is, and a key's limits now.

// whoami is the token a request came with: its name and its scopes, so that
// a client shows only what the token may do.
type whoami struct {
	ID     int64    `json:"id"`
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
}

func handleAdminWhoami() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := recordOf(w).admin
		writeJSON(w, r, http.StatusOK, whoami{ID: t.ID, Name: t.Name, Scopes: t.Scopes.Names()})
	})
}

// handleAdminKeyLimits answers a key's plan, scopes and both windows now,
// in the shape of GET /v1/rate_limit, read from the limiter without
// spending anything and without counting in the key's usage. The keys of
// a roll share their windows. A banned key's windows are shown as they
// are: the ban is in GET /admin/v1/bans.
func handleAdminKeyLimits(d adminDeps) http.Handler {
	return withPathID("a key", func(w http.ResponseWriter, r *http.Request, id int64) {
		k, _, err := manage.FindKey(r.Context(), d.store, id)
		if err != nil {
			writeError(w, r, err)
			return
		}
		budget, lim := k.Budget()
		s, err := d.limiter.Peek(r.Context(), budget, lim)
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeBody(w, http.StatusOK, appendRateLimitStatus(make([]byte, 0, 160), &k, s))
	})
}

// noStore keeps every answer of the admin API out of any cache: a key made
// or a key's figures are never kept by a browser or a proxy. Nor is an
// answer ever taken for anything but its Content-Type.
func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}
