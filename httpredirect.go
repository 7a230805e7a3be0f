package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"petstore/internal/certs"
	"petstore/internal/httpapi"
	"petstore/internal/metrics"
)

// The plain HTTP listener of --http-addr beside an HTTPS server
// (docs/production.md, "HTTPS on a small VM"): it answers the CA's HTTP-01
// challenges, and a load balancer's /healthz and /readyz; a request that
// carries Authorization, whatever its path, or whose cleaned path is under
// /v1 (//v1/pets, /x/../v1/pets, %2Fv1 are /v1/pets once cleaned) is
// refused, since its key has crossed the network in clear text and a
// redirect would hide that, and a client that follows it would send the
// key again; anything else is sent to HTTPS with 308, which keeps the
// method and the body. With --acme-domain the redirect names only the
// configured names: another Host is refused 421, never echoed.

// plainHandler is the --http-addr listener's handler: health is the API's
// handler (for /healthz and /readyz, which logs them), httpsPort the port
// of --addr, names the --acme-domain names (none with certificate files).
// acme (nil without ACME) answers the CA's HTTP-01 challenges, this
// server's or another's on the same storage, with certmagic's issuer once
// it started.
func plainHandler(health http.Handler, acme *certs.ACME, names []string, httpsPort int, logger *slog.Logger, m *metrics.Metrics) http.Handler {
	logged := httpapi.LogRequests(logger, m, nil)
	own := logged(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" || underV1(r.URL.Path) {
			w.Header().Set("Connection", "close")
			httpapi.WriteError(w, httpapi.Errorf(httpapi.CodeHTTPSRequired, "use https: this API is served over HTTPS only, and a key sent over plain HTTP "+
				"has crossed the network in clear text (revoke or roll it)"))
			return
		}
		host, ok := redirectHost(r.Host, names)
		if !ok {
			httpapi.WriteError(w, httpapi.Errorf(httpapi.CodeMisdirectedRequest, "this server does not serve the Host %.100q: "+
				"only the names of its certificate, over https", r.Host))
			return
		}
		http.Redirect(w, r, httpsURL(host, r.URL.RequestURI(), httpsPort), http.StatusPermanentRedirect)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			own.ServeHTTP(w, r) // refused, whatever the path
			return
		}
		if acme != nil {
			if issuer := acme.Issuer(); issuer != nil && issuer.HandleHTTPChallenge(w, r) {
				return
			}
		}
		if p := r.URL.Path; p == "/healthz" || p == "/readyz" {
			health.ServeHTTP(w, r)
			return
		}
		own.ServeHTTP(w, r)
	})
}

// underV1 is whether the path, once cleaned as the HTTPS side's router
// or a proxy would clean it, is /v1 or under it. r.URL.Path is already
// decoded, so %2F and %76 count as / and v.
func underV1(p string) bool {
	p = path.Clean("/" + p)
	return p == "/v1" || strings.HasPrefix(p, "/v1/")
}

// redirectHost is the host of the redirect of a request to host (its
// Host header, with or without a port): with names (--acme-domain), the
// one of them it names, in any case and with or without a final dot, or
// false for any other; without, host itself (false when there is none:
// an HTTP/1.0 request without Host).
func redirectHost(host string, names []string) (string, bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if len(names) == 0 {
		return host, host != ""
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if i := slices.Index(names, host); i >= 0 {
		return names[i], true
	}
	return "", false
}

// httpsURL is the URL over HTTPS on httpsPort of host and requestURI.
func httpsURL(host, requestURI string, httpsPort int) string {
	if strings.Contains(host, ":") {
		host = "[" + strings.Trim(host, "[]") + "]" // an IPv6 address
	}
	if httpsPort != 443 && httpsPort != 0 {
		host += ":" + strconv.Itoa(httpsPort)
	}
	return "https://" + host + requestURI
}

// httpsOnly is the listener of a port that serves TLS: a connection whose
// first bytes are a plain HTTP request (an http:// URL with the HTTPS
// port) is answered 400 https_required in the Error shape and closed,
// rather than with net/http's line of plain text.
type httpsOnly struct{ net.Listener }

func (l httpsOnly) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &plainSniffer{Conn: c}, nil
}

// plainSniffer looks at the first bytes a client sends: a TLS handshake
// begins with 0x16, an HTTP request with its method's capital letters.
type plainSniffer struct {
	net.Conn
	looked bool
}

// httpsRequired is the whole answer to a plain HTTP request on a TLS port.
var httpsRequired = func() string {
	body := `{"code":"` + httpapi.CodeHTTPSRequired + `","message":"use https: this port speaks TLS only, and a key sent over plain HTTP ` +
		`has crossed the network in clear text (revoke or roll it)","status":400}` + "\n"
	return "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
}()

func (c *plainSniffer) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.looked && n > 0 {
		c.looked = true
		if p[0] >= 'A' && p[0] <= 'Z' {
			c.Conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			io.WriteString(c.Conn, httpsRequired)
			c.Conn.Close()
			return 0, io.EOF
		}
	}
	return n, err
}
