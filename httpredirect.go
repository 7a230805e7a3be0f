package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"petstore/internal/certs"
	"petstore/internal/httpapi"
	"petstore/internal/metrics"
	"strconv"
	"strings"
	"time"
)

// The plain HTTP listener of --http-addr beside an HTTPS server
// (docs/production.md, "HTTPS on a small VM"): it answers the CA's HTTP-01
// challenges, and a load balancer's /healthz and /readyz; a request under
// /v1 is refused, since its key has crossed the network in clear text and a
// redirect would hide that; anything else is sent to HTTPS with 308, which
// keeps the method and the body.

// plainHandler is the --http-addr listener's handler: health is the API's
// handler (for /healthz and /readyz, which logs them), httpsPort the port
// of --addr. acme (nil without ACME) answers the CA's HTTP-01 challenges,
// this server's or another's on the same storage, with certmagic's issuer
// once it started.
func plainHandler(health http.Handler, acme *certs.ACME, httpsPort int, logger *slog.Logger, m *metrics.Metrics) http.Handler {
	logged := httpapi.LogRequests(logger, m)
	own := logged(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") || r.URL.Path == "/v1" {
			w.Header().Set("Connection", "close")
			httpapi.WriteError(w, httpapi.Errorf(httpapi.CodeHTTPSRequired, "use https: this API is served over HTTPS only, and a key sent over plain HTTP "+
				"has crossed the network in clear text (revoke or roll it)"))
			return
		}
		http.Redirect(w, r, httpsURL(r, httpsPort), http.StatusPermanentRedirect)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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

// httpsURL is r's URL over HTTPS on httpsPort: the same host, path and query.
func httpsURL(r *http.Request, httpsPort int) string {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // an IPv6 address
	}
	if httpsPort != 443 && httpsPort != 0 {
		host += ":" + strconv.Itoa(httpsPort)
	}
	return "https://" + host + r.URL.RequestURI()
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
