package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"petstore/internal/certs"
	"petstore/internal/cli"
	"strings"
	"syscall"
	"time"
)

// healthcheckTimeout is how long a health check waits for /readyz.
const healthcheckTimeout = 2 * time.Second

// healthcheckCommand asks a server's /readyz, for container and systemd
// health checks (the image has no curl): nil when it answers 200 in time,
// else an error that says why, in one line.
func healthcheckCommand(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	rawURL := fs.String("url", "", "the URL to check, or the server's base URL or HOST:PORT (/readyz is added when the path is empty); default: /readyz of --addr")
	addr := fs.String("addr", "localhost:8080", "the server's --addr, used when --url is not given (so PETSTORE_ADDR serves both); :443 with --acme-domain")
	var hc healthcheckTLS
	fs.StringVar(&hc.acmeDomain, "acme-domain", "", "the server's --acme-domain (so PETSTORE_ACME_DOMAIN serves both): check over https, asking for its first name")
	fs.StringVar(&hc.tlsCert, "tls-cert", "", "the server's --tls-cert (so PETSTORE_TLS_CERT serves both): check over https, trusting that certificate")
	fs.StringVar(&hc.serverName, "server-name", "", "the name to ask for (SNI) and verify over https (default: the first --acme-domain, or the URL's host)")
	fs.StringVar(&hc.caRoot, "ca-root", "", "a PEM file of roots to trust over https, besides the system's")
	rest, err := cli.ParseFlags(fs, args, getenv, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return cli.Usagef("healthcheck takes no arguments, got %q (use --url)", rest[0])
	}
	if hc.acmeDomain != "" && !setFlags(fs)["addr"] {
		*addr = ":443"
	}
	target, err := healthcheckURL(*rawURL, *addr, hc.acmeDomain != "" || hc.tlsCert != "")
	if err != nil {
		return err
	}
	tlsConfig, err := hc.config()
	if err != nil {
		return err
	}
	if host, _, _ := net.SplitHostPort(*addr); *rawURL == "" && tlsConfig.ServerName == "" && everyInterface(host) {
		// Asked on 127.0.0.1, the server's certificate still names this
		// machine as before.
		tlsConfig.ServerName = "localhost"
	}
	if err := checkReady(ctx, target, healthcheckTimeout, tlsConfig); err != nil {
		return fmt.Errorf("healthcheck %s: %w", target, err)
	}
	return nil
}

// healthcheckTLS is how a health check over https trusts the server.
type healthcheckTLS struct {
	acmeDomain, tlsCert, serverName, caRoot string
}

// config trusts the system's roots, --ca-root's and --tls-cert's
// certificates, and asks for --server-name or the first --acme-domain.
func (hc healthcheckTLS) config() (*tls.Config, error) {
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	for _, f := range []struct{ flag, file string }{{"--ca-root", hc.caRoot}, {"--tls-cert", hc.tlsCert}} {
		if f.file == "" {
			continue
		}
		if err := certs.AppendRoots(roots, f.flag, f.file); err != nil {
			return nil, err
		}
	}
	name := hc.serverName
	if first, _, _ := strings.Cut(hc.acmeDomain, ","); name == "" {
		name = strings.TrimSpace(first)
	}
	return &tls.Config{RootCAs: roots, ServerName: name, MinVersion: tls.VersionTLS12}, nil
}

// healthcheckURL is the URL to check: rawURL as given, with http:// when it
// has no scheme and /readyz when it has no path; without one, /readyz on
// addr (over https when overTLS), where an address on every interface
// (:8080, 0.0.0.0:8080, [::]:8080) is asked on 127.0.0.1, which needs no
// /etc/hosts (a container image has none to say what localhost is).
func healthcheckURL(rawURL, addr string, overTLS bool) (string, error) {
	if rawURL == "" {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return "", cli.Usagef("--addr %q is not HOST:PORT: %v", addr, err)
		}
		if everyInterface(host) {
			host = "127.0.0.1"
		}
		scheme := "http"
		if overTLS {
			scheme = "https"
		}
		return scheme + "://" + net.JoinHostPort(host, port) + "/readyz", nil
	}
	if !strings.Contains(rawURL, "://") {
		rawURL = "http://" + rawURL
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", cli.Usagef("--url %q must be an http:// or https:// URL, such as http://localhost:8080/readyz", rawURL)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/readyz"
	}
	return u.String(), nil
}

// everyInterface is true of the host of an address that listens on every
// interface: empty, 0.0.0.0 or ::.
func everyInterface(host string) bool {
	ip, err := netip.ParseAddr(host)
	return host == "" || (err == nil && ip.IsUnspecified())
}

// checkReady asks target once, within timeout, and wants a 200; over
// https it trusts what tlsConfig says.
func checkReady(ctx context.Context, target string, timeout time.Duration, tlsConfig *tls.Config) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{
		// Straight to the server: never through an HTTP_PROXY of the
		// environment, never to where a redirect points.
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true, TLSClientConfig: tlsConfig},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return requestProblem(err, timeout)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	problem := "answered " + resp.Status
	// The service's Error shape says why it is not ready.
	var e struct{ Message string }
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		problem += ": " + strings.Join(strings.Fields(e.Message), " ")
	}
	return errors.New(problem)
}

// requestProblem says in a few words why a request got no answer.
func requestProblem(err error, timeout time.Duration) error {
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return errors.New("connection refused: is the server running, on this address?")
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return fmt.Errorf("no answer within %v", timeout)
	case errors.As(err, &dnsErr):
		return fmt.Errorf("cannot resolve %s: %v", dnsErr.Name, dnsErr.Err)
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err
	}
	return err
}
