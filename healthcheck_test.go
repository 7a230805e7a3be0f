package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"petstore/internal/httpapi"
	"petstore/internal/servertest"
	"petstore/internal/testkit"
)

// silentServer accepts connections and never answers.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

func TestHealthcheck(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{})
	ready := httptest.NewServer(s.Handler())
	t.Cleanup(ready.Close)
	readyAddr := strings.TrimPrefix(ready.URL, "http://")

	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		httpapi.WriteError(w, httpapi.Errorf(httpapi.CodeUnavailable, "the database does not answer"))
	}))
	t.Cleanup(notReady.Close)
	redirects := httptest.NewServer(http.RedirectHandler("http://192.0.2.1/readyz", http.StatusTemporaryRedirect))
	t.Cleanup(redirects.Close)

	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		wantCode  int
		wantError string // in the one line on standard error
	}{
		{"ready, full URL", nil, []string{"--url", ready.URL + "/readyz"}, 0, ""},
		{"ready, base URL", nil, []string{"--url", ready.URL}, 0, ""},
		{"ready, base URL with a slash", nil, []string{"--url", ready.URL + "/"}, 0, ""},
		{"ready, HOST:PORT", nil, []string{"--url", readyAddr}, 0, ""},
		{"ready, the server's PETSTORE_ADDR", map[string]string{"PETSTORE_ADDR": readyAddr}, nil, 0, ""},
		{"ready, PETSTORE_URL", map[string]string{"PETSTORE_URL": ready.URL}, nil, 0, ""},
		{"ready, another path given", nil, []string{"--url", ready.URL + "/healthz"}, 0, ""},
		{"not ready", nil, []string{"--url", notReady.URL}, 1, "answered 503 Service Unavailable: the database does not answer"},
		{"no such path", nil, []string{"--url", notReady.URL + "/ready"}, 1, "answered 404 Not Found"},
		{"a redirect is not followed", nil, []string{"--url", redirects.URL}, 1, "answered 307 Temporary Redirect"},
		{"nothing listening", nil, []string{"--url", testkit.FreeAddr(t)}, 1, "connection refused"},
		{"nothing listening on --addr", nil, []string{"--addr", testkit.FreeAddr(t)}, 1, "connection refused"},
		{"no answer", nil, []string{"--url", silentServer(t)}, 1, "no answer within 2s"},
		{"unknown host", nil, []string{"--url", "http://petstore.invalid:8080"}, 1, "cannot resolve petstore.invalid"},
		{"not an HTTP URL", nil, []string{"--url", "ftp://localhost/readyz"}, 2, "must be an http:// or https:// URL"},
		{"an argument", nil, []string{"localhost:8080"}, 2, "use --url"},
		{"a bad --addr", nil, []string{"--addr", "8080"}, 2, "not HOST:PORT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			res := viaRun(t, tt.env, append([]string{"healthcheck"}, tt.args...)...)
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("took %v, want at most the 2 s timeout and a little", took)
			}
			if tt.wantCode == 0 {
				if res.Code != 0 || res.Stderr != "" || res.Stdout != "" {
					t.Errorf("exit status %d, stdout %q, stderr %q; want 0 and nothing printed", res.Code, res.Stdout, res.Stderr)
				}
				return
			}
			wantFailure(t, res, tt.wantCode)
			if !strings.Contains(res.Stderr, tt.wantError) {
				t.Errorf("stderr %q, want it to say %q", res.Stderr, tt.wantError)
			}
		})
	}
}

func TestHealthcheckURL(t *testing.T) {
	tests := []struct {
		url, addr, want string
	}{
		{"", "localhost:8080", "http://localhost:8080/readyz"},
		{"", ":8080", "http://127.0.0.1:8080/readyz"},
		{"", "0.0.0.0:9000", "http://127.0.0.1:9000/readyz"},
		{"", "[::]:9000", "http://127.0.0.1:9000/readyz"},
		{"", "10.0.0.5:8080", "http://10.0.0.5:8080/readyz"},
		{"", "[::1]:8080", "http://[::1]:8080/readyz"},
		{"localhost:8080", "", "http://localhost:8080/readyz"},
		{"https://pets.example.com", "", "https://pets.example.com/readyz"},
		{"http://localhost:8080/readyz", "", "http://localhost:8080/readyz"},
		{"http://localhost:8080/healthz", "", "http://localhost:8080/healthz"},
	}
	for _, tt := range tests {
		got, err := healthcheckURL(tt.url, tt.addr, false)
		if err != nil || got != tt.want {
			t.Errorf("healthcheckURL(%q, %q) = %q, %v; want %q", tt.url, tt.addr, got, err, tt.want)
		}
	}
}

func TestHealthcheckOfTheBinaryAgainstARunningServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	t.Parallel()
	dir := t.TempDir()
	s := startPetstore(t, dir, "--db", dir+"/petstore.db")
	res := viaBinary(t, map[string]string{"PETSTORE_URL": s.URL}, "healthcheck")
	if res.Code != 0 {
		t.Errorf("petstore healthcheck against a running server: exit %d, stderr %q", res.Code, res.Stderr)
	}
	s.Stop(syscall.SIGTERM)
	res = viaBinary(t, nil, "healthcheck", "--url", s.URL)
	wantFailure(t, res, 1)
	if !strings.Contains(res.Stderr, "connection refused") {
		t.Errorf("healthcheck of a stopped server: %q, want connection refused", res.Stderr)
	}
}

// A server on every interface with a certificate for localhost alone (no
// IP address in it): the check asks 127.0.0.1, needing no /etc/hosts, and
// still verifies the name localhost.
func TestHealthcheckOnEveryInterfaceVerifiesLocalhost(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// Self-signed: --tls-cert trusts the server's certificate itself.
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	defer srv.Close()
	certFile := filepath.Join(t.TempDir(), "cert.pem")
	mustWrite(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	env := map[string]string{"PETSTORE_ADDR": ":" + port, "PETSTORE_TLS_CERT": certFile}
	if res := viaRun(t, env, "healthcheck"); res.Code != 0 {
		t.Errorf("healthcheck of :%s over https: exit %d: %s", port, res.Code, res.Stderr)
	}
}
