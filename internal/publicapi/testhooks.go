package publicapi

import (
	"net/http"
	"time"

	"petstore/internal/httpapi"
	"petstore/internal/limits"
	"petstore/internal/petcopy"
)

// The hooks below are for the tests that hold the /v1 API's parsers and
// headers to references of their own (fuzz_test.go and
// ratelimit_headers_test.go, in an external test package: it starts a
// server through internal/servertest, and an in-package test file would
// make every package between the two compile again for this package's
// tests) and internal/server's check of the OpenAPI document against the
// code (openapi_test.go). Nothing else calls them.

// ParseListQuery reads a listPets query string as the handler does.
func ParseListQuery(raw string) (petcopy.Query, error) { return parseListQuery(raw) }

// EachQueryParam calls fn with each name and value of a query string, as
// the handler reads them.
func EachQueryParam(raw string, fn func(name, value string)) error { return eachQueryParam(raw, fn) }

// IdempotencyKey reads a request's Idempotency-Key as createPet does.
func IdempotencyKey(h http.Header) (key string, ok bool, err error) { return idempotencyKey(h) }

// MaxIdempotencyKeyLen is the longest Idempotency-Key taken.
const MaxIdempotencyKeyLen = maxIdempotencyKeyLen

// Deprecation is when getPet was declared deprecated and its sunset.
func Deprecation() (since, sunsetAt time.Time) { return deprecatedSince, sunset }

// RateLimitHeaders are the headers a request's decision d is answered with.
func RateLimitHeaders(d *limits.Decision) http.Header {
	h := http.Header{}
	setRateLimitHeaders(h, &httpapi.Record{}, d)
	return h
}
