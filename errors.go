package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// Error codes: the machine-readable `code` of the Error shape. README.md and
// openapi.yaml list them; codeStatus maps each to its HTTP status.
const (
	codeInvalidRequest       = "invalid_request"
	codeInvalidJSON          = "invalid_json"
	codeUnauthorized         = "unauthorized"
	codeInsufficientScope    = "insufficient_scope"
	codeNotFound             = "not_found"
	codeMethodNotAllowed     = "method_not_allowed"
	codeIdempotencyConflict  = "idempotency_conflict"
	codeConflict             = "conflict" // the admin API's: a resource that exists already
	codePayloadTooLarge      = "payload_too_large"
	codeUnsupportedMediaType = "unsupported_media_type"
	codeIdempotencyMismatch  = "idempotency_mismatch"
	codeRateLimited          = "rate_limited"
	codeTemporarilyBanned    = "temporarily_banned"
	codeInternal             = "internal_error"
	codeNotImplemented       = "not_implemented"
	codeUnavailable          = "unavailable"
)

// adminOnlyCodes are the codes only the admin API answers: openapi.yaml
// (the pet API) leaves them out, admin-openapi.yaml has them.
var adminOnlyCodes = []string{codeConflict}

var codeStatus = map[string]int{
	codeInvalidRequest:       http.StatusBadRequest,
	codeInvalidJSON:          http.StatusBadRequest,
	codeUnauthorized:         http.StatusUnauthorized,
	codeInsufficientScope:    http.StatusForbidden,
	codeNotFound:             http.StatusNotFound,
	codeMethodNotAllowed:     http.StatusMethodNotAllowed,
	codeIdempotencyConflict:  http.StatusConflict,
	codeConflict:             http.StatusConflict,
	codePayloadTooLarge:      http.StatusRequestEntityTooLarge,
	codeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	codeIdempotencyMismatch:  http.StatusUnprocessableEntity,
	codeRateLimited:          http.StatusTooManyRequests,
	codeTemporarilyBanned:    http.StatusTooManyRequests,
	codeInternal:             http.StatusInternalServerError,
	codeNotImplemented:       http.StatusNotImplemented,
	codeUnavailable:          http.StatusServiceUnavailable,
}

// Error is a failure a client is told about: its code decides the HTTP status
// and its message is shown as it is. Any other error is a bug or an outage and
// is answered with a fixed 500 message, never its text.
type Error struct {
	Code    string
	Message string
	cause   error     // what went wrong underneath, for the log; never shown
	db      dbFailure // why the database could not serve the request; 0 when it is not that
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func (e *Error) Unwrap() error { return e.cause }

// dbFailure is why the database could not serve a request, answered 503: the
// cause label of petstore_database_unavailable_total.
type dbFailure uint8

const (
	dbTimeout       dbFailure = iota + 1 // no answer by the deadline (--db-timeout)
	dbPoolExhausted                      // no connection free by the deadline, or too many creates already waiting
	dbRefused                            // the database refused or cut the connection, or the disk refused the write
	dbFailures                           // how many causes there are, plus one
)

var dbFailureNames = [dbFailures]string{dbTimeout: "timeout", dbPoolExhausted: "pool_exhausted", dbRefused: "refused"}

// dbFailureMessages say what each cause means to a client.
var dbFailureMessages = [dbFailures]string{
	dbTimeout:       "the database did not answer in time; retry later",
	dbPoolExhausted: "the database is too busy to take this request now; retry later",
	dbRefused:       "the database is unavailable right now; retry later",
}

// errDatabase is the answer when the database cannot serve a request right
// now: 503, which a client may retry. The cause goes to the request's log.
func errDatabase(failure dbFailure, cause error) *Error {
	return &Error{Code: codeUnavailable, Message: dbFailureMessages[failure], cause: cause, db: failure}
}

// errOutcomeUnknown is the answer to a create that reached the database,
// which then failed to say whether it committed: the pet may be stored.
// The same request sent again with its Idempotency-Key settles it.
func errOutcomeUnknown(failure dbFailure, cause error) *Error {
	return &Error{Code: codeUnavailable, cause: cause, db: failure,
		Message: "the database did not confirm the create in time, so the pet may or may not have been stored: " +
			"retry with the same Idempotency-Key, which returns the first pet if it was stored and creates it once if not"}
}

// dbFailureOf is why err says the database could not serve a request, or 0
// when it does not.
func dbFailureOf(err error) dbFailure {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.db
	}
	return 0
}

// retryUnavailable is the Retry-After of a 503: soon, as the database is
// probed twice a second and a server back in service is ready at once.
var retryUnavailable = []string{"1"}

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// writeError writes err in the Error shape. An error that is not an *Error is
// kept on the request's log entry and answered as 500 internal_error.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		requestLog(w).err = err
		e = &Error{Code: codeInternal, Message: "the server failed to handle the request; it has been logged"}
	} else if e.cause != nil {
		requestLog(w).err = e.cause
	}
	status, ok := codeStatus[e.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if status == http.StatusServiceUnavailable {
		requestLog(w).db = e.db
		if _, set := w.Header()["Retry-After"]; !set {
			w.Header()["Retry-After"] = retryUnavailable
		}
	}
	b := make([]byte, 0, 64+len(e.Message))
	b = append(b, `{"code":`...)
	b = appendJSONString(b, e.Code)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, e.Message)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, "}\n"...)
	writeBody(w, status, b)
}

// writeJSON sends v encoded as JSON (the admin API's answers).
func writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeBody(w, status, append(b, '\n'))
}

// writeBody sends an already encoded JSON body.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	// net/http buffers a body this small and, when the handler returns,
	// sends its Content-Length itself, without a header map entry.
	if len(body) >= httpBufferedBody {
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	w.WriteHeader(status)
	w.Write(body)
}

// httpBufferedBody is net/http's bufferBeforeChunkingSize: a response body
// shorter than this, written before the handler returns, gets a
// Content-Length from net/http. TestEveryResponseHasAContentLength holds
// net/http to it.
const httpBufferedBody = 2048

var jsonContentType = []string{"application/json"}
