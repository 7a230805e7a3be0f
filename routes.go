package main

import (
	"net/http"
	"net/http/pprof"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The whole HTTP surface in one place: every route of the public listener
// (newServer) and of the admin listener (newAdminServer), with what a caller
// needs and the steps a request takes on the way to its handler.

// middleware is one step on a request's way to its handler.
type middleware = func(http.Handler) http.Handler

// chain is h behind steps, the first outermost: read the steps left to right
// as the path a request takes.
func chain(h http.Handler, steps ...middleware) http.Handler {
	for i := len(steps) - 1; i >= 0; i-- {
		h = steps[i](h)
	}
	return h
}

// access is the way into a route of the API. Each starts as DESIGN.md's
// order of checks asks: look up the key, then count the request against it,
// or, without a valid key, against the client address.
type access uint8

const (
	// withKey: a valid key (else 401) that holds the route's scope (else 403).
	//   authenticate, limit, requireKey, requireScope(need), handler
	withKey access = iota
	// peeksKey: as withKey, except that a request withKey would let
	// through is not counted: the handler reports the key's rate limits
	// without spending any.
	//   authenticate, uncounted(need): the handler, or as withKey
	peeksKey
	// keyless: no key needed; the request is counted all the same.
	//   authenticate, limit, handler
	keyless

	// The admin API's (on the admin listener):
	// withAdminToken: a valid admin token (else 401, or 429 once the
	// client address failed too often) that holds the route's admin scope
	// (else 403).
	//   adminGate.require(need), handler
	withAdminToken
	// open: nothing asked; its own document.
	//   handler
	open
)

// route is a route of the API: a ServeMux pattern, the way in, the scope a
// key needs (noScope: any valid key), and the handler.
type route struct {
	pattern string
	access  access
	need    scopeSet
	handler http.Handler
}

// apiRoutes are the routes under /v1. The store's orders are not served:
// any valid key is told so (501), and their own scope will come with them.
func apiRoutes(a *app) []route {
	return []route{
		{"GET /v1/pets", withKey, scopePetsRead, handleListPets(a.pets, &pageCache{})},
		{"POST /v1/pets", withKey, scopePetsWrite, handleCreatePet(a.pets, a.idem, a.now)},
		{"GET /v1/pets/{petId}", withKey, scopePetsRead, deprecated(handleGetPet(a.pets))},
		{"GET /v1/store/orders", withKey, noScope, handleNotImplemented()},
		{"GET /v1/rate_limit", peeksKey, scopePetsRead, handleRateLimit(a.limiter)},
		{"GET /v1/openapi.yaml", keyless, noScope, handleOpenAPI()},

		// Another method on those paths is a 405 with Allow, any other
		// path a 404, each after the key and its limit.
		{"/v1/pets", withKey, noScope, methodNotAllowed("GET, HEAD, POST")},
		{"/v1/pets/{petId}", withKey, noScope, methodNotAllowed("GET, HEAD")},
		{"/v1/store/orders", withKey, noScope, methodNotAllowed("GET, HEAD")},
		{"/v1/rate_limit", withKey, noScope, methodNotAllowed("GET, HEAD")},
		{"/v1/openapi.yaml", withKey, noScope, methodNotAllowed("GET, HEAD")},
		{"/v1/", withKey, noScope, notFound()},
		{"/v1", withKey, noScope, notFound()},
	}
}

// newServer is the public listener's handler. Every request passes
// logRequests first: its record, its id, its log line and metrics, a 500
// for a panic.
func newServer(a *app) http.Handler {
	mux := http.NewServeMux()
	authenticated, limited := authenticate(a.keys, a.limiter, a.trustProxy), limit(a.limiter, a.audit, a.quota, a.trustProxy)
	for _, rt := range apiRoutes(a) {
		scoped := requireScope(rt.need)
		switch rt.access {
		case withKey:
			mux.Handle(rt.pattern, chain(rt.handler, authenticated, limited, requireKey, scoped))
		case peeksKey:
			counted := chain(rt.handler, limited, requireKey, scoped)
			mux.Handle(rt.pattern, chain(uncounted(rt.need, rt.handler, counted), authenticated))
		case keyless:
			mux.Handle(rt.pattern, chain(rt.handler, authenticated, limited))
		}
	}

	// Outside the API: no key, no limit.
	mux.Handle("GET /healthz", handleHealth())
	mux.Handle("GET /readyz", handleReady(a.store, a.draining))
	mux.Handle("/healthz", methodNotAllowed("GET, HEAD"))
	mux.Handle("/readyz", methodNotAllowed("GET, HEAD"))
	addDocsRoutes(mux)
	mux.Handle("/admin/v1/", adminElsewhere())
	mux.Handle("/admin/v1", adminElsewhere())
	mux.Handle("/", notFound())

	return chain(mux, logRequests(a.logger, a.metrics), closeWhileDraining(a.draining))
}

// closeWhileDraining: during --shutdown-delay each answer carries
// Connection: close, so a keep-alive client, or a load balancer's pooled
// connection, moves on after it. Idle connections are left open until the
// drain ends: closed at once, one could vanish under a request its client
// had just sent (EOF, which no client may retry for a POST).
func closeWhileDraining(draining *atomic.Bool) middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if draining.Load() {
				w.Header().Set("Connection", "close")
			}
			next.ServeHTTP(w, r)
		})
	}
}

// adminRoutes are the routes of the admin API under /admin/v1 (admin_api.go),
// each with the admin scope its token needs. A group of routes with a
// scope of its own is a line each here.
func adminRoutes(a *app) []route {
	d := adminDeps{store: a.store, now: a.now, limiter: a.limiter, webhookGuard: a.webhookGuard, storeBans: a.storeBans}
	return []route{
		{"GET /admin/v1/openapi.yaml", open, noScope, handleDocument(adminOpenAPIYAML)},
		{"GET /admin/v1/whoami", withAdminToken, noScope, handleAdminWhoami()},
		{"POST /admin/v1/keys", withAdminToken, scopeKeysWrite, handleAdminCreateKey(d, a.env)},
		{"GET /admin/v1/keys", withAdminToken, scopeKeysRead, handleAdminListKeys(d)},
		{"GET /admin/v1/keys/{id}", withAdminToken, scopeKeysRead, handleAdminGetKey(d)},
		{"PATCH /admin/v1/keys/{id}", withAdminToken, scopeKeysWrite, handleAdminUpdateKey(d)},
		{"POST /admin/v1/keys/{id}/roll", withAdminToken, scopeKeysWrite, handleAdminRollKey(d)},
		{"POST /admin/v1/keys/{id}/revoke", withAdminToken, scopeKeysWrite, handleAdminRevokeKey(d)},
		{"GET /admin/v1/keys/{id}/usage", withAdminToken, scopeKeysRead, handleAdminKeyUsage(d)},
		{"GET /admin/v1/keys/{id}/limits", withAdminToken, scopeKeysRead, handleAdminKeyLimits(d)},
		{"GET /admin/v1/audit", withAdminToken, scopeAuditRead, handleAdminAudit(d)},
		{"GET /admin/v1/bans", withAdminToken, scopeKeysRead, handleAdminListBans(d)},
		{"DELETE /admin/v1/bans/{subject}", withAdminToken, scopeKeysWrite, handleAdminLiftBan(d, a.env)},
		{"GET /admin/v1/webhooks", withAdminToken, scopeWebhooks, handleAdminListWebhooks(d)},
		{"POST /admin/v1/webhooks", withAdminToken, scopeWebhooks, handleAdminAddWebhook(d, a.env)},
		{"DELETE /admin/v1/webhooks/{id}", withAdminToken, scopeWebhooks, handleAdminRemoveWebhook(d, a.env)},
		{"POST /admin/v1/webhooks/{id}/rotate", withAdminToken, scopeWebhooks, handleAdminRotateWebhook(d, a.env)},
		{"POST /admin/v1/webhooks/{id}/enable", withAdminToken, scopeWebhooks, handleAdminEnableWebhook(d, a.env)},
		{"POST /admin/v1/webhooks/{id}/test", withAdminToken, scopeWebhooks, handleAdminTestWebhook(d)},
		{"GET /admin/v1/webhooks/{id}/deliveries", withAdminToken, scopeWebhooks, handleAdminWebhookDeliveries(d)},
		{"POST /admin/v1/webhooks/{id}/resend", withAdminToken, scopeWebhooks, handleAdminResendWebhook(d)},

		// Another method on those paths is a 405 with Allow, any other
		// path a 404, each after the token.
		{"/admin/v1/openapi.yaml", open, noScope, methodNotAllowed("GET, HEAD")},
		{"/admin/v1/whoami", withAdminToken, noScope, methodNotAllowed("GET, HEAD")},
		{"/admin/v1/keys", withAdminToken, noScope, methodNotAllowed("GET, HEAD, POST")},
		{"/admin/v1/keys/{id}", withAdminToken, noScope, methodNotAllowed("GET, HEAD, PATCH")},
		{"/admin/v1/keys/{id}/roll", withAdminToken, noScope, methodNotAllowed("POST")},
		{"/admin/v1/keys/{id}/revoke", withAdminToken, noScope, methodNotAllowed("POST")},
		{"/admin/v1/keys/{id}/usage", withAdminToken, noScope, methodNotAllowed("GET, HEAD")},
		{"/admin/v1/keys/{id}/limits", withAdminToken, noScope, methodNotAllowed("GET, HEAD")},
		{"/admin/v1/audit", withAdminToken, noScope, methodNotAllowed("GET, HEAD")},
		{"/admin/v1/bans", withAdminToken, noScope, methodNotAllowed("GET, HEAD")},
		{"/admin/v1/bans/{subject}", withAdminToken, noScope, methodNotAllowed("DELETE")},
		{"/admin/v1/webhooks", withAdminToken, noScope, methodNotAllowed("GET, HEAD, POST")},
		{"/admin/v1/webhooks/{id}", withAdminToken, noScope, methodNotAllowed("DELETE")},
		{"/admin/v1/webhooks/{id}/rotate", withAdminToken, noScope, methodNotAllowed("POST")},
		{"/admin/v1/webhooks/{id}/enable", withAdminToken, noScope, methodNotAllowed("POST")},
		{"/admin/v1/webhooks/{id}/test", withAdminToken, noScope, methodNotAllowed("POST")},
		{"/admin/v1/webhooks/{id}/deliveries", withAdminToken, noScope, methodNotAllowed("GET, HEAD")},
		{"/admin/v1/webhooks/{id}/resend", withAdminToken, noScope, methodNotAllowed("POST")},
		{"/admin/v1/", withAdminToken, noScope, notFound()},
		{"/admin/v1", withAdminToken, noScope, notFound()},
	}
}

// newAdminServer is the admin listener's handler: the metrics and the
// profiles (with metrics), and the admin API, whose requests pass
// logRequests as the public API's do; each only for a Host of the admin
// listener's own (requireAdminHost). None of it is ever served on the
// public listener.
func newAdminServer(a *app) http.Handler {
	api := http.NewServeMux()
	gate := &adminGate{store: a.store, env: a.env, failures: a.adminFailures, metrics: a.metrics}
	for _, rt := range adminRoutes(a) {
		switch rt.access {
		case withAdminToken:
			api.Handle(rt.pattern, chain(rt.handler, gate.require(rt.need)))
		case open:
			api.Handle(rt.pattern, rt.handler)
		}
	}
	logged := chain(api, logRequests(a.logger, a.metrics), noStore)

	mux := http.NewServeMux()
	mux.Handle("/admin/v1/", logged)
	mux.Handle("/admin/v1", logged)
	console := http.NewServeMux()
	addConsoleRoutes(console)
	mux.Handle("/console/", chain(console, logRequests(a.logger, a.metrics)))
	mux.Handle("/console", chain(console, logRequests(a.logger, a.metrics)))
	if a.metrics != nil {
		mux.Handle("/", metricsHandler(a.metrics))
	}
	return chain(mux, requireAdminHost(a.adminHosts))
}

// metricsHandler serves the metrics and the profiles. /debug/pprof/cmdline
// is left out: the command line may hold a database URL with its password.
func metricsHandler(m *metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("petstore admin: GET /metrics (Prometheus), /debug/pprof/ (profiles), /admin/v1/ (the admin API, docs/admin.md), /console/ (the owner's console)\n"))
	})
	return mux
}
