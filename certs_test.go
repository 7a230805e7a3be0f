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
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Test certificates, made with crypto/x509: a root that clients trust and
// leaves it signs, written as PEM files where a server reads them.

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	pem  []byte
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key := mustKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(t), Subject: pkix.Name{CommonName: "petstore test root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// leaf is a certificate for names (and 127.0.0.1) valid from notBefore to
// notAfter, in PEM, with its key in PEM.
func (ca *testCA) leaf(t testing.TB, notBefore, notAfter time.Time, names ...string) (certPEM, keyPEM []byte, serial *big.Int) {
	t.Helper()
	key := mustKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(t), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), tmpl.SerialNumber
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

func mustKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func randomSerial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		t.Fatal(err)
	}
	return n
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
