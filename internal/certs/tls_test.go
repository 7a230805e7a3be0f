package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"petstore/internal/testkit"
)

// The certificate files, as a server with --tls-cert and --tls-key reads
// them: at start, where anything wrong ends the server, then each time
// the files change or SIGHUP asks, where the current pair keeps serving
// until a new one loads. Files.check is what Follow runs on each poll
// (force: on SIGHUP).

// pairFiles is a certificate and a key file in a test's directory, and the
// CA that signs the certificates written into them.
type pairFiles struct {
	t         *testing.T
	ca        *testkit.CA
	cert, key string
	written   time.Time
}

func newPairFiles(t *testing.T) *pairFiles {
	dir := t.TempDir()
	return &pairFiles{t: t, ca: testkit.NewCA(t, "certs test root"), cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem"),
		written: time.Now().Add(-time.Hour)}
}

// leaf is a new pair for localhost, valid for twelve hours.
func (p *pairFiles) leaf() (certPEM, keyPEM []byte, serial *big.Int) {
	return p.ca.Leaf(p.t, time.Now().Add(-time.Minute), time.Now().Add(12*time.Hour), "localhost")
}

// write writes data into name, a second later by the files' times than the
// last write, so that the change is seen whatever the clock's resolution.
func (p *pairFiles) write(name string, data []byte) {
	p.t.Helper()
	p.written = p.written.Add(time.Second)
	if err := os.WriteFile(name, data, 0o600); err != nil {
		p.t.Fatal(err)
	}
	if err := os.Chtimes(name, p.written, p.written); err != nil {
		p.t.Fatal(err)
	}
}

// open writes a good pair and opens it as serve does, with the log in a
// buffer and the clock at the returned time, which the test moves.
func (p *pairFiles) open() (*Files, *big.Int, *bytes.Buffer, *time.Time) {
	p.t.Helper()
	certPEM, keyPEM, serial := p.leaf()
	p.write(p.cert, certPEM)
	p.write(p.key, keyPEM)
	var log bytes.Buffer
	c, err := OpenFiles("--tls-cert", p.cert, "--tls-key", p.key, slog.New(slog.NewTextHandler(&log, nil)), nil)
	if err != nil {
		p.t.Fatal(err)
	}
	now := time.Now()
	c.now = func() time.Time { return now }
	return c, serial, &log, &now
}

// servedSerial is the serial number of the certificate a handshake is
// handed now.
func servedSerial(t *testing.T, c *Files) *big.Int {
	t.Helper()
	cert, err := c.TLSConfig().GetCertificate(&tls.ClientHelloInfo{ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber
}

func wantServed(t *testing.T, c *Files, serial *big.Int, when string) {
	t.Helper()
	if got := servedSerial(t, c); got.Cmp(serial) != 0 {
		t.Fatalf("%s: serial %v served, want %v", when, got, serial)
	}
}

func TestOpenFilesServesAGoodPair(t *testing.T) {
	p := newPairFiles(t)
	c, serial, _, _ := p.open()
	wantServed(t, c, serial, "after the start")
	if v := c.TLSConfig().MinVersion; v != tls.VersionTLS12 {
		t.Errorf("MinVersion %x, want TLS 1.2", v)
	}
}

// Each bad pair at start is one error naming the flag, the file and what
// is wrong.
func TestOpenFilesRefusesABadPairNamingTheFile(t *testing.T) {
	p := newPairFiles(t)
	certPEM, keyPEM, _ := p.leaf()
	_, otherKeyPEM, _ := p.leaf()
	expiredPEM, expiredKeyPEM, _ := p.ca.Leaf(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour), "localhost")
	dir := filepath.Dir(p.cert)
	file := func(name string, data []byte) string {
		p.write(filepath.Join(dir, name), data)
		return filepath.Join(dir, name)
	}
	cert, key, otherKey := file("cert.pem", certPEM), file("key.pem", keyPEM), file("other-key.pem", otherKeyPEM)
	expired, expiredKey := file("expired.pem", expiredPEM), file("expired-key.pem", expiredKeyPEM)
	garbage, missing := file("garbage.pem", []byte("not a certificate\n")), filepath.Join(dir, "missing.pem")
	tests := []struct{ name, cert, key, want string }{
		{"a missing certificate file", missing, key, "--tls-cert " + missing + ": no such file or directory"},
		{"a missing key file", cert, missing, "--tls-key " + missing + ": no such file or directory"},
		{"a key that does not match its certificate", cert, otherKey, "--tls-key " + otherKey + " does not match the certificate in --tls-cert " + cert},
		{"a file that holds no certificate", garbage, key, "--tls-cert " + garbage + " holds no PEM certificate"},
		{"a key file that holds no key", cert, garbage, "--tls-key " + garbage + " holds no PEM private key"},
		{"an expired certificate", expired, expiredKey, "--tls-cert " + expired + " expired on "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := OpenFiles("--tls-cert", tt.cert, "--tls-key", tt.key, slog.New(slog.DiscardHandler), nil)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("got %v, %v; want an error starting %q", c, err, tt.want)
			}
		})
	}
}

// A new pair in the files is served from the next look; unchanged files
// are not read again, but SIGHUP reads them whatever their times say (a
// restored backup).
func TestFilesServeANewPairOnceWritten(t *testing.T) {
	p := newPairFiles(t)
	c, _, log, _ := p.open()
	certPEM, keyPEM, serial := p.leaf()
	p.write(p.cert, certPEM)
	p.write(p.key, keyPEM)
	c.check(false)
	wantServed(t, c, serial, "after the new pair was written")
	if got := strings.Count(log.String(), "msg=\"certificate reloaded\""); got != 1 || !strings.Contains(log.String(), "names=localhost,127.0.0.1") {
		t.Errorf("%d INFO lines of a reload naming the names, want 1:\n%s", got, log)
	}
	c.check(false)
	if got := strings.Count(log.String(), "certificate reloaded"); got != 1 {
		t.Errorf("unchanged files were read again (%d reloads)", got)
	}
	c.check(true)
	if got := strings.Count(log.String(), "certificate reloaded"); got != 2 {
		t.Errorf("SIGHUP on unchanged files: %d reloads, want 2", got)
	}
}

// A pair written one file after the other does not load for a moment:
// the old certificate serves, and only a pair still mismatched after
// MismatchGrace is an ERROR, once, naming the key file. The matching key
// ends it.
func TestFilesKeepTheOldCertificateThroughAMismatchedPair(t *testing.T) {
	p := newPairFiles(t)
	c, before, log, now := p.open()
	certPEM, keyPEM, serial := p.leaf()
	p.write(p.cert, certPEM)
	c.check(false)
	wantServed(t, c, before, "with the new certificate beside the old key")
	if strings.Contains(log.String(), "level=ERROR") {
		t.Fatalf("an ERROR within the grace:\n%s", log)
	}
	*now = now.Add(MismatchGrace)
	c.check(false)
	*now = now.Add(time.Hour)
	c.check(false)
	wantServed(t, c, before, "past the grace")
	want := "--tls-key " + p.key + " does not match the certificate in --tls-cert " + p.cert
	if got := strings.Count(log.String(), "level=ERROR"); got != 1 || !strings.Contains(log.String(), want) {
		t.Errorf("%d ERROR lines, want one saying %q:\n%s", got, want, log)
	}
	p.write(p.key, keyPEM)
	c.check(false)
	wantServed(t, c, serial, "once the key matches")
}

// A file gone is an ERROR naming it at once on SIGHUP, once however often
// SIGHUP asks again, and the current certificate keeps serving.
func TestFilesKeepTheOldCertificateWhenAFileIsGone(t *testing.T) {
	p := newPairFiles(t)
	c, before, log, _ := p.open()
	if err := os.Remove(p.key); err != nil {
		t.Fatal(err)
	}
	c.check(true)
	c.check(true)
	wantServed(t, c, before, "with the key file gone")
	want := "--tls-key " + p.key + ": no such file or directory"
	if got := strings.Count(log.String(), "level=ERROR"); got != 1 || !strings.Contains(log.String(), want) {
		t.Errorf("%d ERROR lines, want one saying %q:\n%s", got, want, log)
	}
}

// In the last sixth of its life the certificate is a WARN, at most once
// an hour.
func TestFilesWarnOfANearExpiryOnceAnHour(t *testing.T) {
	p := newPairFiles(t)
	c, _, log, now := p.open()
	warnings := func() int { return strings.Count(log.String(), "the certificate expires soon") }
	c.check(false)
	if got := warnings(); got != 0 {
		t.Fatalf("%d WARN lines for a new certificate, want none:\n%s", got, log)
	}
	*now = c.current.leaf.NotAfter.Add(-2 * time.Hour)
	c.check(false)
	*now = now.Add(10 * time.Minute)
	c.check(false)
	if got := warnings(); got != 1 {
		t.Fatalf("%d WARN lines two hours before the end and ten minutes later, want 1:\n%s", got, log)
	}
	*now = now.Add(time.Hour)
	c.check(false)
	if got := warnings(); got != 2 {
		t.Errorf("%d WARN lines an hour later, want 2:\n%s", got, log)
	}
}
