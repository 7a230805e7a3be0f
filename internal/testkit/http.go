package testkit

// The tests' one way to send an HTTP request through a client: Fetch,
// NewRequest and ReadResponse; Dress makes a request as they do.

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Fetch sends a request to url through client, as a test server's send does through its handler, and
// returns the answer with its whole body; t fails when either did not
// come.
func Fetch(t testing.TB, client *http.Client, method, url, key, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := NewRequest(method, url, key, body, header...)
	if err != nil {
		t.Fatal(err)
	}
	resp, b, err := ReadResponse(client, req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp, string(b)
}

// NewRequest is a request to url for an http.Client, with key, body and
// header as send has them.
func NewRequest(method, url, key, body string, header ...string) (*http.Request, error) {
	req, err := http.NewRequest(method, url, BodyOf(body))
	if err != nil {
		return nil, err
	}
	return Dress(req, key, body, header), nil
}

// ReadResponse sends req through client and reads the whole answer. The
// error is of the exchange (no response) or of the body (cut short: the
// response and what came of it are returned too).
func ReadResponse(client *http.Client, req *http.Request) (*http.Response, []byte, error) {
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

func BodyOf(body string) io.Reader {
	if body == "" {
		return nil
	}
	return strings.NewReader(body)
}

// Dress sets key, the JSON body's type and header on req, as send says.
func Dress(req *http.Request, key, body string, header []string) *http.Request {
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

// Recorded is an answer from the network as a ResponseRecorder, for the
// checks written for those.
func Recorded(resp *http.Response, body string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	maps.Copy(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	w.WriteString(body)
	return w
}

// FromPeer sends GET target with key through h from the TCP peer addr.
func FromPeer(h http.Handler, addr, target, key string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", target, nil)
	req.RemoteAddr = addr
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}
