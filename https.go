package main

import (
	"context"
	"crypto/tls"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"petstore/internal/certs"
	"petstore/internal/cli"
	"petstore/internal/httpapi"
	"petstore/internal/metrics"
	"petstore/internal/store"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/caddyserver/certmagic"
)

// httpsConfig are serve's flags for HTTPS without a proxy
// (docs/production.md, "HTTPS on a small VM"). Without any of them the
// server speaks plain HTTP, as it always did.
type httpsConfig struct {
	tlsCert, tlsKey           string
	adminTLSCert, adminTLSKey string
	acmeDomain, acmeEmail     string
	acmeCA, acmeCARoot        string
	acmeCache                 string
	domains                   []string // --acme-domain's names
	httpAddr                  string   // "" when off
	hsts                      time.Duration
}

// defaultHSTS is a year, what browsers' preload lists ask for.
const defaultHSTS = 365 * 24 * time.Hour

func (h *httpsConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&h.tlsCert, "tls-cert", "", "serve HTTPS (TLS 1.2 and 1.3, HTTP/2) with the certificate chain in this PEM file; reloaded when it changes or on SIGHUP (needs --tls-key)")
	fs.StringVar(&h.tlsKey, "tls-key", "", "the private key of --tls-cert, a PEM file")
	fs.StringVar(&h.adminTLSCert, "admin-tls-cert", "", "serve the admin listener over HTTPS with the certificate chain in this PEM file (needs --admin-tls-key); plain HTTP without")
	fs.StringVar(&h.adminTLSKey, "admin-tls-key", "", "the private key of --admin-tls-cert, a PEM file")
	fs.StringVar(&h.acmeDomain, "acme-domain", "", "get and renew certificates for these names from an ACME CA (Let's Encrypt by default), NAME[,NAME...]; "+
		"--addr then defaults to :443 and --http-addr to :80")
	fs.StringVar(&h.acmeEmail, "acme-email", "", "the e-mail address of the ACME account (optional)")
	fs.StringVar(&h.acmeCA, "acme-ca", certmagic.LetsEncryptProductionCA, "the ACME directory URL of the CA")
	fs.StringVar(&h.acmeCARoot, "acme-ca-root", "", "a PEM file of the root to trust for the CA's own HTTPS endpoint (a staging or private CA); default: the system's roots")
	fs.StringVar(&h.acmeCache, "acme-cache", "", "the directory of the ACME account and certificates, created 0700 (default: beside the SQLite file, FILE-acme; in the database on PostgreSQL)")
	fs.StringVar(&h.httpAddr, "http-addr", "", "a plain HTTP listener, HOST:PORT, that answers ACME HTTP-01 challenges, /healthz and /readyz, refuses /v1/ and redirects the rest to HTTPS (default :80 with --acme-domain; \"off\" for none)")
	fs.DurationVar(&h.hsts, "hsts", defaultHSTS, "max-age of the Strict-Transport-Security header on every HTTPS answer; 0 sends none")
}

// on is whether the API is served over TLS.
func (h *httpsConfig) on() bool { return h.tlsCert != "" || h.acmeDomain != "" }

// check refuses flags that do not go together (a usage mistake, exit 2).
// set holds the flags given: --acme-domain moves the defaults of --addr
// and --http-addr, which cfg holds.
func (h *httpsConfig) check(cfg *serveConfig, set map[string]bool) error {
	if err := pairGiven("--tls-cert", h.tlsCert, "--tls-key", h.tlsKey); err != nil {
		return err
	}
	if h.httpAddr == "off" {
		h.httpAddr = ""
	}
	if err := h.checkACME(cfg, set); err != nil {
		return err
	}
	if h.httpAddr != "" {
		if !h.on() {
			return cli.Usagef("--http-addr redirects to HTTPS: it needs --tls-cert or --acme-domain")
		}
		if err := checkListenAddr("--http-addr", h.httpAddr); err != nil {
			return err
		}
	}
	if err := pairGiven("--admin-tls-cert", h.adminTLSCert, "--admin-tls-key", h.adminTLSKey); err != nil {
		return err
	}
	if h.adminTLSCert != "" && cfg.adminAddr == "" {
		return cli.Usagef("--admin-tls-cert needs --admin-addr: there is no admin listener without it")
	}
	if h.hsts < 0 {
		return cli.Usagef("--hsts must be 0 (no header) or more, such as 8760h for a year")
	}
	return nil
}

// checkACME checks the ACME flags and sets the defaults they move.
func (h *httpsConfig) checkACME(cfg *serveConfig, set map[string]bool) error {
	if h.acmeDomain == "" {
		for _, f := range []string{"acme-email", "acme-ca", "acme-ca-root", "acme-cache"} {
			if set[f] {
				return cli.Usagef("--%s needs --acme-domain", f)
			}
		}
		return nil
	}
	if h.tlsCert != "" {
		return cli.Usagef("--acme-domain and --tls-cert both give the certificate: choose one")
	}
	domains, err := certs.ParseDomains(h.acmeDomain)
	if err != nil {
		return cli.Usagef("%v", err)
	}
	h.domains = domains
	if u, err := url.Parse(h.acmeCA); err != nil || u.Scheme != "https" || u.Host == "" {
		return cli.Usagef("--acme-ca %q must be the https:// URL of an ACME directory", h.acmeCA)
	}
	if !set["addr"] {
		cfg.addr = ":443"
	}
	if !set["http-addr"] {
		h.httpAddr = ":80"
	}
	if _, port, _ := net.SplitHostPort(cfg.addr); h.httpAddr == "" && port != "443" {
		return cli.Usagef("--acme-domain has no way to answer the CA's challenge: --http-addr is off (HTTP-01, which the CA asks on port 80) "+
			"and --addr %s is not on port 443 (TLS-ALPN-01); give --http-addr :80 or --addr :443", cfg.addr)
	}
	if h.acmeCache == "" && !store.IsPostgresURL(cfg.DB) {
		h.acmeCache = strings.TrimSuffix(cfg.DB, filepath.Ext(cfg.DB)) + "-acme"
	}
	return nil
}

// pairGiven wants both of a certificate and its key, or neither.
func pairGiven(certFlag, cert, keyFlag, key string) error {
	switch {
	case cert != "" && key == "":
		return cli.Usagef("%s needs %s, the file of its private key", certFlag, keyFlag)
	case cert == "" && key != "":
		return cli.Usagef("%s needs %s, the file of its certificate", keyFlag, certFlag)
	}
	return nil
}

// transport is how the listeners speak: the TLS of each (nil: plain HTTP),
// what wraps the handler of each that serves TLS (strict), what follows
// the certificates.
type transport struct {
	api, admin *tls.Config
	wrap       httpapi.Middleware
	files      []*certs.Files // the pairs to follow
	acme       *certs.ACME    // nil without --acme-domain
}

// newTransport reads the certificates the flags name; a file that is
// missing, unreadable, expired or does not match its pair is an error
// naming the flag and the file (exit 1).
func newTransport(cfg serveConfig, logger *slog.Logger, m *metrics.Metrics) (*transport, error) {
	h := cfg.https
	tr := &transport{wrap: func(next http.Handler) http.Handler { return next }}
	var apiFiles *certs.Files
	switch {
	case h.tlsCert != "":
		files, err := certs.OpenFiles("--tls-cert", h.tlsCert, "--tls-key", h.tlsKey, logger, m)
		if err != nil {
			return nil, err
		}
		apiFiles, tr.api = files, files.TLSConfig()
		tr.files = append(tr.files, files)
	case h.acmeDomain != "":
		am, err := certs.NewACME(certs.ACMEConfig{Domains: h.domains, Email: h.acmeEmail, CA: h.acmeCA, CARoot: h.acmeCARoot, Cache: h.acmeCache}, logger, m)
		if err != nil {
			return nil, err
		}
		tr.acme, tr.api = am, am.TLSConfig()
	}
	if h.hsts > 0 {
		tr.wrap = strictTransport(h.hsts)
	}
	if h.adminTLSCert != "" && h.adminTLSCert == h.tlsCert && h.adminTLSKey == h.tlsKey {
		// One pair for both listeners: one follower, so a reload or a
		// failure is logged once.
		tr.admin = apiFiles.TLSConfig()
	} else if h.adminTLSCert != "" {
		files, err := certs.OpenFiles("--admin-tls-cert", h.adminTLSCert, "--admin-tls-key", h.adminTLSKey, logger, m)
		if err != nil {
			return nil, err
		}
		tr.admin = files.TLSConfig()
		tr.files = append(tr.files, files)
	}
	if cfg.adminAddr != "" && tr.admin == nil && !loopbackAddr(cfg.adminAddr) {
		logger.Warn("the admin listener is on a non-loopback address without TLS: its admin tokens cross the network in clear text; "+
			"give it --admin-tls-cert and --admin-tls-key, or keep it on localhost or a private network", "admin", cfg.adminAddr)
	}
	return tr, nil
}

// strict wraps the handler of srv, when it serves TLS (the API's port
// with --tls-cert or --acme-domain, the admin listener with
// --admin-tls-cert), in Strict-Transport-Security: outermost, so that
// http1HeaderLimit's 431 carries it too. What net/http answers before
// any handler runs cannot carry it (docs/production.md).
func (tr *transport) strict(srv *http.Server) *http.Server {
	if srv.TLSConfig != nil {
		srv.Handler = tr.wrap(srv.Handler)
	}
	return srv
}

// start runs what follows the certificates until ctx ends: the files'
// watchers, and certmagic, on db's storage when it keeps certificates
// (PostgreSQL), answering TLS-ALPN-01 on the API's port (the first of
// ports) and HTTP-01 on the --http-addr one, if any. stop ends it all.
func (tr *transport) start(ctx context.Context, db store.Lifecycle, ports []port) (stop func(), _ error) {
	ctx, cancel := context.WithCancel(ctx)
	var following sync.WaitGroup
	for _, files := range tr.files {
		// Taken before start returns: a SIGHUP sent as soon as the
		// server answers must not meet its default, the process's end.
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		following.Go(func() {
			defer signal.Stop(hup)
			files.Follow(ctx, hup)
		})
	}
	if tr.acme != nil {
		var kept certmagic.Storage
		if keeper, ok := db.(store.ACMEStorer); ok {
			kept = keeper.ACMEStorage()
		}
		host, tlsPort := splitPort(ports[0].ln.Addr().String())
		httpPort := 0
		for _, p := range ports {
			if p.plain {
				_, httpPort = splitPort(p.ln.Addr().String())
			}
		}
		if err := tr.acme.Start(ctx, kept, host, tlsPort, httpPort); err != nil {
			cancel()
			following.Wait()
			return nil, err
		}
		following.Go(func() { tr.acme.Watch(ctx) })
	}
	return func() {
		cancel()
		following.Wait()
	}, nil
}

// http1HeaderLimit answers 431 to an HTTP/1.x request whose line and
// headers are above headerLimit: over TLS, MaxHeaderBytes is set for
// HTTP/2's count, which lets HTTP/1.1 read more.
func http1HeaderLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 1 {
			n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + len("  \r\n\r\n") + len("Host: \r\n") + len(r.Host)
			for k, vs := range r.Header {
				for _, v := range vs {
					n += len(k) + len(v) + len(": \r\n")
				}
			}
			if n > headerLimit {
				w.Header().Set("Connection", "close")
				http.Error(w, "431 Request Header Fields Too Large", http.StatusRequestHeaderFieldsTooLarge)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// strictTransport adds Strict-Transport-Security to every answer over TLS,
// so a browser never again asks this name over plain HTTP for maxAge.
func strictTransport(maxAge time.Duration) httpapi.Middleware {
	value := "max-age=" + strconv.FormatInt(int64(maxAge/time.Second), 10)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.TLS != nil {
				w.Header().Set("Strict-Transport-Security", value)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// scheme is http or https, as a URL to the listener begins.
func scheme(c *tls.Config) string {
	if c != nil {
		return "https"
	}
	return "http"
}

// loopbackAddr is whether HOST:PORT listens on loopback only (an empty
// host, or 0.0.0.0, is every interface).
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tlsErrorWriter writes the ErrorLog of a server over TLS: a failed
// handshake (a scanner, a client that does not trust the certificate, a
// connection cut halfway) is the client's affair and logged at DEBUG;
// anything else at WARN.
type tlsErrorWriter struct{ logger *slog.Logger }

func (w tlsErrorWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelWarn
	if strings.Contains(msg, "TLS handshake error") {
		level = slog.LevelDebug
	}
	w.logger.Log(context.Background(), level, msg)
	return len(p), nil
}
