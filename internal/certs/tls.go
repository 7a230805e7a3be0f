package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"petstore/internal/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// HTTPS from certificate files: anything wrong with the pair at start ends
// the server. A handshake takes whichever pair is current; open connections
// keep theirs.

// PollEvery is how often the certificate files are looked at, and
// MismatchGrace how long a pair that does not load is taken for a
// renewal tool still writing one file after the other, before an ERROR.
// Tests shorten them.
var (
	PollEvery     = 2 * time.Second
	MismatchGrace = 10 * time.Second
)

// certNearExpiry: a certificate with less than this share of its life left
// is near its end, and the log says so (at most once an hour).
const certNearExpiry = 6

// certPair is a loaded certificate and key, and its leaf.
type certPair struct {
	cert *tls.Certificate
	leaf *x509.Certificate
}

// loadCertPair reads the pair from certFile and keyFile and checks it:
// each error names the flag and the file at fault, and what is wrong.
func loadCertPair(certFlag, certFile, keyFlag, keyFile string, now time.Time) (certPair, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return certPair{}, fmt.Errorf("%s %s: %w", certFlag, certFile, unwrapPath(err))
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return certPair{}, fmt.Errorf("%s %s: %w", keyFlag, keyFile, unwrapPath(err))
	}
	if !bytes.Contains(certPEM, []byte("-----BEGIN CERTIFICATE-----")) {
		return certPair{}, fmt.Errorf("%s %s holds no PEM certificate", certFlag, certFile)
	}
	if !bytes.Contains(keyPEM, []byte("PRIVATE KEY-----")) {
		return certPair{}, fmt.Errorf("%s %s holds no PEM private key", keyFlag, keyFile)
	}
	leafBlock, _ := pem.Decode(certPEM[bytes.Index(certPEM, []byte("-----BEGIN CERTIFICATE-----")):])
	if leafBlock == nil {
		return certPair{}, fmt.Errorf("%s %s: the certificate's PEM block is broken", certFlag, certFile)
	}
	leaf, err := x509.ParseCertificate(leafBlock.Bytes)
	if err != nil {
		return certPair{}, fmt.Errorf("%s %s: the certificate does not parse: %v", certFlag, certFile, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		if strings.Contains(err.Error(), "does not match") {
			return certPair{}, fmt.Errorf("%s %s does not match the certificate in %s %s", keyFlag, keyFile, certFlag, certFile)
		}
		return certPair{}, fmt.Errorf("%s %s: %v", keyFlag, keyFile, strings.TrimPrefix(err.Error(), "tls: "))
	}
	if now.After(leaf.NotAfter) {
		return certPair{}, fmt.Errorf("%s %s expired on %s", certFlag, certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return certPair{cert: &cert, leaf: leaf}, nil
}

// AppendRoots adds the PEM certificates in file, which flag names, to pool.
func AppendRoots(pool *x509.CertPool, flag, file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("%s %s: %w", flag, file, unwrapPath(err))
	}
	if !pool.AppendCertsFromPEM(b) {
		return fmt.Errorf("%s %s holds no PEM certificate", flag, file)
	}
	return nil
}

// unwrapPath drops the path an *os.PathError repeats: the caller names it.
func unwrapPath(err error) error {
	var pathErr *os.PathError
	if errors.As(err, &pathErr) {
		return pathErr.Err
	}
	return err
}

// Files serves the pair from two files and follows their changes.
type Files struct {
	certFlag, certFile, keyFlag, keyFile string
	logger                               *slog.Logger
	metrics                              *metrics.Metrics
	now                                  func() time.Time

	mu      sync.Mutex
	current certPair
	stamp   string    // the files' sizes and times when current was read
	failing time.Time // since when the files changed into a pair that does not load
	failed  string    // the stamp of those files
	told    string    // the stamp of the files whose failure the ERROR told
	warned  time.Time // the last WARN of a near expiry
}

// OpenFiles reads the pair at start: an error ends the server.
func OpenFiles(certFlag, certFile, keyFlag, keyFile string, logger *slog.Logger, m *metrics.Metrics) (*Files, error) {
	c := &Files{certFlag: certFlag, certFile: certFile, keyFlag: keyFlag, keyFile: keyFile, logger: logger, metrics: m, now: time.Now}
	c.stamp = c.filesStamp()
	pair, err := loadCertPair(certFlag, certFile, keyFlag, keyFile, c.now())
	if err != nil {
		return nil, err
	}
	c.current = pair
	m.CertificateExpires(pair.leaf)
	return c, nil
}

// TLSConfig is the TLS of a listener serving the current pair.
func (c *Files) TLSConfig() *tls.Config {
	return serverTLS(func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.current.cert, nil
	})
}

// filesStamp changes whenever either file is written, renamed over or removed.
func (c *Files) filesStamp() string {
	var b strings.Builder
	for _, name := range []string{c.certFile, c.keyFile} {
		if fi, err := os.Stat(name); err == nil {
			b.WriteString(strconv.FormatInt(fi.Size(), 10) + "@" + strconv.FormatInt(fi.ModTime().UnixNano(), 10) + ";")
		} else {
			b.WriteString("missing;")
		}
	}
	return b.String()
}

// Follow looks at the files every PollEvery, and at once on each SIGHUP
// that hup brings, until ctx ends.
func (c *Files) Follow(ctx context.Context, hup <-chan os.Signal) {
	t := time.NewTicker(PollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.check(false)
		case <-hup:
			c.logger.Info("SIGHUP: reading the certificate files again", "cert", c.certFile, "key", c.keyFile)
			c.check(true)
		}
	}
}

// check reloads the pair when the files changed (or when forced); a pair
// that does not load keeps the current one serving, and after
// MismatchGrace (at once when forced) an ERROR says which file is at
// fault, once for the same files, however often SIGHUP asks again.
// Unchanged files are looked at for a near expiry, a WARN at most once an
// hour.
func (c *Files) check(force bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	stamp := c.filesStamp()
	if stamp == c.stamp && !force && c.failing.IsZero() {
		if nearExpiry(c.current.leaf, now) && now.Sub(c.warned) >= time.Hour {
			c.warned = now
			c.logger.Warn("the certificate expires soon: put a renewed pair in its files", "cert", c.certFile,
				"expires", c.current.leaf.NotAfter.UTC().Format(time.RFC3339))
		}
		return
	}
	pair, err := loadCertPair(c.certFlag, c.certFile, c.keyFlag, c.keyFile, now)
	if err != nil {
		if c.failing.IsZero() || stamp != c.failed {
			c.failing, c.failed = now, stamp
		}
		if c.told != stamp && (force || now.Sub(c.failing) >= MismatchGrace) {
			c.told = stamp
			c.logger.Error("the certificate files do not load; the previous certificate keeps serving", "err", err)
			c.metrics.CountCertificateChange("files", "failed")
		}
		return
	}
	c.current, c.stamp, c.failing, c.failed, c.told = pair, stamp, time.Time{}, "", ""
	c.logger.Info("certificate reloaded", "cert", c.certFile, "names", leafNames(pair.leaf),
		"expires", pair.leaf.NotAfter.UTC().Format(time.RFC3339))
	c.metrics.CountCertificateChange("files", "reloaded")
	c.metrics.CertificateExpires(pair.leaf)
}

// leafNames is the names a certificate is valid for, its DNS names and
// its IP addresses, comma-separated.
func leafNames(leaf *x509.Certificate) string {
	names := slices.Clone(leaf.DNSNames)
	for _, ip := range leaf.IPAddresses {
		names = append(names, ip.String())
	}
	return strings.Join(names, ",")
}

// nearExpiry is whether leaf has less than a certNearExpiry-th of its life left.
func nearExpiry(leaf *x509.Certificate, now time.Time) bool {
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	return leaf.NotAfter.Sub(now) < life/certNearExpiry
}

// serverTLS is the TLS of a listener: TLS 1.2 and 1.3, Go's default
// curves, the certificate from get. ServeTLS adds h2 and http/1.1 to
// NextProtos. TLS 1.3's suites are all AEAD and not configurable; TLS
// 1.2's are set here, for every listener, to those that are forward
// secret (ECDHE) and authenticated encryption (GCM, ChaCha20-Poly1305),
// for ECDSA and RSA certificates: Go's defaults still offer CBC with
// SHA-1 (docs/production.md, "HTTPS on a small VM"). Go orders them by
// what the machine does fastest.
func serverTLS(get func(*tls.ClientHelloInfo) (*tls.Certificate, error), nextProtos ...string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
		GetCertificate: get,
		NextProtos:     nextProtos,
	}
}
