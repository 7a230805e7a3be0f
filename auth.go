package main

import (
	"context"
	"net/http"
	"net/netip"
	"strings"

	"petstore/internal/domain"
	"petstore/internal/keyring"
	"petstore/internal/limits"
)

// bearerToken returns the credential of an "Authorization: Bearer <token>"
// header. The scheme is case-insensitive and may be followed by several
// spaces. hasBearer is false when the header is absent or of another scheme.
func bearerToken(header string) (token string, hasBearer bool) {
	scheme, rest, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.Trim(rest, " "), true
}

// unauthorized is the 401 answer, with the challenge RFC 6750 asks for.
func unauthorized(w http.ResponseWriter, r *http.Request, sentToken bool, message string) {
	challenge := `Bearer realm="petstore"`
	if sentToken {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	writeError(w, r, &Error{Code: codeUnauthorized, Message: message})
}

// authenticate finds the request's API key, if it sends a valid one. It
// refuses nothing itself: the rate limit comes first, then requireKey. A
// key this server does not hold is looked up in the database only when its
// sender's address is neither limited nor banned by limiter.
func authenticate(keys *keyring.Ring, limiter limits.Limiter, trustProxy bool) middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			header := firstHeader(r.Header, "Authorization")
			token, isBearer := bearerToken(header)
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
				// A failed look-up is answered by requireKey, after the
				// address limit has set its headers.
				h, auth, err = keys.Lookup(r.Context(), token, func(ctx context.Context) bool {
					return addressLimited(ctx, limiter, clientAddr(r, trustProxy))
				})
			}
			recordOf(w).authenticated(h, isBearer && token != "", auth, err)
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

// requireKey answers 401 to a request without a valid API key.
func requireKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := recordOf(w)
		key := info.keyed()
		if key == nil && info.authErr != nil {
			writeError(w, r, info.authErr)
			return
		}
		if key == nil {
			unauthorized(w, r, info.sentToken, info.auth.Message)
			return
		}
		next.ServeHTTP(w, r)
	})
}
