package adminapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/manage"
)

// The admin API's routes of keys (docs/admin.md, "The routes"): create,
// list, get, change, roll and revoke a key, and read its usage and limits.

// CreatedKey is a key made by the admin API: the key object and, this once,
// the key itself.
type CreatedKey struct {
	AdminKey
	Key string `json:"key"`
}

func CreateKey(d Deps, env string) http.Handler {
	fields := []string{"plan", "name", "perMinute", "perDay", "expires", "scopes", "externalId"}
	return route(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		body, err := httpapi.DecodeObject(w, r, fields, "a new key has only "+strings.Join(fields, ", "))
		if err != nil {
			return 0, nil, err
		}
		terms, err := newKeyTerms(jsonBody(body), env, d.Now())
		if err == nil {
			err = manage.RefuseSecrets(r.Context(), d.Secrets, manage.JSONTexts, &terms.Name, &terms.ExternalID)
		}
		if err != nil {
			return 0, nil, err
		}
		k, token, err := manage.CreateKey(r.Context(), d.Keys, terms, httpapi.RecordOf(w).Admin().Actor())
		if err != nil {
			return 0, nil, err
		}
		return d.answerKey(w, r, http.StatusCreated, k.ID, token)
	})
}

// newKeyTerms are the terms of a key that body asks for, by the rules of
// keys create.
func newKeyTerms(body jsonBody, env string, now time.Time) (domain.Key, error) {
	k := domain.Key{Env: env, Scopes: domain.AllScopes}
	var perMinute, perDay int64
	if err := firstError(body.str("plan", &k.Plan), body.int("perMinute", &perMinute), body.int("perDay", &perDay)); err != nil {
		return k, err
	}
	k.Plan = domain.PlanName(k.Plan)
	lim, err := domain.LimitsOf(k.Plan, perMinute, perDay, domain.JSONFields)
	if err != nil {
		return k, err
	}
	k.PerMinute, k.PerDay = lim.PerMinute, lim.PerDay
	return k, firstError(body.name(&k.Name), body.scopes(&k.Scopes), body.expires(&k.ExpiresAt, now), body.externalID(&k.ExternalID, false))
}

func ListKeys(d Deps) http.Handler {
	return route(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		q, err := parseAdminKeysQuery(r.URL.Query())
		if err != nil {
			return 0, nil, err
		}
		all, err := manage.EnvKeys(r.Context(), d.Keys, d.Env)
		if err != nil {
			return 0, nil, err
		}
		now := d.Now()
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
		rows, err := d.listedWithBans(r.Context(), all, page)
		if err == nil && more {
			w.Header().Set("Link", nextPageLink("/admin/v1/keys", q.params, q.limit, page[len(page)-1].ID))
		}
		return http.StatusOK, rows, err
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
	q := adminKeysQuery{params: url.Values{}}
	if err := atMostOnce(v, "plan", "idle", "expiring", "revoked", "externalId", "q", "limit", "cursor"); err != nil {
		return q, err
	}
	if plan := domain.PlanName(v.Get("plan")); v.Has("plan") {
		if !domain.KnownPlan(plan) {
			return q, httpapi.Errorf(httpapi.CodeInvalidRequest, "plan must be one of free, pro, business, enterprise, not %q", plan)
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
	if revoked := v.Get("revoked"); v.Has("revoked") {
		if revoked != "true" && revoked != "false" {
			return q, httpapi.Errorf(httpapi.CodeInvalidRequest, "revoked must be true or false, not %q", revoked)
		}
		is := revoked == "true"
		q.filter.Revoked = &is
	}
	for _, name := range []string{"externalId", "q"} {
		if err := manage.CheckText(name, v.Get(name)); err != nil && v.Has(name) {
			return q, err
		}
	}
	q.filter.ExternalID, q.filter.Search = v.Get("externalId"), v.Get("q")
	for _, name := range []string{"idle", "expiring", "revoked", "externalId", "q"} {
		if v.Has(name) {
			q.params.Set(name, v.Get(name))
		}
	}
	if q.limit, err = pageLimit(v); err != nil {
		return q, err
	}
	q.after, err = pageCursor(v)
	return q, err
}

func GetKey(d Deps) http.Handler {
	return withPathID("a key", func(w http.ResponseWriter, r *http.Request, id int64) (int, any, error) {
		return d.answerKey(w, r, http.StatusOK, id, "")
	})
}

// answerKey answers with key id's object (an unknown id, or another
// environment's, is not_found):
// with status 200, or 201 for a key just made, with its Location and token.
func (d Deps) answerKey(w http.ResponseWriter, r *http.Request, status int, id int64, token string) (int, any, error) {
	k, all, err := manage.FindKey(r.Context(), d.Keys, d.Env, id)
	if err != nil {
		return 0, nil, err
	}
	rows, err := d.listedWithBans(r.Context(), all, []domain.Key{k})
	switch {
	case err != nil:
		return 0, nil, err
	case status == http.StatusCreated:
		w.Header().Set("Location", "/admin/v1/keys/"+strconv.FormatInt(id, 10))
		return status, CreatedKey{rows[0], token}, nil
	}
	return status, rows[0], nil
}

func UpdateKey(d Deps) http.Handler {
	fields := []string{"plan", "perMinute", "perDay", "name", "scopes", "expires", "externalId"}
	return withPathID("a key", func(w http.ResponseWriter, r *http.Request, id int64) (int, any, error) {
		body, err := httpapi.DecodeObject(w, r, fields, "a change of a key has only "+strings.Join(fields, ", "))
		if err != nil {
			return 0, nil, err
		}
		now := d.Now()
		change, err := keyChangeOf(jsonBody(body), now)
		if err == nil {
			err = manage.RefuseSecrets(r.Context(), d.Secrets, manage.JSONTexts, change.Name, change.ExternalID)
		}
		if err != nil {
			return 0, nil, err
		}
		apply := func(k domain.Key) (domain.Key, error) { return change.Apply(k, now, domain.JSONFields) }
		if _, err := manage.UpdateKey(r.Context(), d.Keys, d.Env, id, apply, httpapi.RecordOf(w).Admin().Actor()); err != nil {
			return 0, nil, err
		}
		return d.answerKey(w, r, http.StatusOK, id, "")
	})
}

// keyChangeOf is the change a PATCH body asks for: only its fields.
func keyChangeOf(body jsonBody, now time.Time) (domain.KeyChange, error) {
	var c domain.KeyChange
	if len(body) == 0 {
		return c, httpapi.Errorf(httpapi.CodeInvalidRequest, "the body changes nothing: give at least one of plan, perMinute, perDay, name, scopes, expires, externalId")
	}
	if _, ok := body["plan"]; ok {
		c.Plan = new(string)
		if err := body.str("plan", c.Plan); err != nil {
			return c, err
		}
		*c.Plan = domain.PlanName(*c.Plan)
		if !domain.KnownPlan(*c.Plan) {
			return c, httpapi.Errorf(httpapi.CodeInvalidRequest, "unknown plan %q: choose free, pro, business or enterprise", *c.Plan)
		}
	}
	return c, firstError(
		changed(body, "perMinute", &c.PerMinute, func(v *int64) error { return body.int("perMinute", v) }),
		changed(body, "perDay", &c.PerDay, func(v *int64) error { return body.int("perDay", v) }),
		changed(body, "name", &c.Name, body.name),
		changed(body, "scopes", &c.Scopes, body.scopes),
		changed(body, "expires", &c.Expires, func(v *time.Time) error { return body.expires(v, now) }),
		changed(body, "externalId", &c.ExternalID, func(v *string) error { return body.externalID(v, true) }),
	)
}

// changed reads field name of a change with read into a new *dst, when the
// body has it; absent leaves *dst nil: no change.
func changed[T any](body jsonBody, name string, dst **T, read func(*T) error) error {
	if _, ok := body[name]; !ok {
		return nil
	}
	*dst = new(T)
	return read(*dst)
}

func RollKey(d Deps) http.Handler {
	return withPathID("a key", func(w http.ResponseWriter, r *http.Request, id int64) (int, any, error) {
		overlap, err := overlapBody(w, r, defaultRollOverlap, "a roll has only overlap", manage.KeyOverlapAtZero)
		if err != nil {
			return 0, nil, err
		}
		// Only a key of this server's environment, and the new key is of it.
		_, rolled, token, err := manage.RollKey(r.Context(), d.Keys, d.Env, id, overlap, httpapi.RecordOf(w).Admin().Actor())
		if err != nil {
			return 0, nil, err
		}
		return d.answerKey(w, r, http.StatusCreated, rolled.ID, token)
	})
}

// overlapBody reads the body of a roll or a rotation: none, or an object
// with only overlap; def when it names none. A request has a body when it
// says so, by its length or by its Content-Type.
func overlapBody(w http.ResponseWriter, r *http.Request, def time.Duration, only, atZero string) (time.Duration, error) {
	if r.ContentLength == 0 && httpapi.FirstHeader(r.Header, "Content-Type") == "" {
		return def, nil
	}
	body, err := httpapi.DecodeObject(w, r, []string{"overlap"}, only)
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
	return manage.OverlapOf("overlap", s, atZero)
}

// defaultRollOverlap is how long the old key of a roll works on beside the
// new one when nobody says (keys roll --overlap's default).
const defaultRollOverlap = 24 * time.Hour

func RevokeKey(d Deps) http.Handler {
	return withPathID("a key", func(w http.ResponseWriter, r *http.Request, id int64) (int, any, error) {
		if _, err := manage.RevokeKey(r.Context(), d.Keys, d.Env, id, httpapi.RecordOf(w).Admin().Actor()); err != nil {
			return 0, nil, err
		}
		return d.answerKey(w, r, http.StatusOK, id, "")
	})
}

func KeyUsage(d Deps) http.Handler {
	return withPathID("a key", func(w http.ResponseWriter, r *http.Request, id int64) (int, any, error) {
		v := r.URL.Query()
		if err := atMostOnce(v, "days"); err != nil {
			return 0, nil, err
		}
		days := manage.DefaultUsageDays
		if v.Has("days") {
			var err error
			if days, err = manage.UsageDays("days", v.Get("days")); err != nil {
				return 0, nil, err
			}
		}
		rows, err := manage.KeyUsage(r.Context(), struct {
			domain.KeyStore
			domain.UsageHistoryStore
		}{d.Keys, d.History}, d.Env, id, days, d.Now())
		return http.StatusOK, rows, err
	})
}

// KeyLimits answers a key's plan, scopes and both windows now,
// in the shape of GET /v1/rate_limit, read from the limiter without
// spending anything and without counting in the key's usage, and its ban
// in force (null when none). The keys of a roll share their windows and
// their ban. A banned key's windows are shown as they are.
func KeyLimits(d Deps) http.Handler {
	return withPathID("a key", func(w http.ResponseWriter, r *http.Request, id int64) (int, any, error) {
		k, _, err := manage.FindKey(r.Context(), d.Keys, d.Env, id)
		if err != nil {
			return 0, nil, err
		}
		budget, lim := k.Budget()
		s, err := d.Limiter.Peek(r.Context(), budget, lim)
		if err != nil {
			return 0, nil, err
		}
		bans, err := d.keyBans(r.Context())
		if err != nil {
			return 0, nil, err
		}
		var ban *KeyBan
		if b, ok := bans[k.BudgetID]; ok {
			ban = &b
		}
		// Already JSON, which json.Marshal leaves as it is.
		status := json.RawMessage(httpapi.AppendRateLimitStatus(make([]byte, 0, 160), &k, s))
		return http.StatusOK, keyLimits{status, ban}, nil
	})
}
