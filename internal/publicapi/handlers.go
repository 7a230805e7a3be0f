package publicapi

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/petcopy"
)

// getPet is deprecated (docs/api.md, "Deprecation"): declared on deprecatedSince, removed
// at sunset.
var (
	deprecatedSince = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	sunset          = time.Date(2030, time.December, 5, 0, 0, 0, 0, time.UTC)
)

func ListPets(d Deps) http.Handler {
	pets, pages := d.Pets, &petcopy.Pages{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := parseListQuery(r.URL.RawQuery)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		answer, err := pages.Answer(r.Context(), pets, q)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		if answer.Link != nil {
			w.Header()["Link"] = answer.Link
		}
		httpapi.WriteBody(w, http.StatusOK, answer.Body)
	})
}

// parseListQuery validates limit, status and cursor. Other parameters are
// ignored, as a later version may add some; a known one given twice is an
// error, as it is ambiguous.
func parseListQuery(raw string) (petcopy.Query, error) {
	q := petcopy.Query{Limit: httpapi.DefaultPageSize}
	names := [...]string{"limit", "status", "cursor"}
	var given [len(names)]int
	var values [len(names)]string
	err := eachQueryParam(raw, func(name, value string) {
		for i := range names {
			if name == names[i] {
				if given[i] == 0 {
					values[i] = value
				}
				given[i]++
			}
		}
	})
	if err != nil {
		return q, err
	}
	for i, name := range names {
		if given[i] > 1 {
			return q, httpapi.Errorf(httpapi.CodeInvalidRequest, "%s must be given at most once", name)
		}
	}
	if given[0] == 1 {
		n, err := httpapi.LimitOf(values[0])
		if err != nil {
			return q, err
		}
		q.Limit = n
	}
	if v := values[1]; given[1] == 1 {
		if !domain.KnownStatus(v) {
			return q, httpapi.Errorf(httpapi.CodeInvalidRequest, "status must be one of available, pending, sold")
		}
		q.Status = v
	}
	if v := values[2]; given[2] == 1 {
		after, ok := domain.DecodeCursor(v)
		if !ok {
			return q, httpapi.Errorf(httpapi.CodeInvalidRequest, "cursor is malformed: pass the cursor of a Link rel=\"next\" URL unchanged")
		}
		q.After = after
	}
	return q, nil
}

// eachQueryParam calls fn with each name and value of a query string, as
// url.ParseQuery reads them, with errors that name the parameter at fault.
// Unlike url.ParseQuery it builds no map.
func eachQueryParam(raw string, fn func(name, value string)) error {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		rawName, rawValue, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(rawName)
		if err != nil {
			return httpapi.Errorf(httpapi.CodeInvalidRequest, "the query string has a malformed parameter name %q", rawName)
		}
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			return httpapi.Errorf(httpapi.CodeInvalidRequest, "%s has a malformed %%-escape: %q", name, rawValue)
		}
		fn(name, value)
	}
	return nil
}

func CreatePet(d Deps) http.Handler {
	pets, idem, now := d.Pets, newInflight(), d.Now
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, hasKey, err := idempotencyKey(r.Header)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		pet, err := httpapi.DecodeNewPet(w, r)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		ctx, cancel := pets.Deadline(r.Context())
		defer cancel()
		replayed := false
		if hasKey {
			pet, replayed, err = createOnce(ctx, pets, idem, now, httpapi.RecordOf(w).Key().ID, key, pet)
		} else {
			pet, err = pets.Create(ctx, pet, nil)
		}
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		h := w.Header()
		h["Location"] = []string{"/v1/pets/" + strconv.FormatInt(pet.ID, 10)}
		if replayed {
			h["Idempotent-Replayed"] = []string{"true"}
		}
		httpapi.WriteBody(w, http.StatusCreated, append(petcopy.AppendPet(nil, &pet), '\n'))
	})
}

func GetPet(d Deps) http.Handler {
	pets := d.Pets
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := domain.ParseID(r.PathValue("petId"))
		if !ok {
			httpapi.WriteError(w, httpapi.Errorf(httpapi.CodeInvalidRequest, "petId must be an integer from 1 to 9223372036854775807"))
			return
		}
		body, err := pets.Get(r.Context(), id)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		httpapi.WriteBody(w, http.StatusOK, body)
	})
}

// Deprecated marks every response of a deprecated operation (RFC 9745 and
// RFC 8594) and points at its successor.
func Deprecated(next http.Handler) http.Handler {
	deprecation := []string{"@" + strconv.FormatInt(deprecatedSince.Unix(), 10)}
	sunsetAt := []string{sunset.Format(http.TimeFormat)}
	link := []string{`</v1/pets>; rel="successor-version"`}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Deprecation"] = deprecation
		h["Sunset"] = sunsetAt
		h["Link"] = link
		next.ServeHTTP(w, r)
	})
}

func NotImplemented() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, httpapi.Errorf(httpapi.CodeNotImplemented, "%s is not implemented in this version", r.URL.Path))
	})
}

// GET /v1/rate_limit: a caller's plan and both windows, read without
// spending anything (GitHub's GET /rate_limit is the model).

// Uncounted sends a request with a valid key that holds need to peeked,
// which reports the key's rate-limit state itself without spending any, and
// every other request to counted: limited and refused, as anywhere (by
// client address without a key; a key without the scope spends a request
// on its 403, as on any operation).
func Uncounted(need domain.ScopeSet, peeked, counted http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if key := httpapi.RecordOf(w).Key(); key == nil || !key.Scopes.Has(need) {
			counted.ServeHTTP(w, r)
			return
		}
		peeked.ServeHTTP(w, r)
	})
}

// RateLimit answers the caller's plan and windows, with the usual
// headers, which describe the same state: nothing is spent. A caller over a
// limit is still answered (with nothing remaining); a banned one is refused
// as everywhere, and this request does not count towards a ban.
func RateLimit(d Deps) http.Handler {
	limiter := d.Limiter
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := httpapi.RecordOf(w)
		key := info.Peeking()
		id, lim := key.Budget()
		s, err := limiter.Peek(r.Context(), id, lim)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		info.Decided(&s.Decision)
		setRateLimitHeaders(w.Header(), info, &s.Decision)
		if !s.Allowed {
			httpapi.Refuse(w, r, &s.Decision)
			return
		}
		httpapi.WriteBody(w, http.StatusOK, httpapi.AppendRateLimitStatus(make([]byte, 0, 160), key, s))
	})
}
