package main

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptrace"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"petstore/internal/testkit"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Status sends one GET of path with a header of valueLen bytes over a
// raw HTTP/2 connection (Go's client refuses to send more than the server
// advertises), and returns the status the server answers.
func h2Status(t *testing.T, ca *testCA, url, path string, valueLen int) string {
	t.Helper()
	host := strings.TrimPrefix(url, "https://")
	conn, err := tls.Dial("tcp", host, &tls.Config{RootCAs: ca.pool, ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN chose %q, want h2", p)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	conn.Write([]byte(http2.ClientPreface))
	fr := http2.NewFramer(conn, conn)
	fr.WriteSettings()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", host}, {":path", path},
		{"x-padding", strings.Repeat("Z9", valueLen/2)}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	const frame = 16 << 10
	b := block.Bytes()
	first := b[:min(len(b), frame)]
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndStream: true, EndHeaders: len(b) <= frame})
	for b = b[len(first):]; len(b) > 0; {
		n := min(len(b), frame)
		fr.WriteContinuation(1, n == len(b), b[:n])
		b = b[n:]
	}
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no answer on stream 1: %v", err)
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			return f.PseudoValue("status")
		case *http2.RSTStreamFrame:
			t.Fatalf("stream reset: %v", f.ErrCode)
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY: %v %s (header of %d bytes)", f.ErrCode, f.DebugData(), valueLen)
		}
	}
}

// Over HTTPS, a request's headers may take 16 KiB, on HTTP/2 as on
// HTTP/1.1: more is refused with 431.
func TestHTTPSHeaderLimitIs16KiB(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	p, _, _ := httpsServing(t, ca, t.TempDir())
	if got := h2Status(t, ca, p.url, "/healthz", 16<<10-400); got != "200" {
		t.Errorf("just under 16 KiB of headers over HTTP/2: %s, want 200", got)
	}
	if got := h2Status(t, ca, p.url, "/healthz", 16<<10); got != "431" {
		t.Errorf("16 KiB of one header's value over HTTP/2: %s, want 431", got)
	}
	client := ca.client()
	client.Transport.(*http.Transport).TLSClientConfig.NextProtos = []string{"http/1.1"}
	client.Transport.(*http.Transport).ForceAttemptHTTP2 = false
	defer client.CloseIdleConnections()
	for _, tc := range []struct {
		size int
		want int
	}{{16<<10 - 200, 200}, {16<<10 + 100, 431}, {19 << 10, 431}} {
		req, _ := http.NewRequest("GET", p.url+"/healthz", nil)
		req.Header.Set("X-Padding", strings.Repeat("z", tc.size))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want || resp.ProtoMajor != 1 {
			t.Errorf("%d bytes of one header over %s: %d, want %d", tc.size, resp.Proto, resp.StatusCode, tc.want)
		}
	}
}

// During --shutdown-delay an HTTP/2 client is still answered, and told to
// go (GOAWAY) after each answer, so its next request opens a new
// connection instead of being cut off when the listener closes.
func TestHTTP2DrainSendsClientsAway(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	p, _, _ := httpsServing(t, ca, t.TempDir(), "--shutdown-delay", "3s")
	client := ca.client()
	defer client.CloseIdleConnections()
	get := func() (*http.Response, bool) {
		t.Helper()
		var reused bool
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "GET", p.url+"/healthz", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp, reused
	}
	get()
	if resp, reused := get(); resp.ProtoMajor != 2 || !reused {
		t.Fatalf("before the drain: %s, reused %v; want HTTP/2 on a kept connection", resp.Proto, reused)
	}
	p.cancel()
	testkit.Eventually(t, 5*time.Second, "the server is draining", func() bool { return strings.Contains(p.stderr.String(), "draining") })
	if resp, _ := get(); resp.StatusCode != 200 {
		t.Fatalf("while draining: %d, want 200", resp.StatusCode)
	}
	time.Sleep(200 * time.Millisecond) // the GOAWAY follows the answer
	if resp, reused := get(); resp.StatusCode != 200 || reused {
		t.Errorf("the next request while draining: %d, reused %v; want 200 on a new connection", resp.StatusCode, reused)
	}
}

// tlsExchange sends req as it is over TLS to addr (HTTP/1.1 by ALPN) and
// returns the whole answer, the connection closed by Connection: close.
func tlsExchange(t *testing.T, ca *testCA, addr, req string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.pool, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, req)
	got, _ := io.ReadAll(conn)
	return string(got)
}

// Every answer of both listeners over TLS carries Strict-Transport-Security:
// the public one with --tls-cert and the admin one with --admin-tls-cert,
// the answers of the handlers, of the routers (404, 405, a cleaned path's
// redirect) and http1HeaderLimit's 431 alike.
func TestEveryAnswerOfBothTLSListenersCarriesHSTS(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile, _ := ca.writePair(t, dir)
	p := runServing(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "petstore.db"), "--tls-cert", certFile, "--tls-key", keyFile,
		"--admin-addr", "127.0.0.1:0", "--admin-tls-cert", certFile, "--admin-tls-key", keyFile)
	admin := regexp.MustCompile(`admin=https://(\S+)`).FindStringSubmatch(p.stderr.String())
	if admin == nil || !strings.HasPrefix(p.url, "https://") {
		t.Fatalf("want https:// for both listeners on the serving line:\n%s", p.stderr)
	}
	key := testkit.BootstrapKeyIn(t, p.stderr.String())
	big := "X-Padding: " + strings.Repeat("z", headerLimit) + "\r\n" // past headerLimit, within what net/http reads
	for _, tc := range []struct {
		listener, addr, request, status string
	}{
		{"public", p.url, "GET /healthz", "200"},
		{"public", p.url, "GET /v1/pets\r\nAuthorization: Bearer " + key, "200"},
		{"public", p.url, "GET /v1/pets?limit=abc\r\nAuthorization: Bearer " + key, "400"},
		{"public", p.url, "GET /v1/pets", "401"},
		{"public", p.url, "GET /nothing", "404"},
		{"public", p.url, "DELETE /v1/pets\r\nAuthorization: Bearer " + key, "405"},
		{"public", p.url, "GET //v1/pets", "307"},
		{"public", p.url, "GET /healthz\r\n" + big, "431"},
		{"admin", admin[1], "GET /metrics", "200"},
		{"admin", admin[1], "GET /admin/v1/keys", "401"},
		{"admin", admin[1], "GET /admin/v1/whoami\r\nSec-Fetch-Site: cross-site", "403"},
		{"admin", admin[1], "GET /nothing", "404"},
		{"admin", admin[1], "POST /metrics", "405"},
		{"admin", admin[1], "GET /metrics\r\nHost: rebind.example", "421"},
		{"admin", admin[1], "GET //admin/v1/whoami", "307"},
		{"admin", admin[1], "GET /metrics\r\n" + big, "431"},
	} {
		method, rest, _ := strings.Cut(tc.request, " ")
		path, headers, _ := strings.Cut(rest, "\r\n")
		if headers != "" && !strings.HasSuffix(headers, "\r\n") {
			headers += "\r\n"
		}
		host := "Host: " + strings.TrimPrefix(tc.addr, "https://") + "\r\n"
		if strings.Contains(headers, "Host: ") {
			host = ""
		}
		got := tlsExchange(t, ca, strings.TrimPrefix(tc.addr, "https://"), method+" "+path+" HTTP/1.1\r\n"+host+headers+"Connection: close\r\n\r\n")
		head, _, _ := strings.Cut(got, "\r\n\r\n")
		if !strings.HasPrefix(head, "HTTP/1.1 "+tc.status+" ") || !strings.Contains(head, "\r\nStrict-Transport-Security: max-age=31536000") {
			t.Errorf("the %s listener, %s %s: %.300q, want %s with Strict-Transport-Security", tc.listener, method, path, head, tc.status)
		}
	}
	client := ca.client()
	defer client.CloseIdleConnections()
	for _, u := range []string{p.url + "/nothing", "https://" + admin[1] + "/nothing"} {
		resp, _ := testkit.Fetch(t, client, "GET", u, "", "")
		if resp.ProtoMajor != 2 || resp.Header.Get("Strict-Transport-Security") == "" {
			t.Errorf("GET %s over %s: no Strict-Transport-Security, or not HTTP/2", u, resp.Proto)
		}
	}
}

// TLS 1.2 offers only ECDHE suites with authenticated encryption: a client
// that offers only CBC with SHA-1 (in Go's defaults) is refused, one that
// offers only an AEAD suite is served; TLS 1.3 is served as ever. The admin
// listener's TLS is made by the same code.
func TestTLS12OffersOnlyAEADSuites(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	p, _, _ := httpsServing(t, ca, t.TempDir())
	addr := strings.TrimPrefix(p.url, "https://")
	for _, tc := range []struct {
		name    string
		version uint16
		suite   uint16
		served  bool
	}{
		{"ECDHE-ECDSA-AES128-SHA (CBC, SHA-1)", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, false},
		{"ECDHE-ECDSA-AES256-SHA (CBC, SHA-1)", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, false},
		{"ECDHE-ECDSA-AES128-GCM-SHA256", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, true},
		{"ECDHE-ECDSA-CHACHA20-POLY1305", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, true},
		{"TLS 1.3", tls.VersionTLS13, 0, true},
	} {
		cfg := &tls.Config{RootCAs: ca.pool, ServerName: "localhost", MinVersion: tc.version, MaxVersion: tc.version}
		if tc.suite != 0 {
			cfg.CipherSuites = []uint16{tc.suite}
		}
		conn, err := tls.Dial("tcp", addr, cfg)
		switch {
		case tc.served && err != nil:
			t.Errorf("%s: the handshake failed: %v", tc.name, err)
		case !tc.served && err == nil:
			t.Errorf("%s: the handshake succeeded with %s, want it refused", tc.name, tls.CipherSuiteName(conn.ConnectionState().CipherSuite))
		case tc.served && tc.suite != 0 && conn.ConnectionState().CipherSuite != tc.suite:
			t.Errorf("%s: served with %s", tc.name, tls.CipherSuiteName(conn.ConnectionState().CipherSuite))
		}
		if conn != nil {
			conn.Close()
		}
	}
}
