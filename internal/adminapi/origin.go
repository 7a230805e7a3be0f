package adminapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"petstore/internal/httpapi"
)

// The admin API answers no other origin's web page (docs/admin.md, "The
// origins it answers"). A page of any site could otherwise send requests to
// the listener through the browser of an owner on its network: it cannot
// read the answers (no Access-Control-Allow-Origin), but each request would
// count against the owner's address. The console is a client of the same
// origin and keeps working; a client that is not a browser sends neither
// header and is let through. Go's http.CrossOriginProtection reads the
// headers the same way, for unsafe methods only; here every method is
// refused, before the token is looked at or any failure counted.

// crossOrigin is why r comes from another origin's page, or "" when it
// does not: Sec-Fetch-Site, which a browser sets, is cross-site or
// same-site (another port of the same host is another origin, and the
// same site), or Origin is present and its host and port are not the
// request's Host. As Go's check does, the scheme is not compared: one port
// speaks either TLS or plain HTTP, and a proxy in front may end TLS.
func crossOrigin(r *http.Request) string {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "cross-site", "same-site":
		return "the browser says this request comes from a page of another origin (Sec-Fetch-Site: " + site + ")"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	if u, err := url.Parse(origin); err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return fmt.Sprintf("the request comes from a page of another origin (Origin: %.100q, and this listener is asked as %.100q)", origin, r.Host)
	}
	return ""
}

// SameOrigin answers 403 cross_origin to a request of another origin's
// page (crossOrigin), before anything else of the admin API.
func SameOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := crossOrigin(r); why != "" {
			httpapi.WriteError(w, httpapi.Errorf(httpapi.CodeCrossOrigin, "%s: the admin API answers only its own console "+
				"and clients that are not browsers, such as curl or petstore admin", why))
			return
		}
		next.ServeHTTP(w, r)
	})
}
