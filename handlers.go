package main

import (
	_ "embed"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"petstore/internal/domain"
	"petstore/internal/petcopy"
	"petstore/internal/store"
)

//go:embed openapi.yaml
var openapiYAML []byte

// getPet is deprecated (docs/api.md, "Deprecation"): declared on deprecatedSince, removed
// at sunset.
var (
	deprecatedSince = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	sunset          = time.Date(2030, time.December, 5, 0, 0, 0, 0, time.UTC)
)

const (
	defaultPageSize = 20
	maxPageSize     = 100
)

// healthCheck tells whether r is a load balancer's or an orchestrator's
// probe (GET or HEAD /healthz or /readyz): its answers are not the API's,
// so they are logged at DEBUG, and a 503 of /readyz during an outage (ten a
// second from each prober) is neither an ERROR line nor a 5xx of the
// request metrics; the outage is
// logged once as it starts and once as it ends, and petstore_database_down
// follows it.
func healthCheck(r *http.Request) bool {
	return r.Pattern == "GET /readyz" || r.Pattern == "GET /healthz"
}

func handleListPets(pets *petcopy.Cache, pages *petcopy.Pages) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := parseListQuery(r.URL.RawQuery)
		if err != nil {
			writeError(w, r, err)
			return
		}
		answer, err := pages.Answer(r.Context(), pets, q)
		if err != nil {
			writeError(w, r, err)
			return
		}
		if answer.Link != nil {
			w.Header()["Link"] = answer.Link
		}
		writeBody(w, http.StatusOK, answer.Body)
	})
}

// parseListQuery validates limit, status and cursor. Other parameters are
// ignored, as a later version may add some; a known one given twice is an
// error, as it is ambiguous.
func parseListQuery(raw string) (petcopy.Query, error) {
	q := petcopy.Query{Limit: defaultPageSize}
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
			return q, errorf(codeInvalidRequest, "%s must be given at most once", name)
		}
	}
	if given[0] == 1 {
		n, err := limitOf(values[0])
		if err != nil {
			return q, err
		}
		q.Limit = n
	}
	if v := values[1]; given[1] == 1 {
		if !validStatus(v) {
			return q, errorf(codeInvalidRequest, "status must be one of available, pending, sold")
		}
		q.Status = v
	}
	if v := values[2]; given[2] == 1 {
		after, ok := domain.DecodeCursor(v)
		if !ok {
			return q, errorf(codeInvalidRequest, "cursor is malformed: pass the cursor of a Link rel=\"next\" URL unchanged")
		}
		q.After = after
	}
	return q, nil
}

// limitOf reads a page's limit, of pets or of the admin API's lists: an
// integer from 1 to maxPageSize, in plain digits.
func limitOf(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxPageSize || !domain.IsDigits(s) {
		return 0, errorf(codeInvalidRequest, "limit must be an integer from 1 to %d", maxPageSize)
	}
	return n, nil
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
			return errorf(codeInvalidRequest, "the query string has a malformed parameter name %q", rawName)
		}
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			return errorf(codeInvalidRequest, "%s has a malformed %%-escape: %q", name, rawValue)
		}
		fn(name, value)
	}
	return nil
}

func validStatus(s string) bool {
	return s == "available" || s == "pending" || s == "sold"
}

func handleCreatePet(pets *petcopy.Cache, idem *inflight, now func() time.Time) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, hasKey, err := idempotencyKey(r.Header)
		if err != nil {
			writeError(w, r, err)
			return
		}
		pet, err := decodeNewPet(w, r)
		if err != nil {
			writeError(w, r, err)
			return
		}
		ctx, cancel := pets.Deadline(r.Context())
		defer cancel()
		replayed := false
		if hasKey {
			pet, replayed, err = createOnce(ctx, pets, idem, now, recordOf(w).key.ID, key, pet)
		} else {
			pet, err = pets.Create(ctx, pet, nil)
		}
		if err != nil {
			writeError(w, r, err)
			return
		}
		h := w.Header()
		h["Location"] = []string{"/v1/pets/" + strconv.FormatInt(pet.ID, 10)}
		if replayed {
			h["Idempotent-Replayed"] = []string{"true"}
		}
		writeBody(w, http.StatusCreated, append(petcopy.AppendPet(nil, &pet), '\n'))
	})
}

func handleGetPet(pets *petcopy.Cache) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := domain.ParseID(r.PathValue("petId"))
		if !ok {
			writeError(w, r, errorf(codeInvalidRequest, "petId must be an integer from 1 to 9223372036854775807"))
			return
		}
		body, err := pets.Get(r.Context(), id)
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeBody(w, http.StatusOK, body)
	})
}

// deprecated marks every response of a deprecated operation (RFC 9745 and
// RFC 8594) and points at its successor.
func deprecated(next http.Handler) http.Handler {
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

func handleNotImplemented() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, errorf(codeNotImplemented, "%s is not implemented in this version", r.URL.Path))
	})
}

func methodNotAllowed(allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, r, errorf(codeMethodNotAllowed, "method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow))
	})
}

func notFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, errorf(codeNotFound, "no resource at %s", r.URL.Path))
	})
}

// adminElsewhere answers the admin API's paths on the public listener: 404,
// with where the admin API is served.
func adminElsewhere() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, errorf(codeNotFound, "no resource at %s on this listener: the admin API is served only on the admin listener, "+
			"petstore serve --admin-addr HOST:PORT, under /admin/v1 (docs/admin.md)", r.URL.Path))
	})
}

func handleOpenAPI() http.Handler { return handleDocument(openapiYAML) }

// handleDocument serves an OpenAPI document (YAML).
func handleDocument(doc []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
		w.Write(doc)
	})
}

func handleHealth() http.Handler {
	body := []byte(`{"status":"ok"}` + "\n")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeBody(w, http.StatusOK, body)
	})
}

func handleReady(store store.Lifecycle, draining *atomic.Bool) http.Handler {
	body := []byte(`{"status":"ready"}` + "\n")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if draining.Load() {
			writeError(w, r, errorf(codeUnavailable, "the server is shutting down"))
			return
		}
		if err := store.Ping(r.Context()); err != nil {
			recordOf(w).failed(err, 0)
			writeError(w, r, errorf(codeUnavailable, "the database does not answer"))
			return
		}
		writeBody(w, http.StatusOK, body)
	})
}
