// Package limits is the rate limiting: the limit rules written once
// (limitRules, state, now and figures in; state and answer out), the
// in-process limiter around golang.org/x/time/rate buckets (Local), the same
// rules in Redis (limit.lua, embedded, and its runner, which batches script
// runs), the leases of tokens, the usage ledger that carries each key's day
// counts to the database, and the ban floor the rules take from the
// database and from Redis's answers.
//
// It imports only the domain and the batcher: never the store or the
// webhooks, whose parts it reaches through the domain's interfaces and
// plain functions. The HTTP side is the root's (the middleware, the headers,
// GET /v1/rate_limit) and internal/httpapi's (the 429, the status body).
package limits
