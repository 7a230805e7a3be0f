package adminapi

import (
	_ "embed"
	"net/http"
	"net/url"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/manage"
)

// The admin API's route of the audit trail (docs/admin.md, "The routes").

func Audit(d Deps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.URL.Query()
		f, params, err := parseAdminAuditQuery(v, d.Now())
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		limit := f.Limit
		f.Limit++ // one more tells whether a next page exists
		events, err := d.Store.AuditEvents(r.Context(), f)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		if len(events) > limit {
			events = events[:limit]
			w.Header().Set("Link", nextPageLink("/admin/v1/audit", params, limit, events[limit-1].ID))
		}
		httpapi.WriteJSON(w, http.StatusOK, manage.AuditJSONOf(events))
	})
}

// parseAdminAuditQuery reads GET /admin/v1/audit's query: the filter, with
// its page, and the parameters to keep in the next page's Link.
func parseAdminAuditQuery(v url.Values, now time.Time) (domain.AuditFilter, url.Values, error) {
	var f domain.AuditFilter
	params := url.Values{}
	for _, name := range []string{"since", "key", "action", "limit", "cursor"} {
		if len(v[name]) > 1 {
			return f, nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "%s must be given at most once", name)
		}
	}
	var err error
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
	if f.Limit, err = pageLimit(v); err != nil {
		return f, nil, err
	}
	f.After, err = pageCursor(v)
	return f, params, err
}
