package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// CA is a certificate authority made for a test, made with crypto/x509:
// a root valid from an hour ago for a day, and the pool that trusts it.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	Pool *x509.CertPool
}

func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key := NewKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber: RandomSerial(tb), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Key: key, Pool: pool}
}

// Issue is the DER of a certificate on tmpl (its serial number set when
// nil) for a new key, which it returns too: signed by ca, or by its own
// key when ca is nil.
func Issue(tb testing.TB, tmpl *x509.Certificate, ca *CA) ([]byte, *ecdsa.PrivateKey) {
	tb.Helper()
	key := NewKey(tb)
	if tmpl.SerialNumber == nil {
		tmpl.SerialNumber = RandomSerial(tb)
	}
	parent, parentKey := tmpl, key
	if ca != nil {
		parent, parentKey = ca.Cert, ca.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		tb.Fatal(err)
	}
	return der, key
}

// Leaf is a server certificate signed by ca for names (the first its
// common name) and 127.0.0.1, valid from notBefore to notAfter, in PEM,
// with its key in PEM and its serial number: a pair as a server reads it
// from its files.
func (ca *CA) Leaf(tb testing.TB, notBefore, notAfter time.Time, names ...string) (certPEM, keyPEM []byte, serial *big.Int) {
	tb.Helper()
	tmpl := &x509.Certificate{
		Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, key := Issue(tb, tmpl, ca)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), tmpl.SerialNumber
}

func NewKey(tb testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

func RandomSerial(tb testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
