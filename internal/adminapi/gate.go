package adminapi

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/keyring"
	"petstore/internal/limits"
	"petstore/internal/metrics"
)

// Admin tokens (docs/admin.md#admin-tokens): the credential of the admin
// API, a second kind that is never a pet key. A token looks like a key with
// another prefix (psa_live_, psa_test_ on staging: domain.AdminPrefixes),
// made and checked by the same code (domain.NewSecret,
// keyring.SecretProblem); the database keeps its SHA-256 hash. Its scopes
// are domain.AllAdminScopes.

// Gate lets a request into the admin API with a valid admin token that
// holds the scope its route needs. The token is looked up in the database
// at each request (the admin API is not the hot path), so a revocation
// holds at once on every server. Failed authentications are counted
// (petstore_admin_auth_failures_total), and those that present a
// credential limited per client address by a limiter of their own, never the /v1 one: a portal with a wrong token
// never bans its address from /v1, nor /v1 traffic its admin access.
type Gate struct {
	// Tokens finds an admin token by its hash: all the gate reads.
	Tokens interface {
		AdminTokenByHash(ctx context.Context, hash []byte) (domain.AdminToken, bool, error)
	}
	Env      string
	Failures limits.Limiter
	Metrics  *metrics.Metrics
}

// caller is whom the failures of r are counted against: its TCP peer,
// whatever --trust-proxy says. The admin listener is reached directly, not
// through the public listener's proxy, so X-Forwarded-For there is the
// client's own word: believed, it would let one address spread its
// failures over made-up addresses, or ban another's.
func (g *Gate) caller(r *http.Request) domain.CallerID {
	return domain.CallerID{Addr: httpapi.ClientAddr(r, false)}
}

// Challenge is the WWW-Authenticate of the admin API's 401s.
const Challenge = `Bearer realm="petstore-admin"`

// The failures of an admin authentication, each naming the mistake: its
// reason is the label of petstore_admin_auth_failures_total. Only a pet key
// sent here is told about psk_.
var (
	adminNoHeader    = keyring.Failure{Reason: keyring.Missing, Message: "the request has no admin token: send Authorization: Bearer psa_..."}
	adminNoToken     = keyring.Failure{Reason: keyring.Missing, Message: "the Authorization header has Bearer and no admin token after it: send Authorization: Bearer psa_..."}
	adminNoBearer    = keyring.Failure{Reason: keyring.Malformed, Message: "the Authorization header has the admin token without Bearer before it: send Authorization: Bearer psa_..."}
	adminBareWord    = keyring.Failure{Reason: keyring.Malformed, Message: "the Authorization header is one word, neither Bearer and a token nor an admin token: send Authorization: Bearer psa_..."}
	adminBasic       = keyring.Failure{Reason: keyring.Malformed, Message: "the admin API does not take Basic authentication (a user and a password): send Authorization: Bearer psa_..., an admin token made by petstore admin create"}
	adminOtherScheme = keyring.Failure{Reason: keyring.Malformed, Message: "the Authorization header must use the Bearer scheme: send Authorization: Bearer psa_..."}
	adminPetKey      = keyring.Failure{Reason: keyring.Malformed, Message: "this is an API key (psk_...), which works on /v1 only: the admin API takes an admin token (psa_...), made by petstore admin create"}
	adminMistyped    = keyring.Failure{Reason: keyring.Malformed, Message: "the admin token is not valid: it has not the length, the characters or the checksum of one (mistyped, or cut short when copied?)"}
	Unknown          = keyring.Failure{Reason: keyring.Invalid, Message: "the admin token is not valid: there is no such token (petstore admin list shows them)"}
	adminRevoked     = keyring.Failure{Reason: keyring.Revoked, Message: "the admin token has been revoked"}
)

// Credential is the admin token of an Authorization header, or the
// mistake that keeps the header from holding one for env.
func Credential(header, env string) (string, keyring.Failure) {
	token, isBearer := httpapi.BearerToken(header)
	scheme, _, spaced := strings.Cut(header, " ")
	switch {
	case header == "":
		return "", adminNoHeader
	case isBearer && token == "":
		return "", adminNoToken
	case isBearer:
	case strings.EqualFold(scheme, "Basic"):
		return "", adminBasic
	case spaced:
		return "", adminOtherScheme
	case strings.HasPrefix(header, "psk_"):
		return "", adminPetKey
	case strings.HasPrefix(header, "psa_"):
		return "", adminNoBearer
	default:
		return "", adminBareWord
	}
	if strings.HasPrefix(token, "psk_") {
		return "", adminPetKey
	}
	switch problem := keyring.SecretProblem(token, env, domain.AdminPrefixes); problem.Reason {
	case 0:
		return token, keyring.Failure{}
	case keyring.WrongEnvironment:
		return "", keyring.Failure{Reason: keyring.WrongEnvironment, Message: fmt.Sprintf("the admin token belongs to the other environment (psa_live_ is production's, psa_test_ staging's), and this server is %s", env)}
	}
	return "", adminMistyped
}

// Require answers a request without a valid admin token 401 (429 once its
// address has failed too often), one whose token lacks need 403, and
// passes the rest to next with the token on the request's info.
func (g *Gate) Require(need domain.ScopeSet) httpapi.Middleware {
	challenge := []string{`Bearer realm="petstore-admin", error="insufficient_scope", scope="` + need.String() + `"`}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch t, failure, err := g.authenticate(r); {
			case err != nil:
				httpapi.WriteError(w, err)
			case t == nil:
				g.refuse(w, r, failure)
			case !t.Scopes.Has(need):
				httpapi.InsufficientScope(w, r, challenge, "this admin token", "the token", need, t.Scopes)
			default:
				httpapi.RecordOf(w).Admitted(t)
				next.ServeHTTP(w, r)
			}
		})
	}
}

// authenticate finds the request's admin token, or why it has none. An
// address banned for its failures is not looked up.
func (g *Gate) authenticate(r *http.Request) (*domain.AdminToken, keyring.Failure, error) {
	token, failure := Credential(httpapi.FirstHeader(r.Header, "Authorization"), g.Env)
	if failure.Reason != 0 {
		return nil, failure, nil
	}
	s, err := g.Failures.Peek(r.Context(), g.caller(r), domain.AnonymousLimits)
	if err != nil {
		return nil, keyring.Failure{}, err
	}
	if !s.Allowed {
		return nil, Unknown, nil // banned: the token is not even looked up
	}
	hash := domain.HashKey(token)
	t, ok, err := g.Tokens.AdminTokenByHash(r.Context(), bytes.Clone(hash[:]))
	switch {
	case err != nil:
		return nil, keyring.Failure{}, err
	case !ok || t.Env != g.Env:
		return nil, Unknown, nil
	case !t.RevokedAt.IsZero():
		return nil, adminRevoked, nil
	}
	return &t, keyring.Failure{}, nil
}

// refuse answers a failed authentication: counted, and, when the request
// presented a credential (an Authorization header), spent from the
// address's own allowance of failures; 401, or 429 past it. A request
// without one guesses nothing: any web page can make a browser send it,
// and counted it would let the page ban the owners behind that browser's
// address (docs/admin.md#admin-tokens).
func (g *Gate) refuse(w http.ResponseWriter, r *http.Request, failure keyring.Failure) {
	g.Metrics.AdminAuthFailed(uint8(failure.Reason))
	if len(r.Header.Values("Authorization")) > 0 {
		d, err := g.Failures.Allow(r.Context(), g.caller(r), domain.AnonymousLimits)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		if !d.Allowed {
			httpapi.Refuse(w, r, &d)
			return
		}
	}
	w.Header().Set("WWW-Authenticate", Challenge)
	httpapi.WriteError(w, &httpapi.Error{Code: httpapi.CodeUnauthorized, Message: failure.Message})
}

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
