package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"petstore/internal/testkit"
)

// TestWebhookTLSFailureNamesItsReason: an attempt the TLS handshake ends
// says why in lastError, in our words about the handshake (an unknown
// authority, an expired certificate, one for another name, an alert),
// never a name or a byte of the receiver's certificate. Each receiver is
// a real TLS server on loopback; the sender trusts one test root, and a
// certificate that root signs for 127.0.0.1 is delivered.
func TestWebhookTLSFailureNamesItsReason(t *testing.T) {
	t.Parallel()
	root, stranger := testkit.NewCA(t, "petstore trusted test root"), testkit.NewCA(t, "stranger root")
	now := time.Now()
	valid := leafTerms{notBefore: now.Add(-time.Hour), notAfter: now.Add(time.Hour), ip: true}
	expired := leafTerms{notBefore: now.Add(-48 * time.Hour), notAfter: now.Add(-24 * time.Hour), ip: true}
	early := leafTerms{notBefore: now.Add(24 * time.Hour), notAfter: now.Add(48 * time.Hour), ip: true}
	otherName := leafTerms{notBefore: valid.notBefore, notAfter: valid.notAfter, names: []string{"hooks.wrong-name.example"}}
	clientOnly := valid
	clientOnly.usage = x509.ExtKeyUsageClientAuth
	for _, tt := range []struct {
		name       string
		cert       tls.Certificate
		clientAuth tls.ClientAuthType
		says       string // "": delivered
	}{
		{"a certificate of the trusted root", leaf(t, valid, root), 0, ""},
		{"a self-signed certificate", leaf(t, valid, nil), 0, "the receiver's TLS certificate is signed by an unknown authority"},
		{"a certificate of another root", leaf(t, valid, stranger), 0, "the receiver's TLS certificate is signed by an unknown authority"},
		{"an expired certificate", leaf(t, expired, root), 0, "the receiver's TLS certificate has expired"},
		{"a certificate not valid yet", leaf(t, early, root), 0, "the receiver's TLS certificate is not valid yet"},
		{"a certificate for another name", leaf(t, otherName, root), 0, "the receiver's TLS certificate is for another name"},
		{"a certificate for clients only", leaf(t, clientOnly, root), 0, "the receiver's TLS certificate is not for a TLS server"},
		{"a receiver that asks for a client certificate", leaf(t, valid, root), tls.RequireAnyClientCert,
			"the receiver ended the TLS handshake (alert: certificate required)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{tt.cert}, ClientAuth: tt.clientAuth}
			srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes that fail, on purpose
			srv.StartTLS()
			defer srv.Close()
			sender := fastSender()
			sender.client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: root.Pool}
			r := sender.Send(context.Background(), Attempt{URL: srv.URL + "/hooks?token=hidden", ID: "m", Body: []byte(`{}`)})
			if tt.says == "" {
				if !r.Delivered() || r.Status != http.StatusOK {
					t.Fatalf("attempt = %+v, want delivered: the receivers that fail must fail for their reason alone", r)
				}
				return
			}
			if r.Delivered() || r.Status != 0 || !strings.HasPrefix(r.Err, tt.says) {
				t.Fatalf("attempt = %+v, want no answer and an error that says %q", r, tt.says)
			}
			for _, echoed := range []string{"wrong-name", "stranger", "petstore trusted", "127.0.0.1", "hidden", "x509"} {
				if strings.Contains(r.Err, echoed) {
					t.Fatalf("the error %q holds %q", r.Err, echoed)
				}
			}
		})
	}
}

// leafTerms are a test certificate's validity, names (127.0.0.1 too when
// ip) and extended key usage (server authentication when 0).
type leafTerms struct {
	notBefore, notAfter time.Time
	names               []string
	ip                  bool
	usage               x509.ExtKeyUsage
}

// leaf is a certificate on terms that root signs (itself when root is
// nil).
func leaf(t *testing.T, terms leafTerms, root *testkit.CA) tls.Certificate {
	usage := terms.usage
	if usage == 0 {
		usage = x509.ExtKeyUsageServerAuth
	}
	tmpl := &x509.Certificate{
		Subject: pkix.Name{CommonName: "receiver"}, DNSNames: terms.names, NotBefore: terms.notBefore, NotAfter: terms.notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	if terms.ip {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, key := testkit.Issue(t, tmpl, root)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
