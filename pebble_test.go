package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"petstore/internal/testkit"
)

// pebbleCA is a running Pebble, Let's Encrypt's test CA, with its DNS
// stand-in (testkit.PebbleBinaries): every name resolves to 127.0.0.1,
// and Pebble validates real HTTP-01 and TLS-ALPN-01 challenges on the
// ports its config names (never "always valid").
type pebbleCA struct {
	directory  string         // the ACME directory URL, for --acme-ca
	rootFile   string         // the root of Pebble's own HTTPS endpoint, for --acme-ca-root
	issuing    *x509.CertPool // the root Pebble issues under: what clients trust
	issuingPEM string         // a file of it
	httpPort   int            // where Pebble asks HTTP-01 challenges (--http-addr)
	tlsPort    int            // where it asks TLS-ALPN-01 challenges (--addr)
	proc       *testkit.Process
}

// startPebble starts Pebble and its DNS stand-in, issuing certificates
// valid for validity, and returns once its directory answers.
func startPebble(t *testing.T, validity time.Duration) *pebbleCA {
	t.Helper()
	bin := testkit.PebbleBinaries(t)
	dir := t.TempDir()
	dns := testkit.FreeAddr(t)
	testkit.StartProcess(t, "pebble-challtestsrv", filepath.Join(bin, "pebble-challtestsrv"), "-dnsserver", dns, "-management", testkit.FreeAddr(t),
		"-http01", "", "-https01", "", "-doh", "", "-tlsalpn01", "", "-defaultIPv6", "")

	ca := newTestCA(t)
	certPEM, keyPEM, _ := ca.leaf(t, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), "localhost")
	p := &pebbleCA{rootFile: filepath.Join(dir, "pebble-root.pem")}
	mustWrite(t, p.rootFile, ca.pem)
	mustWrite(t, filepath.Join(dir, "cert.pem"), certPEM)
	mustWrite(t, filepath.Join(dir, "key.pem"), keyPEM)
	listen, mgmt := testkit.FreeAddr(t), testkit.FreeAddr(t)
	_, p.httpPort = splitPort(testkit.FreeAddr(t))
	_, p.tlsPort = splitPort(testkit.FreeAddr(t))
	config, _ := json.Marshal(map[string]any{"pebble": map[string]any{
		"listenAddress": listen, "managementListenAddress": mgmt,
		"certificate": filepath.Join(dir, "cert.pem"), "privateKey": filepath.Join(dir, "key.pem"),
		"httpPort": p.httpPort, "tlsPort": p.tlsPort, "keyAlgorithm": "ecdsa",
		"retryAfter": map[string]int{"authz": 1, "order": 1},
		"profiles":   map[string]any{"default": map[string]any{"description": "the tests'", "validityPeriod": int(validity.Seconds())}},
	}})
	mustWrite(t, filepath.Join(dir, "pebble.json"), config)
	env := []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0"}
	p.proc = testkit.StartProcessEnv(t, "pebble", filepath.Join(bin, "pebble"), env, "-config", filepath.Join(dir, "pebble.json"), "-dnsserver", dns)
	p.directory = "https://" + listen + "/dir"

	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}}
	defer client.CloseIdleConnections()
	// Pebble starts its management listener on a goroutine of its own, so
	// its directory may answer before its roots do: wait for both.
	var root []byte
	testkit.Eventually(t, 20*time.Second, "Pebble's directory and its issuing root answer", func() bool {
		if !answers(client, p.directory) {
			return false
		}
		resp, err := client.Get("https://" + mgmt + "/roots/0")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		root, err = io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == 200
	})
	p.issuingPEM = filepath.Join(dir, "issuing-root.pem")
	mustWrite(t, p.issuingPEM, root)
	p.issuing = x509.NewCertPool()
	if !p.issuing.AppendCertsFromPEM(root) {
		t.Fatalf("Pebble's issuing root is no PEM certificate: %q", root)
	}
	return p
}

// answers reports whether url answers 200.
func answers(client *http.Client, url string) bool {
	resp, err := client.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// stop ends Pebble: the CA is away.
func (p *pebbleCA) stop() {
	p.proc.Kill()
}

// issued is how many certificates Pebble has issued.
func (p *pebbleCA) issued() int {
	return strings.Count(p.proc.Out.String(), "Issued certificate serial")
}

// acmeArgs are serve's flags for a server that gets its certificate for
// domain from p, its API on Pebble's TLS-ALPN-01 port and its plain
// listener on its HTTP-01 port.
func (p *pebbleCA) acmeArgs(db, domain string) []string {
	return []string{"serve", "--db", db, "--acme-domain", domain, "--acme-ca", p.directory, "--acme-ca-root", p.rootFile,
		"--addr", "127.0.0.1:" + strconv.Itoa(p.tlsPort), "--http-addr", "127.0.0.1:" + strconv.Itoa(p.httpPort)}
}
