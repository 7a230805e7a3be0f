package main

import (
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// The plain HTTP listener of --http-addr beside an HTTPS server
// (docs/production.md, "HTTPS on a small VM"): it answers the CA's HTTP-01
// challenges, and a load balancer's /healthz and /readyz; a request under
// /v1 is refused, since its key has crossed the network in clear text and a
// redirect would hide that; anything else is sent to HTTPS with 308, which
// keeps the method and the body.

// challenger answers an ACME HTTP-01 challenge, reporting whether r was one.
type challenger interface {
	HandleHTTPChallenge(w http.ResponseWriter, r *http.Request) bool
}

// plainHandler is the --http-addr listener's handler: health is the API's
// handler (for /healthz and /readyz, which logs them), challenges
// certmagic's issuer (nil without ACME), httpsPort the port of --addr.
func plainHandler(health http.Handler, challenges challenger, httpsPort int, logger *slog.Logger, m *metrics) http.Handler {
	logged := logRequests(logger, m)
	own := logged(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") || r.URL.Path == "/v1" {
			w.Header().Set("Connection", "close")
			writeError(w, r, errorf(codeHTTPSRequired, "use https: this API is served over HTTPS only, and a key sent over plain HTTP "+
				"has crossed the network in clear text (revoke or roll it)"))
			return
		}
		http.Redirect(w, r, httpsURL(r, httpsPort), http.StatusPermanentRedirect)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if challenges != nil && challenges.HandleHTTPChallenge(w, r) {
			return
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
