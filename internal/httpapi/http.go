package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"petstore/internal/appendjson"
	"petstore/internal/domain"
	"petstore/internal/limits"
)

const (
	DefaultPageSize = 20
	MaxPageSize     = 100
)

// healthCheck tells whether r is a load balancer's or an orchestrator's
// probe (GET or HEAD /healthz or /readyz): its answers are not the API's,
// so they are logged at DEBUG, and a 503 of /readyz during an outage (ten a
// second from each prober) is neither an ERROR line nor a 5xx of the
// request metrics; the outage is logged once as it starts and once as it
// ends, and petstore_database_down follows it.
func healthCheck(r *http.Request) bool {
	return r.Pattern == "GET /readyz" || r.Pattern == "GET /healthz"
}

// LimitOf reads a page's limit, of pets or of the admin API's lists: an
// integer from 1 to MaxPageSize, in plain digits.
func LimitOf(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxPageSize || !domain.IsDigits(s) {
		return 0, Errorf(CodeInvalidRequest, "limit must be an integer from 1 to %d", MaxPageSize)
	}
	return n, nil
}

func MethodNotAllowed(allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		WriteError(w, Errorf(CodeMethodNotAllowed, "method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow))
	})
}

func NotFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, Errorf(CodeNotFound, "no resource at %s", r.URL.Path))
	})
}

// Middleware is one step on a request's way to its handler.
type Middleware = func(http.Handler) http.Handler

// outcomeOf is the column of a request the limiter refused with d.
func outcomeOf(d *limits.Decision) domain.UsageOutcome {
	switch {
	case d.Code == CodeTemporarilyBanned:
		return domain.UsageBanned
	case d.OverQuota:
		return domain.UsageQuotaExceeded
	}
	return domain.UsageRateLimited
}

// Refuse answers a request that d does not allow: 429, with Retry-After.
func Refuse(w http.ResponseWriter, r *http.Request, d *limits.Decision) {
	seconds := int64(d.RetryAfter / time.Second)
	w.Header()["Retry-After"] = []string{strconv.FormatInt(seconds, 10)}
	if d.Code == CodeTemporarilyBanned {
		WriteError(w, Errorf(CodeTemporarilyBanned,
			"too many requests while rate limited: temporarily banned; retry after %d seconds", seconds))
	} else {
		WriteError(w, Errorf(CodeRateLimited,
			"rate limit exceeded (%d requests per %s); retry after %d seconds", d.Limit, d.Window, seconds))
	}
}

// ClientAddr is the address a request without a key is counted against: the
// TCP peer, or behind a trusted proxy the first X-Forwarded-For hop; for
// IPv6 its /64 (domain.LimitedAddr).
func ClientAddr(r *http.Request, trustProxy bool) netip.Addr {
	if trustProxy {
		if xff := r.Header.Get("X-Forwarded-For"); xff != "" {
			first, _, _ := strings.Cut(xff, ",")
			if addr, err := netip.ParseAddr(strings.TrimSpace(first)); err == nil {
				return domain.LimitedAddr(addr)
			}
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, _ := netip.ParseAddr(host)
	return domain.LimitedAddr(addr)
}

// InsufficientScope is the 403 to a credential that has scopes has and
// lacks need; holder and it name the credential ("this API key", "the
// key").
func InsufficientScope(w http.ResponseWriter, r *http.Request, challenge []string, holder, it string, need, has domain.ScopeSet) {
	w.Header()["Www-Authenticate"] = challenge
	WriteError(w, Errorf(CodeInsufficientScope, "%s lacks the %s scope, which %s %s needs; %s has %s",
		holder, need, r.Method, r.URL.Path, it, has.Described()))
}

// BearerToken returns the credential of an "Authorization: Bearer <token>"
// header. The scheme is case-insensitive and may be followed by several
// spaces. hasBearer is false when the header is absent or of another scheme.
func BearerToken(header string) (token string, hasBearer bool) {
	scheme, rest, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.Trim(rest, " "), true
}

// Unauthorized is the 401 answer, with the challenge RFC 6750 asks for.
func Unauthorized(w http.ResponseWriter, r *http.Request, sentToken bool, message string) {
	challenge := `Bearer realm="petstore"`
	if sentToken {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	WriteError(w, &Error{Code: CodeUnauthorized, Message: message})
}

// AppendRateLimitStatus appends key's plan, scopes and windows s as JSON:
// the body of GET /v1/rate_limit and of the admin API's
// GET /admin/v1/keys/{id}/limits.
func AppendRateLimitStatus(b []byte, key *domain.Key, s limits.Standing) []byte {
	b = append(b, `{"plan":`...)
	b = appendjson.String(b, key.Plan)
	b = appendScopes(append(b, `,"scopes":`...), key.Scopes)
	b = appendWindow(append(b, `,"minute":`...), s.Minute)
	b = appendWindow(append(b, `,"day":`...), s.Day)
	return append(b, "}\n"...)
}

func appendWindow(b []byte, win limits.Window) []byte {
	b = append(b, `{"limit":`...)
	b = strconv.AppendInt(b, win.Limit, 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, max(0, win.Remaining), 10)
	b = append(b, `,"reset":`...)
	b = strconv.AppendInt(b, win.Reset.Unix(), 10)
	return append(b, '}')
}

func appendScopes(b []byte, s domain.ScopeSet) []byte {
	b = append(b, '[')
	for i, name := range s.Names() {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendjson.String(b, name)
	}
	return append(b, ']')
}
