package httpapi

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
// openapi.yaml list them; CodeStatus maps each to its HTTP status.
const (
	CodeInvalidRequest       = "invalid_request"
	CodeInvalidJSON          = "invalid_json"
	CodeHTTPSRequired        = "https_required"
	CodeUnauthorized         = "unauthorized"
	CodeInsufficientScope    = "insufficient_scope"
	CodeNotFound             = "not_found"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeIdempotencyConflict  = "idempotency_conflict"
	CodeConflict             = "conflict" // the admin API's: a resource that exists already
	CodePayloadTooLarge      = "payload_too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeIdempotencyMismatch  = "idempotency_mismatch"
	CodeRateLimited          = limits.CodeRateLimited
	CodeTemporarilyBanned    = limits.CodeTemporarilyBanned
	CodeInternal             = "internal_error"
	CodeNotImplemented       = "not_implemented"
	CodeUnavailable          = "unavailable"
	CodeMisdirectedRequest   = "misdirected_request" // the admin listener's, for a Host not its own (adminapi.RequireHost)
	CodeCrossOrigin          = "cross_origin"        // the admin API's, for a request of another origin's page (adminapi.SameOrigin)
)

var CodeStatus = map[string]int{
	CodeInvalidRequest: http.StatusBadRequest, CodeInvalidJSON: http.StatusBadRequest, CodeHTTPSRequired: http.StatusBadRequest,
	CodeUnauthorized: http.StatusUnauthorized, CodeInsufficientScope: http.StatusForbidden,
	CodeNotFound: http.StatusNotFound, CodeMethodNotAllowed: http.StatusMethodNotAllowed,
	CodeIdempotencyConflict: http.StatusConflict, CodeConflict: http.StatusConflict,
	CodePayloadTooLarge: http.StatusRequestEntityTooLarge, CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	CodeMisdirectedRequest: http.StatusMisdirectedRequest, CodeIdempotencyMismatch: http.StatusUnprocessableEntity,
	CodeRateLimited: http.StatusTooManyRequests, CodeTemporarilyBanned: http.StatusTooManyRequests,
	CodeInternal: http.StatusInternalServerError, CodeNotImplemented: http.StatusNotImplemented,
	CodeUnavailable: http.StatusServiceUnavailable, CodeCrossOrigin: http.StatusForbidden,
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
	domain.KindNotFound: CodeNotFound, domain.KindInvalid: CodeInvalidRequest, domain.KindMalformed: CodeInvalidJSON,
	domain.KindConflict: CodeConflict, domain.KindUnavailable: CodeUnavailable,
}

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

func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WriteError writes err in the Error shape: an *Error as it is, a
// domain.Error as its kind says, anything else as 500 internal_error. What
// only the log may see goes on the request's record, found on w.
func WriteError(w http.ResponseWriter, err error) {
	info := findRecord(w)
	if info == nil {
		info = &Record{} // outside LogRequests: nobody logs the cause
	}
	e := answer(err, info)
	status, ok := CodeStatus[e.Code]
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
	WriteBody(w, status, b)
}

// answer is what a client is told of err; the cause, and why the database
// failed, go on info.
func answer(err error, info *Record) Error {
	var e *Error
	if errors.As(err, &e) {
		return *e
	}
	var d *domain.Error
	if errors.As(err, &d) && kindCodes[d.Kind] != "" {
		info.Failed(d.Cause, d.DB)
		switch {
		case d.Unsure:
			return Error{Code: CodeUnavailable, Message: outcomeUnknownMessage}
		case d.Kind == domain.KindUnavailable:
			return Error{Code: CodeUnavailable, Message: dbFailureMessages[d.DB]}
		}
		return Error{Code: kindCodes[d.Kind], Message: d.Message}
	}
	info.Failed(err, 0)
	return Error{Code: CodeInternal, Message: internalMessage}
}

// WriteJSON sends v encoded as JSON (the admin API's answers).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		WriteError(w, err)
		return
	}
	WriteBody(w, status, append(b, '\n'))
}

// WriteBody sends an already encoded JSON body.
func WriteBody(w http.ResponseWriter, status int, body []byte) {
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
