package testkit

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
)

// Send sends a request through h and returns what it answered.
// key, when not "", is sent as the bearer credential; body, when not "",
// as JSON. header is pairs of name and value: an empty value removes the
// header.
func Send(h http.Handler, method, target, key, body string, header ...string) *httptest.ResponseRecorder {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, r)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}
