package publicapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/limits"
	"petstore/internal/metrics"
	"petstore/internal/tracing"
)

// The limiter's HTTP side: the middleware that asks it about each request,
// the rate-limit headers, and the 429.

// RedisHooks are what the Redis limiter tells the metrics: each run of its
// script, timed, and when it falls back to limiting in process and back.
// Without metrics, nothing.
func RedisHooks(m *metrics.Metrics) limits.RedisHooks {
	if m == nil {
		return limits.RedisHooks{}
	}
	return limits.RedisHooks{Fallback: m.SetRateLimitFallback, Call: m.RedisCall("limit_script").Since}
}

// Limit counts the request against its key, or without a valid key against
// its client address, sets the rate-limit headers and answers 429 when a
// limit is reached. The request that starts a ban has it recorded in audit;
// a key's day count is shown to quota, which notices 80% and 100%.
func Limit(d Deps) httpapi.Middleware {
	limiter, audit, quota, trustProxy := d.Limiter, d.StartedBans, d.Quota, d.TrustProxy
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			info := httpapi.RecordOf(w)
			key := info.Limiting()
			id, lim := domain.CallerID{KeyID: 0}, domain.AnonymousLimits
			if key != nil {
				id, lim = key.Budget()
			} else {
				id.Addr = httpapi.ClientAddr(r, trustProxy)
			}
			d, err := allow(r.Context(), limiter, id, lim)
			if err != nil {
				httpapi.WriteError(w, err)
				return
			}
			info.Decided(&d)
			setRateLimitHeaders(w.Header(), info, &d)
			if key != nil {
				quota.Observe(r.Context(), key, lim, d)
			}
			if !d.Allowed {
				if d.BanStarted {
					audit.Banned(r.Context(), key, id, d)
				}
				httpapi.Refuse(w, r, &d)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// allow asks limiter about the request, in a span of its own when the
// request is sampled: the limiter's decision, a Redis round trip within.
func allow(ctx context.Context, limiter limits.Limiter, id domain.CallerID, lim domain.Limits) (limits.Decision, error) {
	ctx, span := tracing.Child(ctx, "rate limit")
	d, err := limiter.Allow(ctx, id, lim)
	if span.On() {
		span.SetString("petstore.ratelimit.decision", decisionName(&d))
		span.Failed(err)
		span.End()
	}
	return d, err
}

func decisionName(d *limits.Decision) string {
	if d.Allowed {
		return "allowed"
	}
	return d.Code
}

// setRateLimitHeaders reports d in the rate-limit headers, their values
// backed by info's store. Every figure is a count of 0 or more, whatever the
// arithmetic behind it gave.
func setRateLimitHeaders(h http.Header, info *httpapi.Record, d *limits.Decision) {
	limit, remaining, resetIn := max(0, d.Limit), max(0, d.Remaining), max(0, d.ResetIn)
	// The four varying values are written into one string, one
	// allocation, and set by key as textproto canonicalises them
	// (X-Ratelimit-Limit), to skip that.
	var buf [128]byte
	b := strconv.AppendInt(buf[:0], limit, 10)
	endLimit := len(b)
	b = strconv.AppendInt(b, remaining, 10)
	endRemaining := len(b)
	b = strconv.AppendInt(b, d.Reset.Unix(), 10)
	endReset := len(b)
	b = append(b, '"')
	b = append(b, d.Window...)
	b = append(b, `";r=`...)
	b = strconv.AppendInt(b, remaining, 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, int64(resetIn/time.Second), 10)
	all := string(b)
	h["X-Ratelimit-Limit"] = info.HeaderValue(all[:endLimit])
	h["X-Ratelimit-Remaining"] = info.HeaderValue(all[endLimit:endRemaining])
	h["X-Ratelimit-Reset"] = info.HeaderValue(all[endRemaining:endReset])
	h["Ratelimit-Policy"] = info.HeaderValue(d.Policy)
	h["Ratelimit"] = info.HeaderValue(all[endReset:])
}
