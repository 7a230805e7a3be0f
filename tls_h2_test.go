package main

import (
	"bytes"
	"crypto/tls"
	"net/http"
	"net/http/httptrace"
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
