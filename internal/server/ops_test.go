package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"petstore/internal/httpapi"
	"petstore/internal/logline"
	"petstore/internal/petcopy"
	"petstore/internal/testkit"
)

func TestUnwritableDatabaseAnswers503AndRecovers(t *testing.T) {
	for _, tc := range []struct {
		name           string
		break_, repair string
	}{
		// query_only makes SQLite refuse writes as on a read-only file
		// (SQLITE_READONLY); max_page_count as on a full disk (SQLITE_FULL).
		{"read-only database", "PRAGMA query_only = 1", "PRAGMA query_only = 0"},
		{"full disk", "PRAGMA max_page_count = 1", "PRAGMA max_page_count = 1073741823"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t)
			key := s.mustCreateKey("pro")
			if w := s.do("POST", "/v1/pets", key, `{"name":"Before","categoryId":1}`); w.Code != 201 {
				t.Fatal(w.Code, w.Body)
			}
			if tc.name == "full disk" {
				// Fill the file to its last page so the next insert needs a new one.
				var pages int
				s.sqlite.Writer().QueryRow("PRAGMA page_count").Scan(&pages)
				tc.break_ = "PRAGMA max_page_count = " + itoa(pages)
			}
			if _, err := s.sqlite.Writer().Exec(tc.break_); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				w := s.do("POST", "/v1/pets", key, `{"name":"During `+itoa(i)+`","categoryId":1}`)
				if tc.name == "full disk" && w.Code == 201 {
					continue // a page may still have had room for a row or two
				}
				wantError(t, w, 503, httpapi.CodeUnavailable)
			}
			w := s.do("POST", "/v1/pets", key, `{"name":"During","categoryId":1}`, "Idempotency-Key", "k1")
			if tc.name != "full disk" {
				wantError(t, w, 503, httpapi.CodeUnavailable)
			}
			if w := s.do("GET", "/v1/pets", key, ""); w.Code != 200 || !strings.Contains(w.Body.String(), "Before") {
				t.Fatalf("reads must keep working: %d %s", w.Code, w.Body)
			}
			if w := s.do("GET", "/v1/pets/1", key, ""); w.Code != 200 {
				t.Fatalf("get during the outage: %d", w.Code)
			}

			if _, err := s.sqlite.Writer().Exec(tc.repair); err != nil {
				t.Fatal(err)
			}
			w = s.do("POST", "/v1/pets", key, `{"name":"After","categoryId":1}`)
			if w.Code != 201 {
				t.Fatalf("after the disk is back: %d %s", w.Code, w.Body)
			}
			list := s.do("GET", "/v1/pets?limit=100", key, "")
			database := petcopy.New(s.store, DefaultDBTimeout)
			want, _ := database.List(context.Background(), "", 0, 100)
			if list.Body.String() != string(want.Body) {
				t.Fatalf("memory and database disagree after the outage:\n%s\n%s", list.Body, want.Body)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestPanicInAHandlerIsA500AndTheServerKeepsServing(t *testing.T) {
	t.Parallel()
	var logs testkit.SyncBuffer
	logger, _ := NewLogger(&logs, "json", "info")
	calls := 0
	h := chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			panic("boom")
		}
		httpapi.WriteBody(w, 200, []byte("{}\n"))
	}), httpapi.LogRequests(logger, nil, nil))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/pets", nil))
	wantError(t, w, 500, httpapi.CodeInternal)
	if strings.Contains(w.Body.String(), "boom") || strings.Contains(w.Body.String(), "goroutine") {
		t.Errorf("the panic leaks to the client: %s", w.Body)
	}
	if !strings.Contains(logs.String(), "panic: boom") || !strings.Contains(logs.String(), "goroutine") {
		t.Errorf("the log lacks the panic and its stack: %s", logs.String())
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/pets", nil))
	if w.Code != 200 {
		t.Fatalf("next request: %d", w.Code)
	}
}

func TestOneLogLinePerRequestWithoutTheKey(t *testing.T) {
	t.Parallel()
	var logs testkit.SyncBuffer
	logger, _ := NewLogger(&logs, "json", "info")
	s := newTestServerWith(t, testOptions{logger: logger})
	key := s.mustCreateKey("pro")
	s.do("POST", "/v1/pets", key, `{"name":"Rex","categoryId":1}`, "X-Request-Id", "client-chosen-1")
	s.do("GET", "/v1/pets", "psk_live_not-a-real-key", "")
	w := s.do("GET", "/v1/pets/1", key, "")

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d log lines for 3 requests:\n%s", len(lines), logs.String())
	}
	if strings.Contains(logs.String(), key) || strings.Contains(logs.String(), "not-a-real-key") {
		t.Fatalf("a key reached the log:\n%s", logs.String())
	}
	var first struct {
		Method    string  `json:"method"`
		Path      string  `json:"path"`
		Status    int     `json:"status"`
		Duration  float64 `json:"duration"`
		Bytes     int     `json:"bytes"`
		RequestID string  `json:"request_id"`
		KeyID     int64   `json:"key_id"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.Method != "POST" || first.Path != "/v1/pets" || first.Status != 201 || first.Bytes == 0 ||
		first.RequestID != "client-chosen-1" || first.KeyID == 0 {
		t.Errorf("log line lacks a field: %s", lines[0])
	}
	if !strings.Contains(lines[1], `"status":401`) || strings.Contains(lines[1], "key_id") {
		t.Errorf("the 401 line: %s", lines[1])
	}
	if id := w.Header().Get("X-Request-Id"); id == "" || !strings.Contains(lines[2], id) {
		t.Errorf("generated request id %q not in the log line %s", id, lines[2])
	}
}

// A load balancer checks /readyz once a second on every server: the health
// checks are logged at DEBUG, out of an INFO log and in a DEBUG one.
func TestHealthChecksAreLoggedAtDebug(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"info", "debug"} {
		t.Run(level, func(t *testing.T) {
			var logs testkit.SyncBuffer
			logger, _ := NewLogger(&logs, "text", level)
			s := newTestServerWith(t, testOptions{logger: logger})
			for _, target := range []string{"/healthz", "/readyz", "/v1/pets"} {
				s.do("GET", target, "", "")
			}
			for _, tc := range []struct{ path, wantLevel string }{
				{"/healthz", "DEBUG"}, {"/readyz", "DEBUG"}, {"/v1/pets", "INFO"},
			} {
				line := regexp.MustCompile(`(?m)^.* level=(\w+) msg=request method=GET path=` + tc.path + ` .*$`).FindStringSubmatch(logs.String())
				switch {
				case level == "info" && tc.wantLevel == "DEBUG" && line != nil:
					t.Errorf("at --log-level info, the health check is logged: %s", line[0])
				case (level == "debug" || tc.wantLevel == "INFO") && line == nil:
					t.Errorf("no line for %s at --log-level %s:\n%s", tc.path, level, logs.String())
				case line != nil && line[1] != tc.wantLevel:
					t.Errorf("%s logged at %s, want %s: %s", tc.path, line[1], tc.wantLevel, line[0])
				}
			}
		})
	}
}

func TestRequestIDIsEchoedOrGenerated(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	for _, tc := range []struct{ name, sent, want string }{
		{"a sane id is echoed", "abc-123", "abc-123"},
		{"none is generated", "", ""},
		{"one with spaces is replaced", "a b", ""},
		{"one over 128 characters is replaced", strings.Repeat("x", 129), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := s.do("GET", "/healthz", "", "", "X-Request-Id", tc.sent)
			got := w.Header().Get("X-Request-Id")
			if tc.want != "" && got != tc.want || tc.want == "" && (got == "" || got == tc.sent) {
				t.Errorf("X-Request-Id = %q, sent %q", got, tc.sent)
			}
		})
	}
}

func TestLogLinesAreWrittenInBatches(t *testing.T) {
	t.Parallel()
	var out testkit.SyncBuffer
	logs := logline.NewBuffer(&out)
	logs.Write([]byte("one line\n"))
	if out.String() != "" {
		t.Fatalf("a line was written at once: %q", out.String())
	}
	logs.Flush()
	if out.String() != "one line\n" {
		t.Fatalf("after Flush: %q", out.String())
	}
	big := strings.Repeat("x", logline.BufferSize) + "\n"
	logs.Write([]byte(big))
	if out.String() != "one line\n"+big {
		t.Fatalf("a full buffer was not written out")
	}
}
