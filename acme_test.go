package main

import (
	"crypto/x509"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"petstore/internal/certs"
	"petstore/internal/httpapi"
	"petstore/internal/testkit"
)

const testDomain = "api.petstore.test"

// A server with --acme-domain gets its certificate from Pebble through a
// real challenge; a client that trusts only Pebble's issuing root gets 200
// over HTTP/2 from /v1/pets, and the plain port redirects / with 308 and
// refuses /v1/pets with 400 https_required.
func TestACMECertificateFromPebble(t *testing.T) {
	t.Parallel()
	pebble := startPebble(t, 24*time.Hour)
	dir := t.TempDir()
	p := runServing(t, nil, pebble.acmeArgs(filepath.Join(dir, "petstore.db"), testDomain)...)
	key := testkit.BootstrapKeyIn(t, p.stderr.String())
	client := trustingClient(pebble.issuing, testDomain)
	defer client.CloseIdleConnections()
	resp, body := testkit.Fetch(t, client, "GET", p.url+"/v1/pets", key, "")
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Fatalf("GET /v1/pets over HTTPS: %d over %s, want 200 over HTTP/2: %s", resp.StatusCode, resp.Proto, body)
	}
	if got := resp.TLS.PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != testDomain {
		t.Errorf("the certificate's names %v, want [%s]", got, testDomain)
	}
	if resp.Header.Get("Strict-Transport-Security") == "" {
		t.Error("no Strict-Transport-Security over HTTPS")
	}

	plainURL := "http://127.0.0.1:" + strconv.Itoa(pebble.httpPort)
	plain := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer plain.CloseIdleConnections()
	host := testDomain + ":" + strconv.Itoa(pebble.httpPort)
	resp, _ = testkit.Fetch(t, plain, "GET", plainURL+"/docs/?a=1&b=2", "", "", "Host", host)
	want := "https://" + testDomain + ":" + strconv.Itoa(pebble.tlsPort) + "/docs/?a=1&b=2"
	if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
		t.Errorf("GET / over plain HTTP: %d to %q, want 308 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	// A Host that is not the server's: refused, never echoed in a Location.
	resp, body = testkit.Fetch(t, plain, "GET", plainURL+"/docs/", "", "", "Host", "evil.example:"+strconv.Itoa(pebble.httpPort))
	if resp.StatusCode != http.StatusMisdirectedRequest || resp.Header.Get("Location") != "" || !strings.Contains(body, `"code":"misdirected_request"`) {
		t.Errorf("GET /docs/ over plain HTTP with Host evil.example: %d to %q %s, want 421 misdirected_request and no Location", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	resp, body = testkit.Fetch(t, plain, "GET", plainURL+"/v1/pets", key, "", "Host", host)
	var e httpapi.Error
	json.Unmarshal([]byte(body), &e)
	if resp.StatusCode != 400 || e.Code != "https_required" || !strings.Contains(e.Message, "use https") {
		t.Errorf("GET /v1/pets over plain HTTP: %d %s, want 400 https_required saying use https", resp.StatusCode, body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if resp, body := testkit.Fetch(t, plain, "GET", plainURL+path, "", "", "Host", host); resp.StatusCode != 200 {
			t.Errorf("GET %s over plain HTTP: %d %s, want 200", path, resp.StatusCode, body)
		}
	}
	checkCachePermissions(t, filepath.Join(dir, "petstore-acme"))
	certmagicQuietAtInfo(t, p.stderr.String())

	// petstore healthcheck, as the systemd unit runs it: the server's own
	// PETSTORE_ACME_DOMAIN and PETSTORE_ADDR.
	env := map[string]string{"PETSTORE_ACME_DOMAIN": testDomain, "PETSTORE_ADDR": "127.0.0.1:" + strconv.Itoa(pebble.tlsPort)}
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--ca-root", pebble.issuingPEM}, 0},
		{nil, 1}, // Pebble's root is not among the system's
		{[]string{"--ca-root", pebble.issuingPEM, "--server-name", "other.petstore.test"}, 1},
	} {
		if res := viaRun(t, env, append([]string{"healthcheck"}, tc.args...)...); res.Code != tc.want {
			t.Errorf("healthcheck %v: exit %d %s, want %d", tc.args, res.Code, res.Stderr, tc.want)
		}
	}
}

// checkCachePermissions wants the cache directory 0700 and every file in
// it that holds a key or a certificate 0600.
func checkCachePermissions(t *testing.T, cache string) {
	t.Helper()
	info, err := os.Stat(cache)
	if err != nil {
		t.Fatalf("the ACME cache: %v", err)
	}
	if info.Mode().Perm() != 0o700 {
		t.Errorf("%s is %v, want 0700", cache, info.Mode().Perm())
	}
	files := 0
	filepath.WalkDir(cache, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(path, "/locks/") {
			return err
		}
		files++
		if info, _ := d.Info(); info.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", path, info.Mode().Perm())
		}
		return nil
	})
	if files < 3 {
		t.Errorf("%d files in %s, want the account and the certificate with its key", files, cache)
	}
}

func init() {
	// In tests, certmagic looks for certificates to renew every second and
	// the first certificate is awaited 5 seconds. The served ones' expiry
	// is looked at every minute, as in production: the expiry gauge must
	// not wait for that look.
	certs.ACMERenewCheck, certs.ACMEFirstWait = time.Second, 5*time.Second
}

// servedCert is the serial number of the certificate a new connection to
// url gets for domain, from a client trusting only roots.
func servedCert(t *testing.T, roots *x509.CertPool, url, domain string) (string, error) {
	t.Helper()
	leaf, err := servedLeaf(t, roots, url, domain)
	if err != nil {
		return "", err
	}
	return leaf.SerialNumber.String(), nil
}

// servedLeaf is the certificate a new connection to url gets for domain,
// from a client trusting only roots.
func servedLeaf(t *testing.T, roots *x509.CertPool, url, domain string) (*x509.Certificate, error) {
	t.Helper()
	client := trustingClient(roots, domain)
	defer client.CloseIdleConnections()
	resp, err := client.Get(url + "/healthz")
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	return resp.TLS.PeerCertificates[0], nil
}

// expiryGauge is petstore_tls_certificate_expiry_timestamp_seconds for
// name on the admin listener at admin, 0 when it is not there.
func expiryGauge(t *testing.T, admin, name string) int64 {
	t.Helper()
	f := testkit.ScrapeAdmin(t, "http://"+admin)["petstore_tls_certificate_expiry_timestamp_seconds"]
	for _, m := range f.GetMetric() {
		if testkit.LabelsOf(m)["name"] == name {
			return int64(m.GetGauge().GetValue())
		}
	}
	return 0
}

// A short-lived certificate is renewed on its own, and the new one served.
// The expiry gauge shows each certificate as it arrives, never a minute
// late: the first one's as the server says it serves, each renewal's as
// it is served. certmagic's steps are DEBUG in the server's log; the
// certificate obtained and renewed are INFO.
func TestACMERenewsAShortLivedCertificate(t *testing.T) {
	t.Parallel()
	// Renewed from 10 s on, with a third of its life left.
	pebble := startPebble(t, 15*time.Second)
	domain := "renewal.petstore.test" // certmagic's backoff after a failure is per name and process
	admin := testkit.FreeAddr(t)
	p := runServing(t, nil, append(pebble.acmeArgs(filepath.Join(t.TempDir(), "petstore.db"), domain), "--admin-addr", admin, "--log-level", "debug")...)
	logOnFailure(t, p)
	first, err := servedLeaf(t, pebble.issuing, p.url, domain)
	if err != nil {
		t.Fatal(err)
	}
	if got := expiryGauge(t, admin, domain); got != first.NotAfter.Unix() {
		t.Errorf("the expiry gauge right after the first certificate: %d, want its NotAfter %d", got, first.NotAfter.Unix())
	}
	var renewed *x509.Certificate
	testkit.Eventually(t, 40*time.Second, "a renewed certificate served", func() bool {
		renewed, err = servedLeaf(t, pebble.issuing, p.url, domain)
		return err == nil && renewed.SerialNumber.Cmp(first.SerialNumber) != 0
	})
	// Renewals come every few seconds: the gauge may be one ahead of the
	// certificate served, never a minute behind.
	testkit.Eventually(t, 3*time.Second, "the expiry gauge at the renewed certificate's NotAfter", func() bool {
		renewed, err = servedLeaf(t, pebble.issuing, p.url, domain)
		return err == nil && expiryGauge(t, admin, domain) == renewed.NotAfter.Unix() && renewed.NotAfter.After(first.NotAfter)
	})
	if n := pebble.issued(); n < 2 {
		t.Errorf("Pebble issued %d certificates, want the first and its renewal", n)
	}
	for _, want := range []string{`level=INFO msg="certificate obtained successfully" component=acme`, `level=INFO msg="certificate renewed successfully" component=acme`} {
		testkit.Eventually(t, 10*time.Second, want+" in the log", func() bool { return strings.Contains(p.stderr.String(), want) })
	}
	for _, step := range []string{`msg="started background certificate maintenance" component=acme cache=0x`, `msg="creating new account`,
		`msg="acquiring lock"`, `msg="trying to solve challenge"`, `msg="replaced certificate in cache"`} {
		// The cache is replaced a moment after the renewal is logged.
		atDebug := testkit.Until(5*time.Second, 10*time.Millisecond, func() bool { return strings.Contains(p.stderr.String(), "level=DEBUG "+step) })
		if !atDebug || strings.Contains(p.stderr.String(), "level=INFO "+step) {
			t.Errorf("certmagic's step %s not at DEBUG in the log", step)
		}
	}
}

// certmagicQuietAtInfo fails when a server's log at INFO holds certmagic's
// steps, which are DEBUG: its cache's address, the account file it did not
// find, its locks.
func certmagicQuietAtInfo(t *testing.T, log string) {
	t.Helper()
	for _, step := range []string{"cache=0x", "creating new account", "no such file or directory", "acquiring lock", "trying to solve challenge"} {
		if strings.Contains(log, step) {
			t.Errorf("%q in the log at INFO, want certmagic's steps at DEBUG", step)
		}
	}
	if want := `level=INFO msg="certificate obtained successfully" component=acme`; !strings.Contains(log, want) {
		t.Errorf("no %s in the log", want)
	}
}

// With the CA away, a server with a cached certificate starts, serves it,
// and logs and counts its failed renewal, to be retried with backoff.
func TestACMEServerAwayWithACachedCertificate(t *testing.T) {
	t.Parallel()
	// Renewal starts with a third of the life left: the test waits about
	// 13 s for it to fail, and the cached certificate has 7 s more.
	pebble := startPebble(t, 20*time.Second)
	dir := t.TempDir()
	domain := "cached.petstore.test"
	args := pebble.acmeArgs(filepath.Join(dir, "petstore.db"), domain)
	first := runServing(t, nil, args...)
	serial, err := servedCert(t, pebble.issuing, first.url, domain)
	if err != nil {
		t.Fatal(err)
	}
	first.stop(t)
	pebble.stop()

	admin := testkit.FreeAddr(t)
	p := runServing(t, nil, append(args, "--admin-addr", admin)...)
	logOnFailure(t, p)
	if got, err := servedCert(t, pebble.issuing, p.url, domain); err != nil || got != serial {
		t.Fatalf("with the CA away: serial %s (%v), want the cached %s", got, err, serial)
	}
	testkit.Eventually(t, 60*time.Second, "a failed renewal logged, to be retried", func() bool {
		s := p.stderr.String()
		return strings.Contains(s, "could not get a certificate") && strings.Contains(s, "renewal=true") && strings.Contains(s, "retried with backoff")
	})
	if got, err := servedCert(t, pebble.issuing, p.url, domain); err != nil || got != serial {
		t.Errorf("after the failed renewal: serial %s (%v), want the cached %s still served", got, err, serial)
	}
	var body string
	testkit.Eventually(t, 5*time.Second, "/metrics counts the failure and shows the expiry", func() bool {
		_, body = testkit.Fetch(t, &http.Client{Timeout: 5 * time.Second}, "GET", "http://"+admin+"/metrics", "", "")
		return strings.Contains(body, `petstore_tls_certificate_changes_total{outcome="failed",source="acme"}`) &&
			strings.Contains(body, `petstore_tls_certificate_expiry_timestamp_seconds{name="`+domain+`"}`)
	})
}

// With the CA away and no certificate, the server starts all the same,
// handshakes fail at once (no hang), and the log says why.
func TestACMEServerAwayWithoutACertificate(t *testing.T) {
	t.Parallel()
	pebble := startPebble(t, time.Hour)
	pebble.stop()
	domain := "none.petstore.test"
	p := runServing(t, nil, pebble.acmeArgs(filepath.Join(t.TempDir(), "petstore.db"), domain)...)
	start := time.Now()
	if _, err := servedCert(t, pebble.issuing, p.url, domain); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("a handshake without a certificate: %v after %v, want a failure at once", err, time.Since(start))
	}
	for _, want := range []string{"no certificate yet", "connection refused", "TLS handshake refused"} {
		testkit.Eventually(t, 5*time.Second, "the log says "+want, func() bool { return strings.Contains(p.stderr.String(), want) })
	}
}

// logOnFailure shows p's log when the test fails.
func logOnFailure(t *testing.T, p *inProcess) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("petstore's log:\n%s", p.stderr)
		}
	})
}

// Bad ACME flags are refused at start, each with one line naming the flag.
func TestBadACMEFlagsNameTheFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "root.txt")
	mustWrite(t, notPEM, []byte("no certificate here\n"))
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"a domain with a port", []string{"--acme-domain", "api.example.com:443"}, 2, `--acme-domain "api.example.com:443": give the bare name, without a port`},
		{"a domain with a scheme", []string{"--acme-domain", "https://api.example.com"}, 2, `--acme-domain "https://api.example.com": give the bare name, without a scheme`},
		{"a domain with a path", []string{"--acme-domain", "api.example.com/v1"}, 2, "without a path"},
		{"an IP address", []string{"--acme-domain", "192.0.2.1"}, 2, "an IP address, not a domain name"},
		{"a name with no dot", []string{"--acme-domain", "localhost"}, 2, `--acme-domain "localhost": not a fully qualified domain name`},
		{"a wildcard", []string{"--acme-domain", "*.example.com"}, 2, "a wildcard needs the DNS-01 challenge"},
		{"one bad name of two", []string{"--acme-domain", "api.example.com,bad_name.example.com"}, 2, `--acme-domain "bad_name.example.com": not a valid domain name`},
		{"no way to answer a challenge", []string{"--acme-domain", "api.example.com", "--http-addr", "off", "--addr", "127.0.0.1:8443"}, 2,
			"--acme-domain has no way to answer the CA's challenge"},
		{"both ways to a certificate", []string{"--acme-domain", "api.example.com", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, 2,
			"--acme-domain and --tls-cert both give the certificate"},
		{"a CA that is not https", []string{"--acme-domain", "api.example.com", "--acme-ca", "http://ca.example.com/dir"}, 2, "--acme-ca \"http://ca.example.com/dir\" must be the https:// URL"},
		{"a CA flag without a domain", []string{"--acme-email", "ops@example.com"}, 2, "--acme-email needs --acme-domain"},
		{"a plain port without HTTPS", []string{"--http-addr", "127.0.0.1:0"}, 2, "--http-addr redirects to HTTPS: it needs --tls-cert or --acme-domain"},
		{"a CA root that is no PEM", []string{"--acme-domain", "api.example.com", "--addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--acme-ca-root", notPEM}, 1,
			"--acme-ca-root " + notPEM + " holds no PEM certificate"},
		{"a missing CA root", []string{"--acme-domain", "api.example.com", "--addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--acme-ca-root", notPEM + ".gone"}, 1,
			"--acme-ca-root " + notPEM + ".gone: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"petstore", "serve", "--db", filepath.Join(t.TempDir(), "petstore.db")}, tc.args...)
			err := run(t.Context(), args, func(string) string { return "" }, strings.NewReader(""), io.Discard, io.Discard)
			var out strings.Builder
			code := exitCode(err, &out)
			if code != tc.code || strings.Count(out.String(), "\n") != 1 || !strings.Contains(out.String(), tc.want) {
				t.Errorf("exit %d with %q, want exit %d and one line saying %q", code, out.String(), tc.code, tc.want)
			}
		})
	}
}

// With Pebble's HTTP-01 port out of reach, the certificate comes through
// TLS-ALPN-01, answered by the HTTPS listener itself.
func TestACMETLSALPNChallenge(t *testing.T) {
	t.Parallel()
	pebble := startPebble(t, time.Hour)
	const domain = "alpn.petstore.test"
	p := runServing(t, nil, "serve", "--db", filepath.Join(t.TempDir(), "petstore.db"), "--acme-domain", domain,
		"--acme-ca", pebble.directory, "--acme-ca-root", pebble.rootFile,
		"--addr", "127.0.0.1:"+strconv.Itoa(pebble.tlsPort), "--http-addr", testkit.FreeAddr(t), "--log-level", "debug")
	logOnFailure(t, p)
	if _, err := servedCert(t, pebble.issuing, p.url, domain); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.stderr.String(), `level=DEBUG msg="served key authentication certificate" component=acme challenge=tls-alpn-01`) {
		t.Error("no TLS-ALPN-01 challenge answered")
	}
}
