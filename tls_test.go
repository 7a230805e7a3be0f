package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"petstore/internal/certs"
	"petstore/internal/httpapi"
	"petstore/internal/servertest"
	"petstore/internal/testkit"
)

func init() {
	// The files are looked at four times a second in tests, and a pair
	// that does not load is reported after a second.
	certs.PollEvery, certs.MismatchGrace = 250*time.Millisecond, time.Second
}

// Each bad certificate pair at start ends the server with one line naming
// the flag, the file and what is wrong: exit 1, or 2 for a usage mistake.
func TestBadCertificateFilesAtStartNameTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newTestCA(t)
	certFile, keyFile, _ := ca.writePair(t, dir)
	_, otherKey, _ := ca.writePair(t, t.TempDir())
	expiredPEM, expiredKey, _ := ca.leaf(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour), "localhost")
	expired, expiredKeyFile := filepath.Join(dir, "expired.pem"), filepath.Join(dir, "expired-key.pem")
	mustWrite(t, expired, expiredPEM)
	mustWrite(t, expiredKeyFile, expiredKey)
	garbage := filepath.Join(dir, "garbage.pem")
	mustWrite(t, garbage, []byte("not a certificate\n"))
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"a key that does not match its certificate", []string{"--tls-cert", certFile, "--tls-key", otherKey}, 1,
			[]string{"--tls-key " + otherKey + " does not match the certificate in --tls-cert " + certFile}},
		{"an expired certificate", []string{"--tls-cert", expired, "--tls-key", expiredKeyFile}, 1,
			[]string{"--tls-cert " + expired + " expired on "}},
		{"a missing certificate", []string{"--tls-cert", missing, "--tls-key", keyFile}, 1,
			[]string{"--tls-cert " + missing + ": no such file or directory"}},
		{"a file that holds no certificate", []string{"--tls-cert", garbage, "--tls-key", keyFile}, 1,
			[]string{"--tls-cert " + garbage + " holds no PEM certificate"}},
		{"a key file that holds no key", []string{"--tls-cert", certFile, "--tls-key", garbage}, 1,
			[]string{"--tls-key " + garbage + " holds no PEM private key"}},
		{"a certificate without its key", []string{"--tls-cert", certFile}, 2, []string{"--tls-cert needs --tls-key"}},
		{"a key without its certificate", []string{"--tls-key", keyFile}, 2, []string{"--tls-key needs --tls-cert"}},
		{"an admin certificate without an admin listener", []string{"--admin-tls-cert", certFile, "--admin-tls-key", keyFile}, 2,
			[]string{"--admin-tls-cert needs --admin-addr"}},
		{"a bad admin pair", []string{"--admin-addr", "127.0.0.1:0", "--admin-tls-cert", certFile, "--admin-tls-key", otherKey}, 1,
			[]string{"--admin-tls-key " + otherKey + " does not match the certificate in --admin-tls-cert " + certFile}},
		{"a negative --hsts", []string{"--tls-cert", certFile, "--tls-key", keyFile, "--hsts", "-1s"}, 2, []string{"--hsts must be 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"petstore", "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "petstore.db")}, tc.args...)
			var stderr bytes.Buffer
			err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), io.Discard, &stderr)
			var out bytes.Buffer
			code := exitCode(err, &out)
			line := out.String()
			if code != tc.code || strings.Count(line, "\n") != 1 {
				t.Fatalf("exit %d with %q, want exit %d and one line", code, line, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("%q does not say %q", line, w)
				}
			}
		})
	}
}

// httpsServing starts serve with a certificate pair of ca in dir and
// args, and wants its serving line to give an https:// URL.
func httpsServing(t *testing.T, ca *testCA, dir string, args ...string) (*inProcess, string, string) {
	t.Helper()
	certFile, keyFile, _ := ca.writePair(t, dir)
	p := runServing(t, nil, append([]string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "petstore.db"),
		"--tls-cert", certFile, "--tls-key", keyFile}, args...)...)
	if !strings.HasPrefix(p.url, "https://") {
		t.Fatalf("serving line gives %s, want an https:// URL", p.url)
	}
	return p, certFile, keyFile
}

// With a certificate pair, the API answers over HTTP/2 to a client that
// trusts only the root, with Strict-Transport-Security; the first-start
// hint shows an https:// URL.
func TestCertificateFilesServeHTTP2WithHSTS(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	p, certFile, _ := httpsServing(t, ca, t.TempDir())
	key := testkit.BootstrapKeyIn(t, p.stderr.String())
	client := ca.client()
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest("GET", p.url+"/v1/pets", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Errorf("GET /v1/pets: %d over %s, want 200 over HTTP/2", resp.StatusCode, resp.Proto)
	}
	if got := resp.Header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
		t.Errorf("Strict-Transport-Security %q, want max-age=31536000", got)
	}
	for _, tc := range []struct {
		env  map[string]string
		want int
	}{
		{map[string]string{"PETSTORE_TLS_CERT": certFile}, 0},
		{nil, 1}, // the test root is not among the system's
	} {
		if res := viaRun(t, tc.env, "healthcheck", "--url", p.url); res.Code != tc.want {
			t.Errorf("healthcheck --url %s with %v: exit %d %s, want %d", p.url, tc.env, res.Code, res.Stderr, tc.want)
		}
	}
	// Plain HTTP to the HTTPS port: 400 https_required, in the Error shape.
	plain := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	resp2, body := testkit.Fetch(t, plain, "GET", strings.Replace(p.url, "https://", "http://", 1)+"/v1/pets", key, "")
	if resp2.StatusCode != 400 || !strings.Contains(body, `"code":"https_required"`) || !strings.Contains(body, "use https") {
		t.Errorf("plain HTTP to the HTTPS port: %d %s, want 400 https_required", resp2.StatusCode, body)
	}
	if v := resp.TLS.Version; v != tls.VersionTLS13 {
		t.Errorf("TLS version %x, want 1.3", v)
	}
	old := &tls.Config{RootCAs: ca.pool, MaxVersion: tls.VersionTLS11, MinVersion: tls.VersionTLS10}
	if conn, err := tls.Dial("tcp", strings.TrimPrefix(p.url, "https://"), old); err == nil {
		conn.Close()
		t.Error("a TLS 1.1 handshake succeeded, want TLS 1.2 or later only")
	}
}

// --hsts 0 sends no Strict-Transport-Security.
func TestHSTSZeroSendsNone(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	p, _, _ := httpsServing(t, ca, t.TempDir(), "--hsts", "0")
	client := ca.client()
	defer client.CloseIdleConnections()
	resp, err := client.Get(p.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got, ok := resp.Header["Strict-Transport-Security"]; ok {
		t.Errorf("Strict-Transport-Security %q with --hsts 0, want none", got)
	}
}

// swapPair writes a new pair over the files, the certificate first and
// the key pause later, as a renewal tool does.
func swapPair(t *testing.T, ca *testCA, certFile, keyFile string, pause time.Duration) *big.Int {
	t.Helper()
	certPEM, keyPEM, serial := ca.leaf(t, time.Now().Add(-time.Minute), time.Now().Add(12*time.Hour), "localhost")
	mustWrite(t, certFile, certPEM)
	time.Sleep(pause)
	mustWrite(t, keyFile, keyPEM)
	return serial
}

// Certificate files swapped while many keep-alive clients (HTTP/1.1 and
// HTTP/2) send requests: not one request fails, the brief mismatch between
// the two writes is no ERROR, and new connections get the new certificate.
func TestCertificateFilesSwappedUnderLoad(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	p, certFile, keyFile := httpsServing(t, ca, t.TempDir())
	var sent, failed atomic.Int64
	var firstErr atomic.Value
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 16 {
		client := ca.client()
		if i%2 == 0 {
			client.Transport.(*http.Transport).ForceAttemptHTTP2 = false
			client.Transport.(*http.Transport).TLSClientConfig.NextProtos = []string{"http/1.1"}
		}
		wg.Go(func() {
			defer client.CloseIdleConnections()
			for ctx.Err() == nil {
				sent.Add(1)
				resp, err := client.Get(p.url + "/healthz")
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = errors.New(resp.Status)
					}
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	serial := swapPair(t, ca, certFile, keyFile, 300*time.Millisecond)
	testkit.Eventually(t, 5*time.Second, "the new certificate served", func() bool { return servedSerial(t, ca, p.url).Cmp(serial) == 0 })
	time.Sleep(500 * time.Millisecond)
	stop()
	wg.Wait()
	if failed.Load() > 0 || sent.Load() < 100 {
		t.Errorf("%d of %d requests failed (first: %v)", failed.Load(), sent.Load(), firstErr.Load())
	}
	if strings.Contains(p.stderr.String(), "level=ERROR") {
		t.Errorf("an ERROR for a pair written one file after the other:\n%s", p.stderr)
	}
}

// A pair that stays mismatched past the grace is an ERROR naming the file,
// and the old certificate keeps serving until the pair matches again.
func TestMismatchedPairKeepsTheOldCertificate(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	dir := t.TempDir()
	p, certFile, keyFile := httpsServing(t, ca, dir)
	before := servedSerial(t, ca, p.url)
	certPEM, keyPEM, serial := ca.leaf(t, time.Now().Add(-time.Minute), time.Now().Add(12*time.Hour), "localhost")
	mustWrite(t, certFile, certPEM)
	testkit.Eventually(t, 5*time.Second, "an ERROR naming the key file", func() bool {
		return strings.Contains(p.stderr.String(), "level=ERROR") && strings.Contains(p.stderr.String(), "--tls-key "+keyFile+" does not match")
	})
	if got := servedSerial(t, ca, p.url); got.Cmp(before) != 0 {
		t.Fatalf("serial %v served while the pair is mismatched, want the old %v", got, before)
	}
	mustWrite(t, keyFile, keyPEM)
	testkit.Eventually(t, 5*time.Second, "the new certificate served", func() bool { return servedSerial(t, ca, p.url).Cmp(serial) == 0 })
}

// SIGHUP reloads the pair at once, even when the files' sizes and times
// did not change (a restored backup).
func TestSIGHUPReloadsTheCertificate(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile, _ := ca.writePair(t, dir)
	s := startPetstore(t, dir, "--db", filepath.Join(dir, "petstore.db"), "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(s.URL, "https://") {
		t.Fatalf("serving at %s, want https://", s.URL)
	}
	oldCert, _ := os.ReadFile(certFile)
	oldKey, _ := os.ReadFile(keyFile)
	info, _ := os.Stat(certFile)
	keyInfo, _ := os.Stat(keyFile)
	var serial *big.Int
	for {
		certPEM, keyPEM, n := ca.leaf(t, time.Now().Add(-time.Minute), time.Now().Add(12*time.Hour), "localhost")
		if len(certPEM) == len(oldCert) && len(keyPEM) == len(oldKey) {
			mustWrite(t, certFile, certPEM)
			mustWrite(t, keyFile, keyPEM)
			serial = n
			break
		}
	}
	os.Chtimes(certFile, info.ModTime(), info.ModTime())
	os.Chtimes(keyFile, keyInfo.ModTime(), keyInfo.ModTime())
	time.Sleep(3 * certs.PollEvery)
	if got := servedSerial(t, ca, s.URL); got.Cmp(serial) == 0 {
		t.Fatal("the new pair was served before SIGHUP: the test cannot tell SIGHUP did it")
	}
	s.Cmd.Process.Signal(syscall.SIGHUP)
	testkit.Eventually(t, 2*time.Second, "the new certificate served after SIGHUP", func() bool { return servedSerial(t, ca, s.URL).Cmp(serial) == 0 })
}

// A mismatched pair after SIGHUP is one ERROR, however often SIGHUP asks
// again for the same files; the matching pair is taken up and the reload
// line names its IP address as well as its DNS name.
func TestSIGHUPOnAMismatchedPairLogsOnce(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile, _ := ca.writePair(t, dir)
	s := startPetstore(t, dir, "--db", filepath.Join(dir, "petstore.db"), "--tls-cert", certFile, "--tls-key", keyFile)
	certPEM, keyPEM, serial := ca.leaf(t, time.Now().Add(-time.Minute), time.Now().Add(12*time.Hour), "localhost")
	mustWrite(t, certFile, certPEM)
	told := func() int { return strings.Count(s.Stderr.String(), "the certificate files do not load") }
	s.Cmd.Process.Signal(syscall.SIGHUP)
	testkit.Eventually(t, 2*time.Second, "an ERROR for the mismatched pair", func() bool { return told() == 1 })
	for i := range 2 {
		s.Cmd.Process.Signal(syscall.SIGHUP)
		testkit.Eventually(t, 2*time.Second, "SIGHUP taken", func() bool { return strings.Count(s.Stderr.String(), "SIGHUP: reading") == i+2 })
	}
	time.Sleep(2 * time.Second) // past the binary's poll
	if n := told(); n != 1 {
		t.Errorf("%d ERRORs for one mismatched pair, want 1:\n%s", n, s.Stderr)
	}
	mustWrite(t, keyFile, keyPEM)
	s.Cmd.Process.Signal(syscall.SIGHUP)
	testkit.Eventually(t, 2*time.Second, "the new certificate served after SIGHUP", func() bool { return servedSerial(t, ca, s.URL).Cmp(serial) == 0 })
	testkit.Eventually(t, 2*time.Second, "a reload line naming localhost and 127.0.0.1", func() bool {
		return strings.Contains(s.Stderr.String(), `msg="certificate reloaded" cert=`+certFile+` names=localhost,127.0.0.1 `)
	})
}

// The admin listener stays plain HTTP unless it has its own pair; plain on
// an address other than loopback, it is a WARN.
func TestAdminListenerTLS(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile, _ := ca.writePair(t, dir)
	plain := runServing(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "plain.db"), "--admin-addr", "0.0.0.0:0")
	if !strings.Contains(plain.stderr.String(), "level=WARN msg=\"the admin listener is on a non-loopback address without TLS") {
		t.Errorf("no WARN for a plain admin listener on every interface:\n%s", plain.stderr)
	}
	local := runServing(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "local.db"), "--admin-addr", "127.0.0.1:0")
	if strings.Contains(local.stderr.String(), "admin listener is on a non-loopback") {
		t.Errorf("a WARN for an admin listener on loopback:\n%s", local.stderr)
	}
	secure := runServing(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "tls.db"), "--admin-addr", "0.0.0.0:0",
		"--admin-tls-cert", certFile, "--admin-tls-key", keyFile)
	admin := regexp.MustCompile(`admin=https://\S+:([0-9]+)`).FindStringSubmatch(secure.stderr.String())
	if admin == nil || strings.Contains(secure.stderr.String(), "without TLS") {
		t.Fatalf("the admin listener with its pair: no https:// admin in the serving line, or a WARN:\n%s", secure.stderr)
	}
	if !strings.HasPrefix(secure.url, "http://") {
		t.Errorf("the API at %s with only an admin pair, want plain http://", secure.url)
	}
	adminURL := "https://127.0.0.1:" + admin[1]
	client := ca.client()
	defer client.CloseIdleConnections()
	resp, err := client.Get(adminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "petstore_tls_certificate_expiry_timestamp_seconds{name=\"localhost\"}") {
		t.Errorf("GET /metrics over TLS: %d, want 200 with the certificate's expiry:\n%.2000s", resp.StatusCode, body)
	}
}

// The first-start hint on a terminal names the URL a user on this machine
// reaches: https:// over TLS, localhost for every interface.
func TestBaseURLOfHTTPS(t *testing.T) {
	for _, tc := range []struct{ scheme, addr, want string }{
		{"https", "0.0.0.0:443", "https://localhost:443"},
		{"https", "127.0.0.1:8443", "https://127.0.0.1:8443"},
		{"http", "[::]:8080", "http://localhost:8080"},
	} {
		addr, _ := net.ResolveTCPAddr("tcp", tc.addr)
		if got := baseURL(tc.scheme, addr); got != tc.want {
			t.Errorf("baseURL(%s, %s) = %s, want %s", tc.scheme, tc.addr, got, tc.want)
		}
	}
}

// With certificate files, --http-addr redirects to the HTTPS port with
// 308, answers the health checks, and refuses /v1 with https_required.
func TestHTTPPortBesideCertificateFiles(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	p, _, _ := httpsServing(t, ca, t.TempDir(), "--http-addr", "127.0.0.1:0")
	m := regexp.MustCompile(`http=(http://127\.0\.0\.1:[0-9]+)`).FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no http= in the serving line:\n%s", p.stderr)
	}
	plain := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer plain.CloseIdleConnections()
	for _, tc := range []struct {
		path     string
		status   int
		location string
	}{
		{"/docs?x=1", 308, p.url + "/docs?x=1"},
		{"/", 308, p.url + "/"},
		{"/healthz", 200, ""},
		{"/readyz", 200, ""},
		{"/v1/pets", 400, ""},
		{"/v1", 400, ""},
	} {
		resp, body := testkit.Fetch(t, plain, "GET", m[1]+tc.path, "", "")
		if resp.StatusCode != tc.status || resp.Header.Get("Location") != tc.location {
			t.Errorf("GET %s on the plain port: %d to %q, want %d to %q", tc.path, resp.StatusCode, resp.Header.Get("Location"), tc.status, tc.location)
		}
		if tc.status == 400 && !strings.Contains(body, `"code":"https_required"`) {
			t.Errorf("GET %s on the plain port: %s, want https_required", tc.path, body)
		}
	}
}

// The plain port refuses, 400 https_required and never redirected, any
// request whose path is under /v1 once cleaned, however it is spelled, and
// any request that carries Authorization, whatever its path: a client that
// followed a redirect would send its key a second time. Raw requests, as
// curl sends them, and a Go client that follows redirects.
func TestPlainPortRefusesAKeyWhateverThePath(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	p, _, _ := httpsServing(t, ca, t.TempDir(), "--http-addr", "127.0.0.1:0")
	m := regexp.MustCompile(`http=http://(127\.0\.0\.1:[0-9]+)`).FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no http= in the serving line:\n%s", p.stderr)
	}
	key := testkit.BootstrapKeyIn(t, p.stderr.String())
	for _, tc := range []struct {
		target, authorization string
		refused               bool
	}{
		{"//v1/pets", "", true},
		{"///v1/pets", "", true},
		{"/x/../v1/pets", "", true},
		{"/v1/../v1/pets", "", true},
		{"/./v1/pets", "", true},
		{"/v1/./pets", "", true},
		{"/%2Fv1/pets", "", true},
		{"/%2fv1%2fpets", "", true},
		{"/%76%31/pets", "", true},
		{"/x/%2E%2E/v1/pets", "", true},
		{"//v1", "", true},
		{"/", "Bearer " + key, true},
		{"/docs", "Bearer " + key, true},
		{"/healthz", "Bearer " + key, true},
		{"/.well-known/acme-challenge/x", "Bearer " + key, true},
		{"/docs", "Basic dXNlcjpwYXNz", true},

		{"/docs", "", false},
		{"/v1x/pets", "", false},
		{"/x/v1/pets", "", false},
	} {
		req := "GET " + tc.target + " HTTP/1.1\r\nHost: " + m[1] + "\r\nConnection: close\r\n"
		if tc.authorization != "" {
			req += "Authorization: " + tc.authorization + "\r\n"
		}
		got, _, err := rawExchange(m[1], req+"\r\n", 5*time.Second)
		switch {
		case err != nil:
			t.Errorf("GET %s: %v", tc.target, err)
		case tc.refused && (!bytes.HasPrefix(got, []byte("HTTP/1.1 400 ")) || !bytes.Contains(got, []byte(`"code":"https_required"`)) ||
			bytes.Contains(got, []byte("\r\nLocation:"))):
			t.Errorf("GET %s with Authorization %q on the plain port: %.300q, want 400 https_required and no Location", tc.target, tc.authorization, got)
		case !tc.refused && !bytes.HasPrefix(got, []byte("HTTP/1.1 308 ")):
			t.Errorf("GET %s without a key on the plain port: %.300q, want a 308 redirect", tc.target, got)
		}
	}
	follower := ca.client()
	follower.CheckRedirect = nil // Go's default: follow, with Authorization to the same host
	defer follower.CloseIdleConnections()
	for _, path := range []string{"//v1/pets", "/x/../v1/pets", "/v1/../v1/pets", "/docs", "/"} {
		resp, body := testkit.Fetch(t, follower, "GET", "http://"+m[1]+path, key, "")
		if resp.StatusCode != 400 || resp.Request.URL.Scheme != "http" || !strings.Contains(body, `"code":"https_required"`) {
			t.Errorf("a Go client that follows redirects, GET %s with a key: %d from %s, want 400 https_required from the plain port and no second hop: %s",
				path, resp.StatusCode, resp.Request.URL, body)
		}
	}
}

// With --acme-domain the redirect names only the configured names, never
// a Host it was sent: another name or an address is refused 421.
func TestPlainRedirectNamesOnlyTheConfiguredNames(t *testing.T) {
	names := []string{"api.petstore.test", "www.petstore.test"}
	h := plainHandler(http.NotFoundHandler(), nil, names, 443, testkit.DiscardLogger(), nil)
	for _, tc := range []struct {
		names    []string
		host     string
		location string // "" when refused
	}{
		{names, "api.petstore.test", "https://api.petstore.test/docs?a=1"},
		{names, "www.petstore.test:80", "https://www.petstore.test/docs?a=1"},
		{names, "API.Petstore.Test.", "https://api.petstore.test/docs?a=1"},
		{names, "evil.example", ""},
		{names, "evil.example:80", ""},
		{names, "api.petstore.test.evil.example", ""},
		{names, "203.0.113.5", ""},
		{names, "[::1]:80", ""},
		{names, "", ""},
		{nil, "203.0.113.5:80", "https://203.0.113.5/docs?a=1"}, // certificate files: the Host kept, as before
		{nil, "[::1]:80", "https://[::1]/docs?a=1"},
		{nil, "", ""},
	} {
		if tc.names == nil {
			h = plainHandler(http.NotFoundHandler(), nil, nil, 443, testkit.DiscardLogger(), nil)
		}
		req := httptest.NewRequest("GET", "/docs?a=1", nil)
		req.Host = tc.host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if tc.location == "" {
			servertest.WantError(t, w, http.StatusMisdirectedRequest, httpapi.CodeMisdirectedRequest, "does not serve the Host")
			if loc := w.Header().Get("Location"); loc != "" {
				t.Errorf("Host %q: Location %q, want none", tc.host, loc)
			}
			continue
		}
		if w.Code != http.StatusPermanentRedirect || w.Header().Get("Location") != tc.location {
			t.Errorf("Host %q: %d to %q, want 308 to %q", tc.host, w.Code, w.Header().Get("Location"), tc.location)
		}
	}
}
