package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"
)

// requestInfo is what the middleware learns about a request, for the handlers
// (the caller's key) and for the request's one log line.
type requestInfo struct {
	id  string
	key *apiKey
	use *keyUse // the key's note of use, where its usage history is counted
	// admin is the admin token of a request to the admin API.
	admin *adminToken
	// auth says why the request has no key, for the 401 and its count.
	auth      authFailure
	authErr   error // the key could not be looked up
	sentToken bool
	err       error // an internal error or panic, for the log
	// rateLimit is the limiter's decision, for the metrics; 0 when the
	// request was not rate limited (/healthz, /docs).
	rateLimit limitOutcome
	// forbidden: the key lacked the scope the request needs (403), for
	// the key's usage history.
	forbidden bool
	// db is why the database could not serve the request, answered 503,
	// for the metrics; 0 when it is not that.
	db dbFailure

	// values backs the response's header values (see headerValue).
	values  [6]string
	nvalues int
}

// headerValue returns v as a header value, a one-element slice taken from
// the request's own store: the request's header values cost one allocation
// (its info) instead of one each.
func (info *requestInfo) headerValue(v string) []string {
	if info.nvalues == len(info.values) {
		return []string{v}
	}
	s := info.values[info.nvalues : info.nvalues+1 : info.nvalues+1]
	s[0] = v
	info.nvalues++
	return s
}

// recordKey is the context key of a request's record.
type recordKey struct{}

// requestContext is a request's context with its record. logRequests puts
// it there once; every later step reads the record with recordOf, whatever
// wraps the ResponseWriter or the context in between.
type requestContext struct {
	context.Context
	info requestInfo
}

func (c *requestContext) Value(key any) any {
	// A type assertion, not key == recordKey{}: comparing two interfaces
	// is a runtime call, and every Value asked of the request passes here.
	if _, ok := key.(recordKey); ok {
		return &c.info
	}
	return c.Context.Value(key)
}

// recordOf is the record logRequests keeps of r; nil when r did not pass
// logRequests (only writeError accepts that: it then has nowhere to note
// the cause). A request's steps ask for it several times: when r's context
// is logRequests' own, it is read without the lookup through Value.
func recordOf(r *http.Request) *requestInfo {
	if c, ok := r.Context().(*requestContext); ok {
		return &c.info
	}
	info, _ := r.Context().Value(recordKey{}).(*requestInfo)
	return info
}

// statusWriter records what was written, for the log line and for the panic
// handler, which may answer only while nothing was written.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestIDs makes request ids unique across restarts without a random read
// per request: a random prefix per process and a counter.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	rand.Read(b[:])
	return &requestIDs{prefix: hex.EncodeToString(b[:]) + "-"}
}

func (g *requestIDs) next() string {
	var b [32]byte
	return string(strconv.AppendUint(append(b[:0], g.prefix...), g.n.Add(1), 36))
}

// firstHeader is h.Get(key) for a key already in canonical form: Get would
// canonicalise it again on every request.
func firstHeader(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// validRequestID accepts a client's X-Request-Id when it is short printable
// ASCII, so that it cannot forge log lines.
func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// logRequests gives each request its record, an id echoed in
// X-Request-Id, a 500 Error for a panic, one log line, and its place in the
// metrics (m may be nil: none).
func logRequests(logger *slog.Logger, m *metrics) middleware {
	ids := newRequestIDs()
	return func(next http.Handler) http.Handler {
		return &requestLogger{logger: logger, metrics: m, ids: ids, next: next}
	}
}

// requestLogger is the step logRequests adds. It is a type rather than a
// closure so that ServeHTTP is compiled once, never inlined into its maker's
// callers: there WithContext is inlined and its copy of the request stays on
// the stack (TestARequestsRecordCostsNoAllocation).
type requestLogger struct {
	logger  *slog.Logger
	metrics *metrics
	ids     *requestIDs
	next    http.Handler
}

func (l *requestLogger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// One allocation for all that is tracked, the request's copy too.
	tracked := &struct {
		ctx requestContext
		sw  statusWriter
		req http.Request
	}{}
	info, sw := &tracked.ctx.info, &tracked.sw
	sw.ResponseWriter = w
	tracked.ctx.Context = r.Context()
	tracked.req = *r.WithContext(&tracked.ctx)
	r = &tracked.req
	info.id = firstHeader(r.Header, "X-Request-Id")
	if !validRequestID(info.id) {
		info.id = l.ids.next()
	}
	w.Header()["X-Request-Id"] = info.headerValue(info.id)

	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			info.err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			if sw.status == 0 {
				writeError(sw, r, &Error{Code: codeInternal, Message: internalMessage})
			}
		}
		end := time.Now()
		status := recordedStatus(r, sw.status)
		l.metrics.observeRequest(r, info, status, end.Sub(start))
		logRequest(l.logger, r, info, status, sw, start, end)
	}()
	l.next.ServeHTTP(sw, r)
}

// statusClientClosed is nginx's "client closed request": the status a
// request is recorded under when its client went away before its answer.
const statusClientClosed = 499

// recordedStatus is the status a request is logged and counted under: the
// one written, or 499 when the client went away and the answer it never
// got is a failure (its context ended with its connection: a database call
// that was waiting for it ends with it, or a create's shared commit ran past
// the deadline for nobody). Such a request is no server error and no
// database failure (petstore_database_unavailable_total counts 503s only):
// alerts on 5xx are not raised by clients that hang up.
func recordedStatus(r *http.Request, written int) int {
	if (written != 0 && written < 500) || r.Context().Err() == nil {
		return written
	}
	return statusClientClosed
}

func logRequest(logger *slog.Logger, r *http.Request, info *requestInfo, status int, sw *statusWriter, start, end time.Time) {
	level := slog.LevelInfo
	switch {
	case healthCheck(r): // a load balancer's, one a second on every server
		level = slog.LevelDebug
	case status >= 500:
		level = slog.LevelError
	}
	h := logger.Handler()
	if !h.Enabled(r.Context(), level) {
		return
	}
	line := requestLine{
		time: end, level: level, method: r.Method, path: r.URL.Path, status: status,
		duration: end.Sub(start), bytes: sw.bytes, requestID: info.id, err: info.err,
	}
	if info.key != nil {
		line.keyID = info.key.ID
	}
	if lh, ok := h.(*lineHandler); ok {
		lh.writeRequestLine(r.Context(), &line)
		return
	}
	h.Handle(r.Context(), line.record())
}

// requestLine is what the log says of each request.
type requestLine struct {
	time      time.Time
	level     slog.Level
	method    string
	path      string
	status    int
	duration  time.Duration
	bytes     int64
	requestID string
	keyID     int64 // 0: the request had no key (key ids start at 1)
	err       error
}

const requestMessage = "request"

// record is the line as a slog record. It is made with NewRecord rather than
// by logger.LogAttrs, which would look up the caller's source line; that is
// never printed.
func (l *requestLine) record() slog.Record {
	rec := slog.NewRecord(l.time, l.level, requestMessage, 0)
	rec.AddAttrs(
		slog.String("method", l.method),
		slog.String("path", l.path),
		slog.Int("status", l.status),
		slog.Duration("duration", l.duration),
		slog.Int64("bytes", l.bytes),
		slog.String("request_id", l.requestID),
	)
	if l.keyID != 0 {
		rec.AddAttrs(slog.Int64("key_id", l.keyID))
	}
	if l.err != nil {
		rec.AddAttrs(slog.String("err", l.err.Error()))
	}
	return rec
}
