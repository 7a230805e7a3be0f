package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/publicapi"
	"petstore/internal/testkit"
)

// wrappingWriter wraps a ResponseWriter as a gzip middleware does: a writer
// of its own type, which hands the one it wraps to Unwrap, as
// http.ResponseController asks of a wrapper.
type wrappingWriter struct{ w http.ResponseWriter }

func (h wrappingWriter) Header() http.Header         { return h.w.Header() }
func (h wrappingWriter) Write(b []byte) (int, error) { return h.w.Write(b) }
func (h wrappingWriter) WriteHeader(status int)      { h.w.WriteHeader(status) }
func (h wrappingWriter) Unwrap() http.ResponseWriter { return h.w }

// hidingWriter is a wrapper without Unwrap.
type hidingWriter struct{ w http.ResponseWriter }

func (h hidingWriter) Header() http.Header         { return h.w.Header() }
func (h hidingWriter) Write(b []byte) (int, error) { return h.w.Write(b) }
func (h hidingWriter) WriteHeader(status int)      { h.w.WriteHeader(status) }

// wrapEach is a middleware that passes next the writer wrap makes.
func wrapEach(wrap func(http.ResponseWriter) http.ResponseWriter) httpapi.Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { next.ServeHTTP(wrap(w), r) })
	}
}

// recordedRequest is what the log line says of a request.
type recordedRequest struct {
	Status int    `json:"status"`
	KeyID  int64  `json:"key_id"`
	Err    string `json:"err"`
}

// stepsBehind sends a request with token (none when empty) through
// logRequests, then steps, to a handler that answers 404, and returns the
// answer and what its log line says.
func stepsBehind(t *testing.T, token string, steps ...httpapi.Middleware) (*httptest.ResponseRecorder, recordedRequest) {
	t.Helper()
	var logs testkit.SyncBuffer
	logger, _ := NewLogger(&logs, "json", "info")
	h := chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, httpapi.Errorf(httpapi.CodeNotFound, "nothing here"))
	}),
		append([]httpapi.Middleware{httpapi.LogRequests(logger, nil, nil)}, steps...)...)
	r := httptest.NewRequest("GET", "/v1/pets/7", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var line recordedRequest
	if err := json.Unmarshal([]byte(logs.String()), &line); err != nil {
		t.Fatalf("the log line %q: %v", logs.String(), err)
	}
	return w, line
}

// TestTheRequestsRecordIsFoundBehindAWrappedWriter puts a wrapped writer
// between the steps of a request, as a gzip middleware would, and still
// finds the key and the status the steps noted in the one log line: the
// record is found by walking Unwrap, as http.ResponseController finds the
// connection.
func TestTheRequestsRecordIsFoundBehindAWrappedWriter(t *testing.T) {
	t.Parallel()
	once := wrapEach(func(w http.ResponseWriter) http.ResponseWriter { return wrappingWriter{w} })
	twice := wrapEach(func(w http.ResponseWriter) http.ResponseWriter { return wrappingWriter{wrappingWriter{w}} })
	s := newTestServer(t)
	k, token := s.mustCreate(s.keyTerms("pro"))
	for _, tc := range []struct {
		name string
		wrap httpapi.Middleware
	}{{"a writer of its own, as gzip's", once}, {"two writers, one inside the other", twice}} {
		for _, req := range []struct {
			token      string
			wantStatus int
			wantKeyID  int64
		}{{token, 404, k.ID}, {"", 401, 0}} {
			w, line := stepsBehind(t, req.token, tc.wrap, publicapi.Authenticate(publicDeps(s.App)), tc.wrap,
				publicapi.Limit(publicDeps(s.App)), tc.wrap, publicapi.RequireKey, tc.wrap, publicapi.RequireScope(domain.ScopePetsRead))
			if w.Code != req.wantStatus || w.Header().Get("X-Ratelimit-Limit") == "" {
				t.Errorf("%s: answered %d (X-RateLimit-Limit %q), want %d with the limit's headers: %s",
					tc.name, w.Code, w.Header().Get("X-Ratelimit-Limit"), req.wantStatus, w.Body)
			}
			if line.Status != req.wantStatus || line.KeyID != req.wantKeyID {
				t.Errorf("%s: log line %+v, want status %d and key_id %d", tc.name, line, req.wantStatus, req.wantKeyID)
			}
		}
	}
}

// TestAWrapperThatHidesTheRecordFailsLoudly: a wrapper without Unwrap (as
// http.TimeoutHandler's writer is) hides the record from the steps after
// it. Their request is answered 500 and logged with the reason, never let
// through nor answered as if it had no key.
func TestAWrapperThatHidesTheRecordFailsLoudly(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	_, token := s.mustCreate(s.keyTerms("pro"))
	for _, tc := range []struct {
		name string
		wrap httpapi.Middleware
	}{
		{"a writer without Unwrap", wrapEach(func(w http.ResponseWriter) http.ResponseWriter { return hidingWriter{w} })},
		{"http.TimeoutHandler", func(next http.Handler) http.Handler { return http.TimeoutHandler(next, time.Minute, "") }},
	} {
		w, line := stepsBehind(t, token, tc.wrap, publicapi.Authenticate(publicDeps(s.App)),
			publicapi.Limit(publicDeps(s.App)), publicapi.RequireKey, publicapi.RequireScope(domain.ScopePetsRead))
		if w.Code != 500 || line.Status != 500 || !strings.Contains(line.Err, "no Unwrap method") {
			t.Errorf("%s: answered %d, logged %+v; want 500 and the reason in the log", tc.name, w.Code, line)
		}
	}
}

// TestARequestsStepsOutOfOrderFail swaps each two steps of a route with a key
// (routes.go: Authenticate, Limit, RequireKey, RequireScope) and of the
// rate-limit route (Authenticate, then RateLimit): each request is
// answered 500, its log line naming the two steps, where a swap would
// otherwise count a keyed request against its address or let it past a
// check it has not had.
func TestARequestsStepsOutOfOrderFail(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	_, token := s.mustCreate(s.keyTerms("pro"))
	authenticated, limited := publicapi.Authenticate(publicDeps(s.App)), publicapi.Limit(publicDeps(s.App))
	scoped := publicapi.RequireScope(domain.ScopePetsRead)
	peek := func(http.Handler) http.Handler { return publicapi.RateLimit(publicDeps(s.App)) }
	for _, tc := range []struct {
		name  string
		steps []httpapi.Middleware
		want  string // in the log line's err; "" when in order
	}{
		{"in order", []httpapi.Middleware{authenticated, limited, publicapi.RequireKey, scoped}, ""},
		{"limit before authenticate", []httpapi.Middleware{limited, authenticated, publicapi.RequireKey, scoped}, "limit after logRequests"},
		{"requireKey before limit", []httpapi.Middleware{authenticated, publicapi.RequireKey, limited, scoped}, "requireKey after authenticate"},
		{"requireScope before requireKey", []httpapi.Middleware{authenticated, limited, scoped, publicapi.RequireKey}, "requireScope after limit"},
		{"a key required before it is looked up", []httpapi.Middleware{publicapi.RequireKey, authenticated, limited, scoped}, "requireKey after logRequests"},
		{"the rate limit read in order", []httpapi.Middleware{authenticated, peek}, ""},
		{"the rate limit read before authenticate", []httpapi.Middleware{peek}, "handleRateLimit after logRequests"},
		{"the rate limit read after limit", []httpapi.Middleware{authenticated, limited, peek}, "handleRateLimit after limit"},
	} {
		w, line := stepsBehind(t, token, tc.steps...)
		switch {
		case tc.want == "" && (w.Code == 500 || line.Err != ""):
			t.Errorf("%s: answered %d, logged %+v", tc.name, w.Code, line)
		case tc.want != "" && (w.Code != 500 || !strings.Contains(line.Err, "ran out of order: "+tc.want)):
			t.Errorf("%s: answered %d, logged %+v; want 500 and %q", tc.name, w.Code, line, tc.want)
		}
	}
}

// TestEveryRouteRunsItsStepsInOrder sends a request with a key that holds
// every scope to each route of both listeners, as routes.go wires them: none
// is answered 500 nor logs an error (steps out of order would).
func TestEveryRouteRunsItsStepsInOrder(t *testing.T) {
	t.Parallel()
	var logs testkit.SyncBuffer
	logger, _ := NewLogger(&logs, "json", "info")
	s := newTestServerWith(t, testOptions{logger: logger})
	key := s.mustCreateKey("enterprise")
	token := s.mustCreateAdmin("portal", domain.AllAdminScopes)
	send := func(rt route, h http.Handler, credential string) {
		method, path, ok := strings.Cut(rt.pattern, " ")
		if !ok {
			method, path = "PUT", rt.pattern
		}
		path = strings.NewReplacer("{petId}", "1", "{id}", "1", "{subject}", "key:1").Replace(path)
		before := len(logs.String())
		w := s.send(h, method, path, credential, "")
		if logged := logs.String()[before:]; w.Code == 500 || strings.Contains(logged, "ran out of order") {
			t.Errorf("%s %s (route %q) answered %d: %s\n%s", method, path, rt.pattern, w.Code, w.Body, logged)
		}
	}
	for _, rt := range apiRoutes(s.App) {
		send(rt, s.handler, key)
	}
	for _, rt := range adminRoutes(s.App) {
		send(rt, onAdminHost(s.adminHandler), token)
	}
}

// TestARequestsRecordCostsNoAllocation holds logRequests to one allocation
// a request: its writer, which carries the record.
func TestARequestsRecordCostsNoAllocation(t *testing.T) {
	logger, _ := NewLogger(io.Discard, "json", "info")
	body := []byte("{}\n")
	h := chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.RecordOf(w).Failed(nil, 0)
		httpapi.WriteBody(w, http.StatusOK, body)
	}), httpapi.LogRequests(logger, nil, nil))
	r := httptest.NewRequest("GET", "/v1/pets", nil)
	r.Header.Set("X-Request-Id", "client-chosen")
	w := &discardWriter{header: http.Header{}}
	if n := testing.AllocsPerRun(200, func() {
		clear(w.header)
		h.ServeHTTP(w, r)
	}); n != 1 {
		t.Errorf("logRequests allocates %v times a request, want 1", n)
	}
}
