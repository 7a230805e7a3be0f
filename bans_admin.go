package main

import (
	"encoding/json"
	"net/http"
)

// The admin API's bans (DESIGN.md "The API's owner"): GET /admin/v1/bans
// (keys:read) lists the bans in force, as bans list --json does; DELETE
// /admin/v1/bans/{subject} (keys:write) lifts one, as bans lift does.

// handleAdminListBans answers the bans in force, those that began first
// first: [{"subject", "since", "until"}].
func handleAdminListBans(store banStore) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bans, err := store.Bans(r.Context())
		if err != nil {
			writeError(w, r, err)
			return
		}
		b, err := json.Marshal(listedBans(bans))
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeBody(w, http.StatusOK, append(b, '\n'))
	})
}

// handleAdminLiftBan lifts the ban of the path's subject (key:ID or
// address:IP; an IPv6 /64 as any of its addresses, or PREFIX/64 with its
// slash escaped or not) on env, as actor(r) (admin:NAME): 204, and every
// server lets the subject through within a second. A subject that is not
// banned is 404, a malformed one 400 naming it.
func handleAdminLiftBan(store banStore, env string, actor func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		subject, err := parseBanSubject(r.PathValue("subject"))
		if err != nil {
			writeError(w, r, err)
			return
		}
		if _, err := store.LiftBan(r.Context(), subject, actor(r), env); err != nil {
			writeError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
