package adminapi

import (
	"net/http"
	"net/url"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/manage"
)

// The admin API's routes of the audit trail and of the bans (docs/admin.md,
// "The routes"): GET /admin/v1/bans (keys:read) lists the bans in force, as
// bans list --json does; DELETE /admin/v1/bans/{subject} (keys:write) lifts
// one, as bans lift does.

func Audit(d Deps) http.Handler {
	return route(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		f, params, err := parseAdminAuditQuery(r.URL.Query(), d.Now())
		if err != nil {
			return 0, nil, err
		}
		f.Env = d.Env
		limit := f.Limit
		f.Limit++ // one more tells whether a next page exists
		events, err := d.Audit.AuditEvents(r.Context(), f)
		if err != nil {
			return 0, nil, err
		}
		if len(events) > limit {
			events = events[:limit]
			w.Header().Set("Link", nextPageLink("/admin/v1/audit", params, limit, events[limit-1].ID))
		}
		return http.StatusOK, manage.AuditJSONOf(events), nil
	})
}

// parseAdminAuditQuery reads GET /admin/v1/audit's query: the filter, with
// its page, and the parameters to keep in the next page's Link.
func parseAdminAuditQuery(v url.Values, now time.Time) (domain.AuditFilter, url.Values, error) {
	var f domain.AuditFilter
	params := url.Values{}
	err := atMostOnce(v, "since", "key", "action", "order", "limit", "cursor")
	if err != nil {
		return f, nil, err
	}
	if f.Since, err = manage.AuditSince("since", v.Get("since"), v.Has("since"), now); err != nil {
		return f, nil, err
	}
	if v.Has("since") {
		// A duration is kept as the time it meant, so that the next
		// page is of the same trail.
		params.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	if v.Has("key") {
		s := v.Get("key")
		var ok bool
		if f.KeyID, ok = domain.ParseID(s); !ok {
			return f, nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "key must be a key's id, an integer from 1 to 9223372036854775807")
		}
		params.Set("key", s)
	}
	f.Action = v.Get("action")
	if err := manage.CheckAuditAction("action", f.Action); err != nil {
		return f, nil, err
	}
	if f.Action != "" {
		params.Set("action", f.Action)
	}
	switch order := v.Get("order"); order {
	case "newest":
		f.Newest = true
		params.Set("order", order)
	case "", "oldest":
	default:
		return f, nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "order must be oldest (the default) or newest, not %q", order)
	}
	if f.Limit, err = pageLimit(v); err != nil {
		return f, nil, err
	}
	f.After, err = pageCursor(v)
	return f, params, err
}

// ListBans answers the bans in force that this environment sees
// (manage.EnvBans), those that began first first: [{"subject", "since",
// "until"}].
func ListBans(d Deps) http.Handler {
	return route(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		if err := d.StoreBans(r.Context()); err != nil {
			return 0, nil, err
		}
		bans, err := manage.EnvBans(r.Context(), struct {
			domain.KeyStore
			domain.BanStore
		}{d.Keys, d.Bans}, d.Env)
		return http.StatusOK, manage.ListedBans(bans), err
	})
}

// LiftBan lifts the ban of the path's subject (key:ID or address:IP; an
// IPv6 /64 as any of its addresses, or PREFIX%2F64) on env, as the token's
// admin:NAME: 204, and every server lets it through within a second. A
// subject that is not banned is 404, a malformed one 400 naming it.
func LiftBan(d Deps, env string) http.Handler {
	return route(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		subject, err := domain.ParseBanSubject(r.PathValue("subject"))
		if err == nil {
			err = d.StoreBans(r.Context())
		}
		if err == nil {
			_, err = d.Bans.LiftBan(r.Context(), subject, httpapi.RecordOf(w).Admin().Actor(), env)
		}
		return http.StatusNoContent, nil, err
	})
}
