package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"petstore/internal/testkit"
)

// During --shutdown-delay the server still serves, and every answer carries
// Connection: close, so a keep-alive client leaves before the listener
// closes instead of having its connection reset mid-request.
func TestDrainingAnswersCloseTheirConnections(t *testing.T) {
	t.Parallel()
	p := runServing(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "petstore.db"),
		"--shutdown-delay", "2s")
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	get := func() *http.Response {
		t.Helper()
		resp, err := client.Get(p.url + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := get(); resp.Close {
		t.Fatalf("before the drain: Connection %q, want the connection kept alive", resp.Header.Get("Connection"))
	}
	p.cancel()
	testkit.Eventually(t, 5*time.Second, "the server is draining", func() bool { return strings.Contains(p.stderr.String(), "draining") })
	resp := get()
	if resp.StatusCode != http.StatusOK || !resp.Close {
		t.Errorf("while draining: %d, Connection %q; want 200 and Connection: close", resp.StatusCode, resp.Header.Get("Connection"))
	}
}
