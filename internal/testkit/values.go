package testkit

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

func JSONString(v any) string {
	if v == nil {
		return "<nil>"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func IntHeader(t *testing.T, w *httptest.ResponseRecorder, name string) int64 {
	t.Helper()
	v := w.Header().Get(name)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s = %q, want an integer", name, v)
	}
	return n
}

func DiscardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func WantStatus(t *testing.T, w *httptest.ResponseRecorder, status int, what string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("%s: %d %s, want %d", what, w.Code, w.Body, status)
	}
}

// Fullwidth is s, ASCII, in the Fullwidth forms of its characters.
func Fullwidth(s string) string {
	return strings.Map(func(r rune) rune { return r + 0xFEE0 }, s)
}

// DecodeJSON decodes into v the JSON of a response's body or of a
// command's output.
func DecodeJSON[B *httptest.ResponseRecorder | string](t testing.TB, body B, v any) {
	t.Helper()
	var b []byte
	switch body := any(body).(type) {
	case *httptest.ResponseRecorder:
		b = body.Body.Bytes()
	case string:
		b = []byte(body)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("the body is not the JSON expected: %v; body: %s", err, b)
	}
}

// DBTimeout is --db-timeout in the tests of an outage; an answer that
// needs the database comes within it and DeadlineMargin.
const (
	DBTimeout      = 300 * time.Millisecond
	DeadlineMargin = 500 * time.Millisecond
)
