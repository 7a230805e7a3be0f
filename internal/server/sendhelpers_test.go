package server

import (
	"net/http"
	"net/http/httptest"
	"petstore/internal/testkit"
)

// The tests' one way to send an HTTP request: testServer.send through a
// handler; fetch, newRequest and readResponse through a client.

// send sends a request through h and returns what it answered.
// key, when not "", is sent as the bearer credential; body, when not "",
// as JSON. header is pairs of name and value: an empty value removes the
// header; Host sets the request's host.
func (s *testServer) send(h http.Handler, method, target, key, body string, header ...string) *httptest.ResponseRecorder {
	req := testkit.Dress(httptest.NewRequest(method, target, testkit.BodyOf(body)), key, body, header)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}
