package publicapi

import (
	"context"
	"net/http"
	"net/netip"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/keyring"
	"petstore/internal/limits"
)

// Authenticate finds the request's API key, if it sends a valid one. It
// refuses nothing itself: the rate limit comes first, then RequireKey. A
// key this server does not hold is looked up in the database only when its
// sender's address is neither limited nor banned by limiter.
func Authenticate(d Deps) httpapi.Middleware {
	keys, limiter, trustProxy := d.Keys, d.Limiter, d.TrustProxy
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			header := httpapi.FirstHeader(r.Header, "Authorization")
			token, isBearer := httpapi.BearerToken(header)
			var (
				h    *keyring.Held
				auth keyring.Failure
				err  error
			)
			switch {
			case header == "":
				auth = keyring.NoHeader
			case !isBearer:
				auth = keyring.NotBearer
			case token == "":
				auth = keyring.NoToken
			default:
				// A failed look-up is answered by RequireKey, after the
				// address limit has set its headers.
				h, auth, err = keys.Lookup(r.Context(), token, func(ctx context.Context) bool {
					return addressLimited(ctx, limiter, httpapi.ClientAddr(r, trustProxy))
				})
			}
			httpapi.RecordOf(w).Authenticated(h, isBearer && token != "", auth, err)
			next.ServeHTTP(w, r)
		})
	}
}

// addressLimited tells whether a request without a key from addr would be
// refused now: the address is banned, or one of its windows is spent. When
// the limiter cannot tell, it is not.
func addressLimited(ctx context.Context, limiter limits.Limiter, addr netip.Addr) bool {
	s, err := limiter.Peek(ctx, domain.CallerID{Addr: addr}, domain.AnonymousLimits)
	return err == nil && (!s.Allowed || s.Minute.Remaining < 1 || s.Day.Remaining < 1)
}

// RequireKey answers 401 to a request without a valid API key.
func RequireKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := httpapi.RecordOf(w)
		key := info.Keyed()
		if key == nil && info.AuthErr() != nil {
			httpapi.WriteError(w, info.AuthErr())
			return
		}
		if key == nil {
			httpapi.Unauthorized(w, r, info.SentToken(), info.Auth().Message)
			return
		}
		next.ServeHTTP(w, r)
	})
}
