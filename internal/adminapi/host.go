package adminapi

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"petstore/internal/httpapi"
	"slices"
	"strings"
)

// The admin listener answers only the Host names that are its own
// (docs/admin.md). /metrics and /debug/pprof/ need no token, so a web page
// whose DNS name is rebound to the listener's address could read them
// through a browser on the listener's network: the browser sends the
// page's own name as Host. A request whose Host is neither an IP address,
// localhost nor a name given by --admin-host is answered 421, as Caddy's
// admin endpoint does.

// ParseHosts reads --admin-host: host names separated by commas,
// without a port; the names are kept in lower case, without a final dot.
func ParseHosts(v string) ([]string, error) {
	var names []string
	for name := range strings.SplitSeq(v, ",") {
		name = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(name), "."))
		if name == "" || strings.ContainsAny(name, ":/[]@%? \t") {
			return nil, fmt.Errorf("--admin-host takes host names separated by commas, without a port or a scheme, such as admin.internal,petstore-admin; not %q", v)
		}
		names = append(names, name)
	}
	return names, nil
}

// HostAllowed tells whether host, a request's Host with or without a
// port, names the admin listener: an IP address (v4, or v6 in brackets or
// not), localhost, or one of names.
func HostAllowed(host string, names []string) bool {
	name, _, err := net.SplitHostPort(host)
	if err != nil {
		name = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	return name == "localhost" || slices.Contains(names, name)
}

// RequireHost answers 421 misdirected_request to a request whose Host
// is not the admin listener's (HostAllowed), before anything else.
func RequireHost(names []string) httpapi.Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !HostAllowed(r.Host, names) {
				httpapi.WriteError(w, httpapi.Errorf(httpapi.CodeMisdirectedRequest, "the admin listener does not answer to the Host %.100q: only to an IP address, "+
					"localhost, or a name given to petstore serve --admin-host NAME[,NAME...]", r.Host))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
