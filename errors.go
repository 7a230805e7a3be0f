package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"petstore/internal/appendjson"
	"petstore/internal/domain"
	"petstore/internal/limits"
)

// Error codes: the machine-readable `code` of the Error shape. README.md and
// openapi.yaml list them; codeStatus maps each to its HTTP status.
const (
	codeInvalidRequest       = "invalid_request"
	codeInvalidJSON          = "invalid_json"
	codeHTTPSRequired        = "https_required"
	codeUnauthorized         = "unauthorized"
	codeInsufficientScope    = "insufficient_scope"
	codeNotFound             = "not_found"
	codeMethodNotAllowed     = "method_not_allowed"
	codeIdempotencyConflict  = "idempotency_conflict"
	codeConflict             = "conflict" // the admin API's: a resource that exists already
	codePayloadTooLarge      = "payload_too_large"
	codeUnsupportedMediaType = "unsupported_media_type"
	codeIdempotencyMismatch  = "idempotency_mismatch"
	codeRateLimited          = limits.CodeRateLimited
	codeTemporarilyBanned    = limits.CodeTemporarilyBanned
	codeInternal             = "internal_error"
	codeNotImplemented       = "not_implemented"
	codeUnavailable          = "unavailable"
	// codeMisdirectedRequest: the admin listener's, for a Host that is
	// not its own (admin_host.go).
	codeMisdirectedRequest = "misdirected_request"
)

var codeStatus = map[string]int{
	codeInvalidRequest:       http.StatusBadRequest,
	codeInvalidJSON:          http.StatusBadRequest,
	codeHTTPSRequired:        http.StatusBadRequest,
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
	codeMisdirectedRequest:   http.StatusMisdirectedRequest,
}

// Error is a failure a client is told about: its code decides the HTTP status
// and its message is shown as it is. Any other error is a bug or an outage and
// is answered with a fixed 500 message, never its text.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// kindCodes are the codes of the domain's kinds of failure. A conflict
// reaches only a client of the admin API (an externalId held): /v1's one
// conflict, an Idempotency-Key taken, is settled by createOnce.
var kindCodes = [...]string{
	domain.KindNotFound: codeNotFound, domain.KindInvalid: codeInvalidRequest, domain.KindMalformed: codeInvalidJSON,
	domain.KindConflict: codeConflict, domain.KindUnavailable: codeUnavailable,
}

// dbFailureMessages say what each cause means to a client.
var dbFailureMessages = [domain.DBFailures]string{
	domain.DBTimeout:       "the database did not answer in time; retry later",
	domain.DBPoolExhausted: "the database is too busy to take this request now; retry later",
	domain.DBRefused:       "the database is unavailable right now; retry later",
}

// outcomeUnknownMessage answers a create the database may have stored. The
// same request sent again with its Idempotency-Key settles it.
const outcomeUnknownMessage = "the database did not confirm the create in time, so the pet may or may not have been stored: " +
	"retry with the same Idempotency-Key, which returns the first pet if it was stored and creates it once if not"

const internalMessage = "the server failed to handle the request; it has been logged"

// retryUnavailable is the Retry-After of a 503: soon, as the database is
// probed twice a second and a server back in service is ready at once.
var retryUnavailable = []string{"1"}

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// writeError writes err in the Error shape: an *Error as it is, a
// domainError as its kind says, anything else as 500 internal_error. What
// only the log may see goes on the request's record, found on w.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	info := findRecord(w)
	if info == nil {
		info = &requestInfo{} // outside logRequests: nobody logs the cause
	}
	e := answer(err, info)
	status, ok := codeStatus[e.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if status == http.StatusServiceUnavailable {
		if _, set := w.Header()["Retry-After"]; !set {
			w.Header()["Retry-After"] = retryUnavailable
		}
	}
	b := make([]byte, 0, 64+len(e.Message))
	b = append(b, `{"code":`...)
	b = appendjson.String(b, e.Code)
	b = append(b, `,"message":`...)
	b = appendjson.String(b, e.Message)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, "}\n"...)
	writeBody(w, status, b)
}

// answer is what a client is told of err; the cause, and why the database
// failed, go on info.
func answer(err error, info *requestInfo) Error {
	var e *Error
	if errors.As(err, &e) {
		return *e
	}
	var d *domain.Error
	if errors.As(err, &d) && kindCodes[d.Kind] != "" {
		info.failed(d.Cause, d.DB)
		switch {
		case d.Unsure:
			return Error{Code: codeUnavailable, Message: outcomeUnknownMessage}
		case d.Kind == domain.KindUnavailable:
			return Error{Code: codeUnavailable, Message: dbFailureMessages[d.DB]}
		}
		return Error{Code: kindCodes[d.Kind], Message: d.Message}
	}
	info.failed(err, 0)
	return Error{Code: codeInternal, Message: internalMessage}
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
