package adminapi

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/limits"
	"petstore/internal/manage"
	"petstore/internal/webhook"
)

// The admin API (docs/admin.md, "The routes") is what the CLI does to keys,
// over HTTP for a signup flow or a portal, with the CLI's objects: a key is
// keys list --json's ListedKey, an event audit --json's AuditJSON, a day of
// usage petstore usage --json's.

// Deps is what the admin API's handlers need: of the database, each
// aggregate's interface they call (the server passes its one store for
// all), never the whole store.Storage.
type Deps struct {
	Keys     domain.KeyStore
	Usage    domain.UsageStore
	History  domain.UsageHistoryStore
	Audit    domain.AuditStore
	Bans     domain.BanStore
	Webhooks domain.WebhookEndpointStore
	Servers  domain.ServerStore
	Secrets  manage.SecretStore
	// Env is the server's environment: the only one whose keys, usage,
	// key bans, audit events and webhook endpoints its routes see; another
	// environment's id is not_found, as an unknown one is.
	Env     string
	Now     func() time.Time
	Limiter limits.Limiter // read, never spent: a key's limits
	// WebhookGuard refuses the endpoint URLs this server would never send
	// to (nil with --webhook-allow-private).
	WebhookGuard *webhook.AddressGuard
	// StoreBans stores the bans this server started and has not stored
	// yet, so that the bans listed or lifted include one just refused.
	StoreBans func(context.Context) error
}

// atMostOnce refuses a query that gives any of names more than once.
func atMostOnce(v url.Values, names ...string) error {
	for _, name := range names {
		if len(v[name]) > 1 {
			return httpapi.Errorf(httpapi.CodeInvalidRequest, "%s must be given at most once", name)
		}
	}
	return nil
}

// pageLimit is a page's limit (httpapi.LimitOf), DefaultPageSize by default.
func pageLimit(v url.Values) (int, error) {
	if !v.Has("limit") {
		return httpapi.DefaultPageSize, nil
	}
	return httpapi.LimitOf(v.Get("limit"))
}

// pageCursor is where a page begins: after the id its cursor names.
func pageCursor(v url.Values) (int64, error) {
	if !v.Has("cursor") {
		return 0, nil
	}
	after, ok := domain.DecodeCursor(v.Get("cursor"))
	if !ok {
		return 0, httpapi.Errorf(httpapi.CodeInvalidRequest, "cursor is malformed: pass the cursor of a Link rel=\"next\" URL unchanged")
	}
	return after, nil
}

// nextPageLink is the Link to the page of path after id last, with the
// query's other parameters and its limit.
func nextPageLink(path string, params url.Values, limit int, last int64) string {
	p := maps.Clone(params)
	p.Set("limit", strconv.Itoa(limit))
	p.Set("cursor", domain.EncodeCursor(last))
	return "<" + path + "?" + p.Encode() + `>; rel="next"`
}

// route is the handler of an admin route: it returns its answer's status
// and body, sent as JSON (none with 204), or the error to answer instead.
type route func(w http.ResponseWriter, r *http.Request) (status int, body any, err error)

func (f route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch status, body, err := f(w, r); {
	case err != nil:
		httpapi.WriteError(w, err)
	case status == http.StatusNoContent:
		w.WriteHeader(status)
	default:
		httpapi.WriteJSON(w, status, body)
	}
}

// withPathID is the route of a path with an {id}: an id that is not one
// (of says what it is the id of: a key, a webhook endpoint) is refused, f
// answers the rest.
func withPathID(of string, f func(w http.ResponseWriter, r *http.Request, id int64) (int, any, error)) route {
	return func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		id, ok := domain.ParseID(r.PathValue("id"))
		if !ok {
			return 0, nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "id must be %s's id, an integer from 1 to 9223372036854775807", of)
		}
		return f(w, r, id)
	}
}

// firstError is the first of errs that is not nil: of a body's fields,
// each read in turn, the first one refused.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// jsonBody is a request body's fields, raw, as httpapi.DecodeObject read them.
type jsonBody map[string]json.RawMessage

// str reads field name, a string, into dst; absent leaves dst.
func (b jsonBody) str(name string, dst *string) error {
	raw, ok := b[name]
	if !ok {
		return nil
	}
	if string(raw) == "null" || json.Unmarshal(raw, dst) != nil {
		return httpapi.Errorf(httpapi.CodeInvalidRequest, "%s must be a string", name)
	}
	return nil
}

// int reads field name, an integer, into dst; absent leaves dst.
func (b jsonBody) int(name string, dst *int64) error {
	raw, ok := b[name]
	if !ok {
		return nil
	}
	if !domain.IsDigits(string(raw)) || json.Unmarshal(raw, dst) != nil || *dst < 1 {
		return httpapi.Errorf(httpapi.CodeInvalidRequest, "%s must be an integer of 1 or more", name)
	}
	return nil
}

// externalID reads a key's externalId into dst by manage.CheckExternalID's rule;
// absent leaves dst. With clear (a change), null or "" is none: it clears it.
func (b jsonBody) externalID(dst *string, clear bool) error {
	raw, ok := b["externalId"]
	switch {
	case !ok:
		return nil
	case clear && string(raw) == "null":
		*dst = ""
		return nil
	}
	if err := b.str("externalId", dst); err != nil || (clear && *dst == "") {
		return err
	}
	return manage.CheckExternalID("externalId", *dst)
}

// name reads the name of a key.
func (b jsonBody) name(dst *string) error {
	if err := b.str("name", dst); err != nil {
		return err
	}
	return manage.CheckLabel("name", *dst)
}

// scopes reads the scopes of a key, an array of at least one scope name;
// absent leaves dst.
func (b jsonBody) scopes(dst *domain.ScopeSet) error {
	raw, ok := b["scopes"]
	if !ok {
		return nil
	}
	var names []string
	if string(raw) == "null" || json.Unmarshal(raw, &names) != nil || len(names) == 0 {
		return httpapi.Errorf(httpapi.CodeInvalidRequest, "scopes must be an array of one or more of %s", strings.Join(domain.AllScopes.Names(), ", "))
	}
	s, name, ok := domain.ParseScopes(names, domain.AllScopes)
	if !ok {
		return httpapi.Errorf(httpapi.CodeInvalidRequest, "scopes: unknown scope %q; the scopes of a key are %s", name, domain.KnownScopes)
	}
	*dst = s
	return nil
}

// expires reads when a key stops working: an RFC 3339 time or a duration
// from now, or null for never; absent leaves dst.
func (b jsonBody) expires(dst *time.Time, now time.Time) error {
	raw, ok := b["expires"]
	if !ok {
		return nil
	}
	if string(raw) == "null" {
		*dst = time.Time{}
		return nil
	}
	var s string
	if err := b.str("expires", &s); err != nil {
		return httpapi.Errorf(httpapi.CodeInvalidRequest, "expires must be an RFC 3339 time, a duration from now (90d) or null for never")
	}
	var err error
	*dst, err = manage.ExpiresOf("expires", s, "null (never)", now)
	return err
}

// What the owner's console (docs/admin.md "Console") asks of the admin API
// beyond the CLI's objects: who the token is (Whoami), and a key's limits
// now (KeyLimits).

// Identity is the token a request came with: its name and its scopes, so that
// a client shows only what the token may do.
type Identity struct {
	ID     int64    `json:"id"`
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
}

func Whoami() http.Handler {
	return route(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		t := httpapi.RecordOf(w).Admin()
		return http.StatusOK, Identity{ID: t.ID, Name: t.Name, Scopes: t.Scopes.Names()}, nil
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
