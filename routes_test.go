package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
)

// hidingWriter wraps a ResponseWriter as a gzip middleware would: a writer
// of its own type, with no Unwrap.
type hidingWriter struct{ w http.ResponseWriter }

func (h hidingWriter) Header() http.Header         { return h.w.Header() }
func (h hidingWriter) Write(b []byte) (int, error) { return h.w.Write(b) }
func (h hidingWriter) WriteHeader(status int)      { h.w.WriteHeader(status) }

// TestTheRequestsRecordIsFoundBehindAWrappedWriter puts a wrapped writer
// between the steps of a request, as a gzip middleware or
// http.TimeoutHandler would, and still finds the key and the status the
// steps noted in the one log line: the record travels with the request,
// not with the writer.
func TestTheRequestsRecordIsFoundBehindAWrappedWriter(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap middleware
	}{
		{"a writer of its own, as gzip's", func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { next.ServeHTTP(hidingWriter{w}, r) })
		}},
		{"http.TimeoutHandler", func(next http.Handler) http.Handler { return http.TimeoutHandler(next, time.Minute, "") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			logger, _ := newLogger(&logs, "json", "info")
			s := newTestServer(t)
			k, token := s.mustCreate(s.keyTerms("pro"))
			h := chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeError(w, r, errorf(codeNotFound, "nothing here")) }),
				logRequests(logger, nil), tc.wrap, authenticate(s.keys, s.limiter, false), tc.wrap, limit(s.limiter, s.audit, s.quota, false), tc.wrap, requireKey, requireScope(domain.ScopePetsRead))

			for _, req := range []struct {
				token      string
				wantStatus int
				wantKeyID  int64
			}{{token, 404, k.ID}, {"", 401, 0}} {
				r := httptest.NewRequest("GET", "/v1/pets/7", nil)
				if req.token != "" {
					r.Header.Set("Authorization", "Bearer "+req.token)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != req.wantStatus || w.Header().Get("X-Ratelimit-Limit") == "" {
					t.Errorf("answered %d (X-RateLimit-Limit %q), want %d with the limit's headers: %s",
						w.Code, w.Header().Get("X-Ratelimit-Limit"), req.wantStatus, w.Body)
				}
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if len(lines) != 2 {
				t.Fatalf("%d log lines for 2 requests:\n%s", len(lines), logs.String())
			}
			for i, want := range []struct {
				status int
				keyID  int64
			}{{404, k.ID}, {401, 0}} {
				var line struct {
					Status int   `json:"status"`
					KeyID  int64 `json:"key_id"`
				}
				if err := json.Unmarshal([]byte(lines[i]), &line); err != nil {
					t.Fatal(err)
				}
				if line.Status != want.status || line.KeyID != want.keyID {
					t.Errorf("log line %s, want status %d and key_id %d", lines[i], want.status, want.keyID)
				}
			}
		})
	}
}

// TestARequestsRecordCostsNoAllocation holds logRequests to one allocation
// a request, its record and the request's copy included, as the request
// path is measured allocation by allocation.
func TestARequestsRecordCostsNoAllocation(t *testing.T) {
	logger, _ := newLogger(io.Discard, "json", "info")
	body := []byte("{}\n")
	h := chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		recordOf(r).err = nil
		writeBody(w, http.StatusOK, body)
	}), logRequests(logger, nil))
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
