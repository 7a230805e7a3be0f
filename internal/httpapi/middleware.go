package httpapi

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

	"petstore/internal/logline"
	"petstore/internal/metrics"
	"petstore/internal/tracing"
)

// statusWriter records what was written, for the log line and for the panic
// handler, which may answer only while nothing was written, and carries the
// request's record (record.go) to the steps that follow LogRequests.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	record Record
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

func (g *requestIDs) next() string {
	var b [32]byte
	return string(strconv.AppendUint(append(b[:0], g.prefix...), g.n.Add(1), 36))
}

// FirstHeader is h.Get(key) for a key already in canonical form: Get would
// canonicalise it again on every request.
func FirstHeader(h http.Header, key string) string {
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

// LogRequests gives each request its record, an id echoed in
// X-Request-Id, a 500 Error for a panic, one log line, its place in the
// metrics (m may be nil: none) and, when tracing is on (tr not nil) and the
// request is sampled, its server span.
func LogRequests(logger *slog.Logger, m *metrics.Metrics, tr *tracing.Tracer) Middleware {
	var prefix [6]byte
	rand.Read(prefix[:])
	ids := &requestIDs{prefix: hex.EncodeToString(prefix[:]) + "-"}
	return func(next http.Handler) http.Handler {
		return &requestLogger{logger: logger, metrics: m, tracer: tr, ids: ids, next: next}
	}
}

// requestLogger is the step LogRequests adds.
type requestLogger struct {
	logger  *slog.Logger
	metrics *metrics.Metrics
	tracer  *tracing.Tracer // nil: tracing is off
	ids     *requestIDs
	next    http.Handler
}

func (l *requestLogger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// One allocation for all that is tracked: the writer and its record.
	sw := &statusWriter{ResponseWriter: w}
	info := &sw.record
	id := FirstHeader(r.Header, "X-Request-Id")
	if !validRequestID(id) {
		id = l.ids.next()
	}
	info.logged(id)
	w.Header()["X-Request-Id"] = info.HeaderValue(id)
	if l.tracer != nil && r.URL.Path != "/healthz" && r.URL.Path != "/readyz" {
		// The store, the limiter and the batches find the span in the
		// context: one WithContext for a sampled request, none otherwise.
		// A load balancer's health checks, every second, are not traced.
		var ctx context.Context
		if ctx, info.span = l.tracer.StartRequest(r.Context(), r.Method,
			FirstHeader(r.Header, "Traceparent"), FirstHeader(r.Header, "Tracestate")); info.span.On() {
			r = r.WithContext(ctx)
		}
	}

	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			info.Failed(fmt.Errorf("panic: %v\n%s", p, debug.Stack()), 0)
			if sw.status == 0 {
				WriteError(sw, &Error{Code: CodeInternal, Message: internalMessage})
			}
		}
		end := time.Now()
		status := recordedStatus(r, sw.status)
		info.finished()
		var traceID, spanID string
		if info.span.On() {
			traceID, spanID = info.span.IDs()
			info.span.EndRequest(r.Method, r.Pattern, status, info.keyID())
		}
		if l.metrics != nil && !healthCheck(r) {
			l.metrics.ObserveRequest(&metrics.Answered{
				Pattern: r.Pattern, Method: r.Method, Code: status, Took: end.Sub(start),
				Decision: info.rateLimit, AuthFailure: uint8(info.auth.Reason), DBFailure: uint8(info.db), TraceID: traceID,
			})
		}
		logRequest(l.logger, r, info, status, sw, start, end, traceID, spanID)
	}()
	l.next.ServeHTTP(sw, r)
}

// StatusClientClosed is nginx's "client closed request": the status a
// request is recorded under when its client went away before its answer.
const StatusClientClosed = 499

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
	return StatusClientClosed
}

func logRequest(logger *slog.Logger, r *http.Request, info *Record, status int, sw *statusWriter, start, end time.Time, traceID, spanID string) {
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
	line := logline.RequestLine{
		Time: end, Level: level, Method: r.Method, Path: r.URL.Path, Status: status,
		Duration: end.Sub(start), Bytes: sw.bytes, RequestID: info.id, Err: info.err,
		TraceID: traceID, SpanID: spanID,
	}
	if info.key != nil {
		line.KeyID = info.key.ID
	}
	if lh, ok := h.(*logline.Handler); ok {
		lh.WriteRequestLine(r.Context(), &line)
		return
	}
	h.Handle(r.Context(), line.Record())
}
