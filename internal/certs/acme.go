package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"petstore/internal/metrics"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Automatic certificates from an ACME CA with certmagic
// (docs/production.md, "HTTPS on a small VM"): the account and the
// certificates are kept in --acme-cache, or in the database on PostgreSQL,
// so that a fleet orders once; renewal starts in the last third of a
// certificate's life (or when the CA's renewal information says), and a
// failed one is retried with backoff while the current certificate serves.

// How long serve waits for the first certificates before it says it
// serves, and how often it says what it is waiting for; how often the
// served certificates' expiry is looked at. Tests shorten the exported ones.
var (
	ACMEFirstWait   = 2 * time.Minute
	acmeWaitReport  = 10 * time.Second
	ACMEWatchEvery  = time.Minute
	ACMERenewCheck  = certmagic.DefaultRenewCheckInterval
	acmeRefuseEvery = time.Minute // the most often a refused handshake is a WARN
)

// ParseDomains is --acme-domain's list of names, lower-cased, each a bare
// DNS name a CA could validate.
func ParseDomains(list string) ([]string, error) {
	var names []string
	for name := range strings.SplitSeq(list, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		if err := checkDomain(name); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

// checkDomain refuses what is not a bare DNS name a CA could validate
// over HTTP-01 or TLS-ALPN-01.
func checkDomain(name string) error {
	bad := func(why string) error { return fmt.Errorf("--acme-domain %q: %s", name, why) }
	switch {
	case name == "":
		return bad("an empty name: give NAME[,NAME...]")
	case strings.Contains(name, "://"):
		return bad("give the bare name, without a scheme such as https://")
	case strings.ContainsAny(name, "/?#"):
		return bad("give the bare name, without a path")
	case strings.Contains(name, ":"):
		return bad("give the bare name, without a port: the CA connects to ports 80 and 443")
	case strings.Contains(name, "*"):
		return bad("a wildcard needs the DNS-01 challenge, which this server does not answer")
	case net.ParseIP(name) != nil:
		return bad("an IP address, not a domain name")
	case len(name) > 253 || !strings.Contains(name, "."):
		return bad("not a fully qualified domain name such as api.example.com")
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return bad("not a valid domain name")
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return bad("not a valid domain name (letters, digits, hyphens and dots)")
			}
		}
	}
	return nil
}

// ACMEConfig is what the manager is told: the names, the account's e-mail,
// the CA's directory URL and the root that CA's HTTPS is trusted by ("":
// the system's), and the cache directory ("": the database keeps them).
type ACMEConfig struct {
	Domains           []string
	Email, CA, CARoot string
	Cache             string
}

// ACME keeps the certificates of --acme-domain.
type ACME struct {
	cfg     ACMEConfig
	roots   *x509.CertPool
	files   certmagic.Storage // --acme-cache; nil when the database keeps them
	logger  *slog.Logger
	metrics *metrics.Metrics
	magic   *certmagic.Config
	issuer  *certmagic.ACMEIssuer
	cache   *certmagic.Cache

	mu      sync.Mutex
	lastErr map[string]string    // the last failure to get each name's certificate
	refused time.Time            // the last WARN of a handshake refused for want of one
	warned  map[string]time.Time // the last WARN of each name's near expiry
}

// NewACME checks what certmagic will need: the CA's root, the cache
// directory; Start sets it up.
func NewACME(cfg ACMEConfig, logger *slog.Logger, m *metrics.Metrics) (*ACME, error) {
	am := &ACME{cfg: cfg, logger: logger, metrics: m, lastErr: map[string]string{}, warned: map[string]time.Time{}}
	if cfg.CARoot != "" {
		am.roots = x509.NewCertPool()
		if err := AppendRoots(am.roots, "--acme-ca-root", cfg.CARoot); err != nil {
			return nil, err
		}
	}
	if cfg.Cache != "" {
		// Created 0700 (certmagic writes its files 0600) in a directory
		// that must exist.
		err := os.Mkdir(cfg.Cache, 0o700)
		if err == nil || errors.Is(err, os.ErrExist) {
			err = os.Chmod(cfg.Cache, 0o700)
		}
		if err != nil {
			return nil, fmt.Errorf("--acme-cache %s: %w", cfg.Cache, unwrapPath(err))
		}
		am.files = &certmagic.FileStorage{Path: cfg.Cache}
	}
	return am, nil
}

// Start sets certmagic up on its storage (the cache directory, or kept,
// the database's when it keeps certificates), answering the challenges on
// this server's own listeners: TLS-ALPN-01 at host:tlsPort, HTTP-01 at
// httpPort (0 when off). It manages the names until ctx ends: it loads
// the certificates stored, orders the others in the background, renews.
func (am *ACME) Start(ctx context.Context, kept certmagic.Storage, host string, tlsPort, httpPort int) error {
	storage := am.files
	if storage == nil {
		storage = kept
	}
	if storage == nil {
		return errors.New("--acme-domain: this database cannot keep certificates: give --acme-cache DIR")
	}
	zl := zap.New(zapToSlog{logger: am.logger.With("component", "acme")})
	am.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert:   func(certmagic.Certificate) (*certmagic.Config, error) { return am.magic, nil },
		RenewCheckInterval: ACMERenewCheck,
		Logger:             zl,
	})
	// A client that names no server (SNI), such as a load balancer's
	// check by address, gets the first name's certificate.
	am.magic = certmagic.New(am.cache, certmagic.Config{Storage: storage, Logger: zl, OnEvent: am.onEvent, DefaultServerName: am.cfg.Domains[0]})
	am.issuer = certmagic.NewACMEIssuer(am.magic, certmagic.ACMEIssuer{
		CA: am.cfg.CA, Email: am.cfg.Email, Agreed: true, TrustedRoots: am.roots, Logger: zl,
		// The challenges are answered by this server's own listeners:
		// certmagic finds these ports taken, by us, and starts none.
		ListenHost: host, AltTLSALPNPort: tlsPort, AltHTTPPort: httpPort, DisableHTTPChallenge: httpPort == 0,
	})
	am.magic.Issuers = []certmagic.Issuer{am.issuer}
	if err := am.magic.ManageAsync(ctx, am.cfg.Domains); err != nil {
		return fmt.Errorf("--acme-domain: %w", err)
	}
	return nil
}

// Issuer is certmagic's ACME issuer, whose HandleHTTPChallenge answers
// the CA's HTTP-01 challenges; nil until Start.
func (am *ACME) Issuer() *certmagic.ACMEIssuer {
	return am.issuer
}

// TLSConfig is the API listener's: the managed certificates, and the
// acme-tls/1 protocol of the TLS-ALPN-01 challenge.
func (am *ACME) TLSConfig() *tls.Config {
	return serverTLS(am.getCertificate, "h2", "http/1.1", "acme-tls/1")
}

// getCertificate is certmagic's, with a WARN (at most once a minute) when
// a handshake is refused because there is no certificate yet.
func (am *ACME) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	cert, err := am.magic.GetCertificate(hello)
	if err != nil {
		am.mu.Lock()
		if time.Since(am.refused) >= acmeRefuseEvery {
			am.refused = time.Now()
			am.logger.Warn("TLS handshake refused: no certificate for the name it asks", "server_name", hello.ServerName,
				"err", err, "last_failure", am.lastErr[hello.ServerName])
		}
		am.mu.Unlock()
	}
	return cert, err
}

// onEvent logs and counts what certmagic reports, and sets the expiry
// gauge as soon as a certificate arrives: cached_managed_cert is sent once
// one is in certmagic's cache (loaded from storage at start, or the first
// one obtained); cert_obtained, for a first certificate and a renewal
// alike, is sent once it is in storage but before the cache holds it, so
// the gauge reads it from storage there.
func (am *ACME) onEvent(ctx context.Context, event string, data map[string]any) error {
	name, _ := data["identifier"].(string)
	renewal, _ := data["renewal"].(bool)
	switch event {
	case "cached_managed_cert":
		if sans, _ := data["sans"].([]string); len(sans) > 0 {
			am.metrics.CertificateExpires(am.current(sans[0]))
		}
	case "cert_obtained":
		outcome := "obtained"
		if renewal {
			outcome = "renewed"
		}
		am.metrics.CountCertificateChange("acme", outcome)
		am.mu.Lock()
		delete(am.lastErr, name)
		am.mu.Unlock()
		path, _ := data["certificate_path"].(string)
		am.metrics.CertificateExpires(am.stored(ctx, path))
	case "cert_failed":
		am.metrics.CountCertificateChange("acme", "failed")
		err, _ := data["error"].(error)
		am.mu.Lock()
		am.lastErr[name] = fmt.Sprint(err)
		am.mu.Unlock()
		am.logger.Error("could not get a certificate from the CA: the current one, if any, keeps serving; "+
			"retried with backoff (1 min, 2 min, 2 min, 5 min, 10 min ... up to 6 h apart)", "name", name, "renewal", renewal, "err", err)
	}
	return nil
}

// stored is the leaf of the certificate certmagic keeps at path in its
// storage, nil (and a WARN) when it cannot be read.
func (am *ACME) stored(ctx context.Context, path string) *x509.Certificate {
	certPEM, err := am.magic.Storage.Load(ctx, path)
	var leaf *x509.Certificate
	if err == nil {
		block, _ := pem.Decode(certPEM)
		if block == nil {
			err = errors.New("no PEM certificate")
		} else {
			leaf, err = x509.ParseCertificate(block.Bytes)
		}
	}
	if err != nil {
		am.logger.Warn("the certificate just stored does not read back: its expiry gauge waits for the next look", "path", path, "err", err)
	}
	return leaf
}

// current is the certificate held for name, nil when there is none yet.
func (am *ACME) current(name string) *x509.Certificate {
	var newest *x509.Certificate
	for _, c := range am.cache.AllMatchingCertificates(name) {
		if c.Leaf != nil && (newest == nil || c.Leaf.NotAfter.After(newest.NotAfter)) {
			newest = c.Leaf
		}
	}
	return newest
}

// AwaitFirst waits, up to ACMEFirstWait, for a certificate for every
// name, saying every acmeWaitReport what it waits for.
func (am *ACME) AwaitFirst(ctx context.Context) {
	start := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	reported := start
	for {
		var missing []string
		for _, d := range am.cfg.Domains {
			if am.current(d) == nil {
				missing = append(missing, d)
			}
		}
		switch {
		case len(missing) == 0:
			return
		case time.Since(start) >= ACMEFirstWait:
			am.logger.Error("no certificate yet: HTTPS handshakes for these names fail until the CA issues one; still trying",
				"names", strings.Join(missing, ","), "waited", ACMEFirstWait.String(), "last_failure", am.lastFailure(missing))
			return
		case time.Since(reported) >= acmeWaitReport:
			reported = time.Now()
			am.logger.Info("waiting for the first certificate from the CA", "names", strings.Join(missing, ","),
				"waited", time.Since(start).Round(time.Second).String(), "last_failure", am.lastFailure(missing))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// lastFailure is the last error of getting any of names' certificates.
func (am *ACME) lastFailure(names []string) string {
	am.mu.Lock()
	defer am.mu.Unlock()
	for _, n := range names {
		if e := am.lastErr[n]; e != "" {
			return e
		}
	}
	return "none yet"
}

// Watch warns while a name's certificate is near its end (renewal has
// been failing), until ctx ends. It sets the expiry gauge too, though
// onEvent sets it as a certificate arrives: a renewal another server of a
// fleet made is taken up from storage without an event.
func (am *ACME) Watch(ctx context.Context) {
	for {
		for _, d := range am.cfg.Domains {
			leaf := am.current(d)
			if leaf == nil {
				continue
			}
			am.metrics.CertificateExpires(leaf)
			if nearExpiry(leaf, time.Now()) && time.Since(am.warned[d]) >= time.Hour {
				am.warned[d] = time.Now()
				am.logger.Warn("the certificate expires soon and is not renewed yet", "name", d,
					"expires", leaf.NotAfter.UTC().Format(time.RFC3339), "last_failure", am.lastFailure([]string{d}))
			}
		}
		select {
		case <-ctx.Done():
			am.cache.Stop()
			return
		case <-time.After(ACMEWatchEvery):
		}
	}
}

// zapToSlog is a zap core that writes certmagic's log lines (obtaining,
// challenges, renewals, retries) into the server's own log, each field an
// attribute, at the level entryLevel gives.
type zapToSlog struct {
	logger *slog.Logger
	fields []zapcore.Field
}

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// entryLevel is a certmagic line's level in the server's log. certmagic
// tells each step at INFO (its cache's address, locks, an account file not
// found yet as an "error", each challenge answered): those are DEBUG here.
// A certificate obtained or renewed stays INFO, and its WARN and ERROR
// lines (a failure among them) keep their levels.
func entryLevel(e zapcore.Entry) slog.Level {
	if e.Level != zapcore.InfoLevel {
		return slogLevel(e.Level)
	}
	switch e.Message {
	case "certificate obtained successfully", "certificate renewed successfully":
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// Enabled is whether a line at l could be written (entryLevel only ever
// lowers one, and Check decides).
func (c zapToSlog) Enabled(l zapcore.Level) bool {
	return c.logger.Enabled(context.Background(), slogLevel(l))
}

func (c zapToSlog) With(fields []zapcore.Field) zapcore.Core {
	return zapToSlog{logger: c.logger, fields: append(slices.Clip(c.fields), fields...)}
}

func (c zapToSlog) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.logger.Enabled(context.Background(), entryLevel(e)) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c zapToSlog) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range append(slices.Clip(c.fields), fields...) {
		f.AddTo(enc)
	}
	attrs := make([]any, 0, 2*len(enc.Fields))
	for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
		attrs = append(attrs, k, enc.Fields[k])
	}
	c.logger.Log(context.Background(), entryLevel(e), e.Message, attrs...)
	return nil
}

func (zapToSlog) Sync() error { return nil }
