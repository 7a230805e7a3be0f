package testkit

import (
	"encoding/json"
	"maps"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// WantError fails unless w is an answer in the Error shape: a JSON object
// of exactly code, message and status, in valid UTF-8, whose status is the
// HTTP status, and whose message is
// not empty and mentions each of mentions; with status (0: any 4xx) and code
// (one of several separated by "|"; "": any). It returns the code.
func WantError(t testing.TB, w *httptest.ResponseRecorder, status int, code string, mentions ...string) string {
	t.Helper()
	if w.Code != status && (status != 0 || w.Code < 400 || w.Code > 499) {
		t.Fatalf("HTTP status %d, want %d; body: %s", w.Code, status, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if !utf8.Valid(w.Body.Bytes()) {
		t.Errorf("the body is not valid UTF-8: %q", w.Body)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(w.Body.Bytes(), &fields); err != nil {
		t.Fatalf("the body is not one JSON object: %v: %s", err, w.Body)
	}
	if names := slices.Sorted(maps.Keys(fields)); !slices.Equal(names, []string{"code", "message", "status"}) {
		t.Errorf("the body has fields %v, want exactly code, message, status: %s", names, w.Body)
	}
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Status  int    `json:"status"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("the body does not have the Error's types: %v: %s", err, w.Body)
	}
	if code != "" && !slices.Contains(strings.Split(code, "|"), e.Code) {
		t.Fatalf("code %q, want %s; message: %q", e.Code, code, e.Message)
	}
	if e.Status != w.Code {
		t.Errorf("code %q with status %d in the body, answered %d: both must agree", e.Code, e.Status, w.Code)
	}
	if strings.TrimSpace(e.Message) == "" {
		t.Error("the message is empty")
	}
	for _, m := range mentions {
		if !strings.Contains(e.Message, m) {
			t.Errorf("the message %q does not mention %q", e.Message, m)
		}
	}
	return e.Code
}
