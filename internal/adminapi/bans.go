package adminapi

import (
	"net/http"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/manage"
)

// The admin API's bans (docs/admin.md, "The routes"): GET /admin/v1/bans
// (keys:read) lists the bans in force, as bans list --json does; DELETE
// /admin/v1/bans/{subject} (keys:write) lifts one, as bans lift does.

// ListBans answers the bans in force, those that began first
// first: [{"subject", "since", "until"}].
func ListBans(d Deps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := d.StoreBans(r.Context())
		var bans []domain.Ban
		if err == nil {
			bans, err = d.Store.Bans(r.Context())
		}
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, manage.ListedBans(bans))
	})
}

// LiftBan lifts the ban of the path's subject (key:ID or
// address:IP; an IPv6 /64 as any of its addresses, or PREFIX%2F64) on env, as the token's admin:NAME: 204, and every
// server lets the subject through within a second. A subject that is not
// banned is 404, a malformed one 400 naming it.
func LiftBan(d Deps, env string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		subject, err := domain.ParseBanSubject(r.PathValue("subject"))
		if err == nil {
			err = d.StoreBans(r.Context())
		}
		if err == nil {
			_, err = d.Store.LiftBan(r.Context(), subject, httpapi.RecordOf(w).Admin().Actor(), env)
		}
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
