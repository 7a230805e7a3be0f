package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The tests' one way to send an HTTP request: testServer.send through a
// handler; fetch, newRequest and readResponse through a client.

// send sends a request through h and returns what it answered.
// key, when not "", is sent as the bearer credential; body, when not "",
// as JSON. header is pairs of name and value: an empty value removes the
// header; Host sets the request's host.
func (s *testServer) send(h http.Handler, method, target, key, body string, header ...string) *httptest.ResponseRecorder {
	req := dress(httptest.NewRequest(method, target, bodyOf(body)), key, body, header)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// fetch sends a request to url through client, as send sends its own, and
// returns the answer with its whole body; t fails when either did not
// come.
func fetch(t testing.TB, client *http.Client, method, url, key, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := newRequest(method, url, key, body, header...)
	if err != nil {
		t.Fatal(err)
	}
	resp, b, err := readResponse(client, req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp, string(b)
}

// newRequest is a request to url for an http.Client, with key, body and
// header as send has them.
func newRequest(method, url, key, body string, header ...string) (*http.Request, error) {
	req, err := http.NewRequest(method, url, bodyOf(body))
	if err != nil {
		return nil, err
	}
	return dress(req, key, body, header), nil
}

// readResponse sends req through client and reads the whole answer. The
// error is of the exchange (no response) or of the body (cut short: the
// response and what came of it are returned too).
func readResponse(client *http.Client, req *http.Request) (*http.Response, []byte, error) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		err = fmt.Errorf("reading the body: %w", err)
	}
	return resp, b, err
}

func bodyOf(body string) io.Reader {
	if body == "" {
		return nil
	}
	return strings.NewReader(body)
}

// dress sets key, the JSON body's type and header on req, as send says.
func dress(req *http.Request, key, body string, header []string) *http.Request {
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		switch name, value := header[i], header[i+1]; {
		case http.CanonicalHeaderKey(name) == "Host":
			req.Host = value
		case value == "":
			req.Header.Del(name)
		default:
			req.Header.Set(name, value)
		}
	}
	return req
}
