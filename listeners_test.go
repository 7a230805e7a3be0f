package main

// The two listeners as a client meets them over TCP: the limits they read
// requests within.

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/server"
	"petstore/internal/servertest"
)

// serveOn serves h within limits on a port of its own on loopback, until
// the test ends, and returns its HOST:PORT.
func serveOn(t *testing.T, h http.Handler, limits serverLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logger, _ := server.NewLogger(io.Discard, "text", "info")
	srv := httpServer(h, limits, logger, nil)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// rawExchange sends req on a new connection to host, leaves the connection
// open for writing, and returns what the server sent until it hung up, and
// when it did; an error when it is still open after wait.
func rawExchange(host, req string, wait time.Duration) ([]byte, time.Duration, error) {
	conn, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		return nil, 0, err
	}
	defer conn.Close()
	start := time.Now()
	conn.SetDeadline(start.Add(wait))
	if _, err := io.WriteString(conn, req); err != nil {
		return nil, 0, err
	}
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return got, time.Since(start), errors.New("the connection is still open")
	}
	return got, time.Since(start), nil
}

// A body that stops coming is cut off at the read timeout on the admin
// listener as on the public one, token or not: both servers are made by
// httpServer with the same read limits (here shortened from 15 s). A
// profile, which reads no body, still runs as long as it was asked to.
func TestASlowBodyIsCutOffOnBothListenersAtTheReadTimeout(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{Metrics: server.NewMetrics(server.ReadBuildInfo().Metrics())})
	key := s.MustCreateKey("pro")
	admin := s.MustCreateAdmin("portal", domain.AllAdminScopes)
	short := serverLimits{readHeader: 300 * time.Millisecond, read: 600 * time.Millisecond, write: 10 * time.Second, idle: 10 * time.Second}
	public, adminAt := serveOn(t, s.Handler(), short), serveOn(t, s.AdminHandler(), short.admin())
	// 10 bytes of the 60000 announced, and then nothing.
	slowBody := func(host, target, token string) string {
		req := "POST " + target + " HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n"
		if token != "" {
			req += "Authorization: Bearer " + token + "\r\n"
		}
		return req + "\r\n" + `{"name":"R`
	}
	tests := []struct {
		name, host, req string
	}{
		{"public, with a key", public, slowBody(public, "/v1/pets", key)},
		{"public, without a key", public, slowBody(public, "/v1/pets", "")},
		{"admin, with a token", adminAt, slowBody(adminAt, "/admin/v1/keys", admin)},
		{"admin, without a token", adminAt, slowBody(adminAt, "/admin/v1/keys", "")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, took, err := rawExchange(tc.host, tc.req, 5*time.Second)
			if err != nil {
				t.Fatalf("after %v: %v", took.Round(time.Millisecond), err)
			}
			if took < short.read-50*time.Millisecond {
				t.Errorf("closed after %v, before the read timeout (%v)", took, short.read)
			}
			if len(got) > 0 && !bytes.HasPrefix(got, []byte("HTTP/1.1 4")) {
				t.Errorf("answered %.60q; want nothing or a 4xx", got)
			}
		})
	}
	t.Run("a profile runs past the read timeout", func(t *testing.T) {
		t.Parallel()
		req := "GET /debug/pprof/profile?seconds=2 HTTP/1.1\r\nHost: " + adminAt + "\r\nConnection: close\r\n\r\n"
		got, took, err := rawExchange(adminAt, req, 10*time.Second)
		if err != nil || !bytes.HasPrefix(got, []byte("HTTP/1.1 200 ")) {
			t.Fatalf("after %v: %v %.80q", took, err, got)
		}
		if took < 2*time.Second {
			t.Errorf("a profile of 2 s answered after %v", took)
		}
	})
}
