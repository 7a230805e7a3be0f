package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"petstore/internal/domain"
	"petstore/internal/limits"
	"petstore/internal/webhook"
)

// The admin API (docs/admin.md, "The routes"): what the CLI does to keys,
// over HTTP for a signup flow or a portal, under /admin/v1 on the admin
// listener only (--admin-addr), behind admin tokens (admin.go). Its objects
// are the CLI's: a key is keys list --json's listedKey, an event audit
// --json's auditJSON, a day of usage petstore usage --json's usageDay.

//go:embed admin-openapi.yaml
var adminOpenAPIYAML []byte

// adminDeps is what the admin API's handlers need.
type adminDeps struct {
	store   storage
	now     func() time.Time
	limiter limits.Limiter // read, never spent: a key's limits
	// webhookGuard refuses the endpoint URLs this server would never send
	// to (nil with --webhook-allow-private).
	webhookGuard *webhook.AddressGuard
	// storeBans stores the bans this server started and has not stored
	// yet, so that the bans listed or lifted include one just refused.
	storeBans func(context.Context) error
}

// createdKey is a key made by the admin API: the key object and, this once,
// the key itself.
type createdKey struct {
	listedKey
	Key string `json:"key"`
}

func handleAdminCreateKey(d adminDeps, env string) http.Handler {
	fields := []string{"plan", "name", "perMinute", "perDay", "expires", "scopes", "externalId"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := decodeObject(w, r, fields, "a new key has only "+strings.Join(fields, ", "))
		if err != nil {
			writeError(w, r, err)
			return
		}
		terms, err := newKeyTerms(jsonBody(body), env, d.now())
		if err != nil {
			writeError(w, r, err)
			return
		}
		k, token, err := createKey(r.Context(), d.store, terms, recordOf(w).admin.Actor())
		if err != nil {
			writeError(w, r, err)
			return
		}
		d.answerKey(w, r, http.StatusCreated, k.ID, token)
	})
}

// newKeyTerms are the terms of a key that body asks for, by the rules of
// keys create.
func newKeyTerms(body jsonBody, env string, now time.Time) (domain.Key, error) {
	k := domain.Key{Env: env, Scopes: domain.AllScopes}
	var plan string
	var perMinute, perDay int64
	if err := body.str("plan", &plan); err != nil {
		return k, err
	}
	plan = domain.PlanName(plan)
	if err := body.int("perMinute", &perMinute); err != nil {
		return k, err
	}
	if err := body.int("perDay", &perDay); err != nil {
		return k, err
	}
	lim, err := domain.LimitsOf(plan, perMinute, perDay, domain.JSONFields)
	if err != nil {
		return k, err
	}
	k.Plan, k.PerMinute, k.PerDay = plan, lim.PerMinute, lim.PerDay
	if err := body.name(&k.Name); err != nil {
		return k, err
	}
	if err := body.scopes(&k.Scopes); err != nil {
		return k, err
	}
	if err := body.expires(&k.ExpiresAt, now); err != nil {
		return k, err
	}
	if err := body.externalID(&k.ExternalID, false); err != nil {
		return k, err
	}
	return k, nil
}

// maxExternalIDLen bounds an externalId, in characters.
const maxExternalIDLen = 255

// checkText: field is 1 to 255 printable characters of valid UTF-8, as an
// externalId and the keys' search q are.
func checkText(field, s string) error {
	if s == "" || !utf8.ValidString(s) || utf8.RuneCountInString(s) > maxExternalIDLen ||
		strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return errorf(codeInvalidRequest, "%s must be 1 to %d printable characters", field, maxExternalIDLen)
	}
	return nil
}

// checkExternalID is the rule of a key's externalId given as field
// (externalId, --external-id): checkText's, without U+FFFD (where
// encoding/json put bytes that were not UTF-8), and never the text of a key
// or token (refuseSecret). A refusal is invalid_request.
func checkExternalID(field, id string) error {
	if checkText(field, id) != nil || strings.ContainsRune(id, utf8.RuneError) {
		return domain.Invalid("%s must be 1 to %d printable characters of valid UTF-8 (no invalid bytes, lone surrogates or U+FFFD)", field, maxExternalIDLen)
	}
	if err := refuseSecret(field, id); err != nil {
		return domain.Invalid("%s", err.Error())
	}
	return nil
}

func handleAdminListKeys(d adminDeps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := parseAdminKeysQuery(r.URL.Query())
		if err != nil {
			writeError(w, r, err)
			return
		}
		all, err := d.store.Keys(r.Context())
		if err != nil {
			writeError(w, r, err)
			return
		}
		now := d.now()
		var page []domain.Key
		more := false
		for _, k := range all {
			if k.ID <= q.after || !q.filter.Picks(k, now) {
				continue
			}
			if len(page) == q.limit {
				more = true
				break
			}
			page = append(page, k)
		}
		rows, err := listedKeys(r.Context(), d.store, all, page, now)
		if err != nil {
			writeError(w, r, err)
			return
		}
		if more {
			w.Header().Set("Link", q.nextLink(page[len(page)-1].ID))
		}
		writeJSON(w, r, http.StatusOK, rows)
	})
}

// adminKeysQuery is a validated query of GET /admin/v1/keys.
type adminKeysQuery struct {
	filter domain.KeyFilter
	limit  int
	after  int64
	params url.Values // the filters as given, for the next page's Link
}

func parseAdminKeysQuery(v url.Values) (adminKeysQuery, error) {
	q := adminKeysQuery{limit: defaultPageSize, params: url.Values{}}
	for _, name := range []string{"plan", "idle", "expiring", "revoked", "externalId", "q", "limit", "cursor"} {
		if len(v[name]) > 1 {
			return q, errorf(codeInvalidRequest, "%s must be given at most once", name)
		}
	}
	if plan := domain.PlanName(v.Get("plan")); v.Has("plan") {
		if !domain.KnownPlan(plan) {
			return q, errorf(codeInvalidRequest, "plan must be one of free, pro, business, enterprise, not %q", plan)
		}
		q.filter.Plan = plan
		q.params.Set("plan", plan)
	}
	var err error
	if q.filter.Idle, err = domain.ReportSpan("idle", v.Get("idle"), v.Has("idle")); err != nil {
		return q, err
	}
	if q.filter.Expiring, err = domain.ReportSpan("expiring", v.Get("expiring"), v.Has("expiring")); err != nil {
		return q, err
	}
	for _, name := range []string{"idle", "expiring"} {
		if v.Has(name) {
			q.params.Set(name, v.Get(name))
		}
	}
	if v.Has("revoked") {
		revoked, err := strconv.ParseBool(v.Get("revoked"))
		if err != nil || (v.Get("revoked") != "true" && v.Get("revoked") != "false") {
			return q, errorf(codeInvalidRequest, "revoked must be true or false, not %q", v.Get("revoked"))
		}
		q.filter.Revoked = &revoked
		q.params.Set("revoked", v.Get("revoked"))
	}
	if v.Has("externalId") {
		if err := checkText("externalId", v.Get("externalId")); err != nil {
			return q, err
		}
		q.filter.ExternalID = v.Get("externalId")
		q.params.Set("externalId", q.filter.ExternalID)
	}
	if v.Has("q") {
		if err := checkText("q", v.Get("q")); err != nil {
			return q, err
		}
		q.filter.Search = v.Get("q")
		q.params.Set("q", q.filter.Search)
	}
	if q.limit, err = pageLimit(v); err != nil {
		return q, err
	}
	q.after, err = pageCursor(v)
	return q, err
}

// pageLimit is a page's limit query parameter: 1 to maxPageSize, by default
// defaultPageSize.
func pageLimit(v url.Values) (int, error) {
	if !v.Has("limit") {
		return defaultPageSize, nil
	}
	return limitOf(v.Get("limit"))
}

// pageCursor is where a page begins: after the id its cursor names.
func pageCursor(v url.Values) (int64, error) {
	if !v.Has("cursor") {
		return 0, nil
	}
	after, ok := decodeCursor(v.Get("cursor"))
	if !ok {
		return 0, errorf(codeInvalidRequest, "cursor is malformed: pass the cursor of a Link rel=\"next\" URL unchanged")
	}
	return after, nil
}

// nextPageLink is the Link to the page of path after id last, with the
// query's other parameters and its limit.
func nextPageLink(path string, params url.Values, limit int, last int64) string {
	p := url.Values{}
	for name, values := range params {
		p[name] = values
	}
	p.Set("limit", strconv.Itoa(limit))
	p.Set("cursor", encodeCursor(last))
	return "<" + path + "?" + p.Encode() + `>; rel="next"`
}

func (q adminKeysQuery) nextLink(last int64) string {
	return nextPageLink("/admin/v1/keys", q.params, q.limit, last)
}

func handleAdminGetKey(d adminDeps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := idParam(r, "a key")
		if err != nil {
			writeError(w, r, err)
			return
		}
		d.answerKey(w, r, http.StatusOK, id, "")
	})
}

// idParam is the {id} of the path: the id of of (a key, a webhook
// endpoint).
func idParam(r *http.Request, of string) (int64, error) {
	id, ok := parseID(r.PathValue("id"))
	if !ok {
		return 0, errorf(codeInvalidRequest, "id must be %s's id, an integer from 1 to 9223372036854775807", of)
	}
	return id, nil
}

// answerKey answers with key id's object: with status 200, or 201 for a
// key just made, with its Location and token.
func (d adminDeps) answerKey(w http.ResponseWriter, r *http.Request, status int, id int64, token string) {
	row, err := d.keyObject(r.Context(), id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if status != http.StatusCreated {
		writeJSON(w, r, status, row)
		return
	}
	w.Header().Set("Location", "/admin/v1/keys/"+strconv.FormatInt(id, 10))
	writeJSON(w, r, status, createdKey{row, token})
}

// keyObject is key id as the admin API shows it; an unknown id is
// not_found.
func (d adminDeps) keyObject(ctx context.Context, id int64) (listedKey, error) {
	k, all, err := findKey(ctx, d.store, id)
	if err != nil {
		return listedKey{}, err
	}
	rows, err := listedKeys(ctx, d.store, all, []domain.Key{k}, d.now())
	if err != nil {
		return listedKey{}, err
	}
	return rows[0], nil
}

// findKey is key id, with every key there is; an unknown id is not_found.
func findKey(ctx context.Context, store storage, id int64) (domain.Key, []domain.Key, error) {
	all, err := store.Keys(ctx)
	if err != nil {
		return domain.Key{}, nil, err
	}
	i := slices.IndexFunc(all, func(k domain.Key) bool { return k.ID == id })
	if i < 0 {
		return domain.Key{}, nil, domain.NotFound("no API key has id %d", id)
	}
	return all[i], all, nil
}

func handleAdminUpdateKey(d adminDeps) http.Handler {
	fields := []string{"plan", "perMinute", "perDay", "name", "scopes", "expires", "externalId"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := idParam(r, "a key")
		if err != nil {
			writeError(w, r, err)
			return
		}
		body, err := decodeObject(w, r, fields, "a change of a key has only "+strings.Join(fields, ", "))
		if err != nil {
			writeError(w, r, err)
			return
		}
		now := d.now()
		change, err := keyChangeOf(jsonBody(body), now)
		if err != nil {
			writeError(w, r, err)
			return
		}
		apply := func(k domain.Key) (domain.Key, error) { return change.Apply(k, now, domain.JSONFields) }
		if _, _, err := d.store.UpdateKey(r.Context(), id, apply, recordOf(w).admin.Actor()); err != nil {
			writeError(w, r, err)
			return
		}
		d.answerKey(w, r, http.StatusOK, id, "")
	})
}

// keyChangeOf is the change a PATCH body asks for: only its fields.
func keyChangeOf(body jsonBody, now time.Time) (domain.KeyChange, error) {
	var c domain.KeyChange
	if len(body) == 0 {
		return c, errorf(codeInvalidRequest, "the body changes nothing: give at least one of plan, perMinute, perDay, name, scopes, expires, externalId")
	}
	if _, ok := body["plan"]; ok {
		c.Plan = new(string)
		if err := body.str("plan", c.Plan); err != nil {
			return c, err
		}
		*c.Plan = domain.PlanName(*c.Plan)
		if !domain.KnownPlan(*c.Plan) {
			return c, errorf(codeInvalidRequest, "unknown plan %q: choose free, pro, business or enterprise", *c.Plan)
		}
	}
	for name, dst := range map[string]**int64{"perMinute": &c.PerMinute, "perDay": &c.PerDay} {
		if _, ok := body[name]; ok {
			*dst = new(int64)
			if err := body.int(name, *dst); err != nil {
				return c, err
			}
		}
	}
	if _, ok := body["name"]; ok {
		c.Name = new(string)
		if err := body.name(c.Name); err != nil {
			return c, err
		}
	}
	if _, ok := body["scopes"]; ok {
		c.Scopes = new(domain.ScopeSet)
		if err := body.scopes(c.Scopes); err != nil {
			return c, err
		}
	}
	if _, ok := body["expires"]; ok {
		c.Expires = new(time.Time)
		if err := body.expires(c.Expires, now); err != nil {
			return c, err
		}
	}
	if _, ok := body["externalId"]; ok {
		c.ExternalID = new(string)
		if err := body.externalID(c.ExternalID, true); err != nil {
			return c, err
		}
	}
	return c, nil
}

func handleAdminRollKey(d adminDeps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := idParam(r, "a key")
		if err != nil {
			writeError(w, r, err)
			return
		}
		overlap, err := overlapBody(w, r, defaultRollOverlap, "a roll has only overlap", keyOverlapAtZero)
		if err != nil {
			writeError(w, r, err)
			return
		}
		// The new key is of the old one's environment, as keys roll makes it.
		old, _, err := findKey(r.Context(), d.store, id)
		if err != nil {
			writeError(w, r, err)
			return
		}
		token := newKey(old.Env)
		hash := hashKey(token)
		_, rolled, err := d.store.RollKey(r.Context(), id, hash[:], overlap, recordOf(w).admin.Actor())
		if err != nil {
			writeError(w, r, err)
			return
		}
		d.answerKey(w, r, http.StatusCreated, rolled.ID, token)
	})
}

// overlapBody reads the body of a roll or a rotation: none, or an object
// with only overlap; def when it names none. A request has a body when it
// says so, by its length or by its Content-Type.
func overlapBody(w http.ResponseWriter, r *http.Request, def time.Duration, only, atZero string) (time.Duration, error) {
	if r.ContentLength == 0 && firstHeader(r.Header, "Content-Type") == "" {
		return def, nil
	}
	body, err := decodeObject(w, r, []string{"overlap"}, only)
	if err != nil {
		return 0, err
	}
	if _, ok := body["overlap"]; !ok {
		return def, nil
	}
	var s string
	if err := jsonBody(body).str("overlap", &s); err != nil {
		return 0, err
	}
	return overlapOf("overlap", s, atZero)
}

// defaultRollOverlap is how long the old key of a roll works on beside the
// new one when nobody says (keys roll --overlap's default).
const defaultRollOverlap = 24 * time.Hour

func handleAdminRevokeKey(d adminDeps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := idParam(r, "a key")
		if err != nil {
			writeError(w, r, err)
			return
		}
		if _, err := d.store.RevokeKey(r.Context(), id, recordOf(w).admin.Actor()); err != nil {
			writeError(w, r, err)
			return
		}
		d.answerKey(w, r, http.StatusOK, id, "")
	})
}

func handleAdminKeyUsage(d adminDeps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := idParam(r, "a key")
		if err != nil {
			writeError(w, r, err)
			return
		}
		v := r.URL.Query()
		days := defaultUsageDays
		if v.Has("days") {
			if days, err = usageDays("days", v.Get("days")); err != nil {
				writeError(w, r, err)
				return
			}
		}
		rows, err := keyUsage(r.Context(), d.store, id, days, d.now())
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, r, http.StatusOK, rows)
	})
}

// usageDays reads how many days a usage report covers, given as field: 1
// to maxUsageDays.
func usageDays(field, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxUsageDays || !domain.IsDigits(s) {
		return 0, domain.Invalid("%s must be an integer from 1 to %d", field, maxUsageDays)
	}
	return n, nil
}

// keyUsage is the usage history of key id's budget over the days days
// ending today: one row a day, oldest first. An unknown id is not_found.
func keyUsage(ctx context.Context, store storage, id int64, days int, now time.Time) ([]domain.UsageDay, error) {
	k, _, err := findKey(ctx, store, id)
	if err != nil {
		return nil, err
	}
	budget := k.BudgetID
	history, err := store.UsageHistory(ctx, budget, firstUsageDay(days, now))
	if err != nil {
		return nil, err
	}
	return usageWindow(budget, history, days, now), nil
}

func handleAdminAudit(d adminDeps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.URL.Query()
		f, params, err := parseAdminAuditQuery(v, d.now())
		if err != nil {
			writeError(w, r, err)
			return
		}
		limit := f.Limit
		f.Limit++ // one more tells whether a next page exists
		events, err := d.store.AuditEvents(r.Context(), f)
		if err != nil {
			writeError(w, r, err)
			return
		}
		if len(events) > limit {
			events = events[:limit]
			w.Header().Set("Link", nextPageLink("/admin/v1/audit", params, limit, events[limit-1].ID))
		}
		writeJSON(w, r, http.StatusOK, auditJSONOf(events))
	})
}

// parseAdminAuditQuery reads GET /admin/v1/audit's query: the filter, with
// its page, and the parameters to keep in the next page's Link.
func parseAdminAuditQuery(v url.Values, now time.Time) (domain.AuditFilter, url.Values, error) {
	var f domain.AuditFilter
	params := url.Values{}
	for _, name := range []string{"since", "key", "action", "limit", "cursor"} {
		if len(v[name]) > 1 {
			return f, nil, errorf(codeInvalidRequest, "%s must be given at most once", name)
		}
	}
	var err error
	if f.Since, err = auditSince("since", v.Get("since"), v.Has("since"), now); err != nil {
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
		if f.KeyID, ok = parseID(s); !ok {
			return f, nil, errorf(codeInvalidRequest, "key must be a key's id, an integer from 1 to 9223372036854775807")
		}
		params.Set("key", s)
	}
	f.Action = v.Get("action")
	if err := checkAuditAction("action", f.Action); err != nil {
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

// jsonBody is a request body's fields, raw, as decodeObject read them.
type jsonBody map[string]json.RawMessage

// str reads field name, a string, into dst; absent leaves dst.
func (b jsonBody) str(name string, dst *string) error {
	raw, ok := b[name]
	if !ok {
		return nil
	}
	if string(raw) == "null" || json.Unmarshal(raw, dst) != nil {
		return errorf(codeInvalidRequest, "%s must be a string", name)
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
		return errorf(codeInvalidRequest, "%s must be an integer of 1 or more", name)
	}
	return nil
}

// externalID reads a key's externalId into dst by checkExternalID's rule;
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
	return checkExternalID("externalId", *dst)
}

// name reads the name of a key.
func (b jsonBody) name(dst *string) error {
	if err := b.str("name", dst); err != nil {
		return err
	}
	if err := checkLabel("name", *dst); err != nil {
		return errorf(codeInvalidRequest, "%s", err.Error())
	}
	return nil
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
		return errorf(codeInvalidRequest, "scopes must be an array of one or more of %s", strings.Join(domain.AllScopes.Names(), ", "))
	}
	s, name, ok := domain.ParseScopes(names, domain.AllScopes)
	if !ok {
		return errorf(codeInvalidRequest, "scopes: unknown scope %q; the scopes of a key are %s", name, domain.KnownScopes)
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
		return errorf(codeInvalidRequest, "expires must be an RFC 3339 time, a duration from now (90d) or null for never")
	}
	at, err := expiresOf("expires", s, "null (never)", now)
	if err != nil {
		return err
	}
	*dst = at
	return nil
}
