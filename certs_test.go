package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"petstore/internal/testkit"
)

// Test certificates, made with crypto/x509: a root that clients trust and
// leaves it signs, written as PEM files where a server reads them.

type testCA struct {
	root *testkit.CA
	cert *x509.Certificate
	pool *x509.CertPool
	pem  []byte
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	root := testkit.NewCA(t, "petstore test root")
	return &testCA{root: root, cert: root.Cert, pool: root.Pool, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Cert.Raw})}
}

// leaf is a certificate for names (and 127.0.0.1) valid from notBefore to
// notAfter, in PEM, with its key in PEM.
func (ca *testCA) leaf(t testing.TB, notBefore, notAfter time.Time, names ...string) (certPEM, keyPEM []byte, serial *big.Int) {
	t.Helper()
	return ca.root.Leaf(t, notBefore, notAfter, names...)
}

// writePair writes a valid leaf for localhost into dir as cert.pem and
// key.pem, and returns their paths and its serial number.
func (ca *testCA) writePair(t testing.TB, dir string) (certFile, keyFile string, serial *big.Int) {
	t.Helper()
	certPEM, keyPEM, serial := ca.leaf(t, time.Now().Add(-time.Minute), time.Now().Add(12*time.Hour), "localhost")
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	mustWrite(t, certFile, certPEM)
	mustWrite(t, keyFile, keyPEM)
	return certFile, keyFile, serial
}

// client trusts only ca's root, keeps connections alive and speaks HTTP/2
// when the server offers it.
func (ca *testCA) client() *http.Client {
	return trustingClient(ca.pool, "")
}

// trustingClient trusts only roots, and asks for serverName (SNI) when set.
func trustingClient(roots *x509.CertPool, serverName string) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName}, ForceAttemptHTTP2: true}
	return &http.Client{Timeout: 10 * time.Second, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func mustWrite(t testing.TB, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// servedSerial is the serial number of the certificate a new connection to
// url is handed.
func servedSerial(t testing.TB, ca *testCA, url string) *big.Int {
	t.Helper()
	client := ca.client()
	defer client.CloseIdleConnections()
	resp, err := client.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.TLS.PeerCertificates[0].SerialNumber
}
