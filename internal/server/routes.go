package server

import (
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"sync/atomic"

	"petstore/internal/adminapi"
	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/metrics"
	"petstore/internal/petcopy"
)

// The whole HTTP surface in one place: every route of the public listener
// (newServer) and of the admin listener (newAdminServer), with what a caller
// needs and the steps a request takes on the way to its handler.

// chain is h behind steps, the first outermost: read the steps left to right
// as the path a request takes.
func chain(h http.Handler, steps ...httpapi.Middleware) http.Handler {
	for i := len(steps) - 1; i >= 0; i-- {
		h = steps[i](h)
	}
	return h
}

// access is the way into a route of the API. Each starts as docs/api.md#errors
// orders the checks: look up the key, then count the request against it,
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
	//   adminapi.Gate.Require(need), handler
	withAdminToken
	// open: nothing asked; its own document.
	//   handler
	open
)

// route is a route of the API: a ServeMux pattern, the way in, the scope a
// key needs (domain.NoScope: any valid key), and the handler.
type route struct {
	pattern string
	access  access
	need    domain.ScopeSet
	handler http.Handler
}

// apiRoutes are the routes under /v1. The store's orders are not served:
// any valid key is told so (501), and their own scope will come with them.
func apiRoutes(a *App) []route {
	return withOtherMethods("/v1", withKey, []route{
		{"GET /v1/pets", withKey, domain.ScopePetsRead, handleListPets(a.pets, &petcopy.Pages{})},
		{"POST /v1/pets", withKey, domain.ScopePetsWrite, handleCreatePet(a.pets, a.idem, a.now)},
		{"GET /v1/pets/{petId}", withKey, domain.ScopePetsRead, deprecated(handleGetPet(a.pets))},
		{"GET /v1/store/orders", withKey, domain.NoScope, handleNotImplemented()},
		{"GET /v1/rate_limit", peeksKey, domain.ScopePetsRead, handleRateLimit(a.limiter)},
		{"GET /v1/openapi.yaml", keyless, domain.NoScope, handleDocument(a.openapi)},
	})
}

// withOtherMethods adds to routes, all under root, the answers to the
// requests none of them takes: another method on one of their paths is a
// 405 whose Allow lists the methods routed there (HEAD wherever GET is), any
// other path under root a 404; each behind guard, except on an open path.
func withOtherMethods(root string, guard access, routes []route) []route {
	allow, opened := map[string][]string{}, map[string]bool{}
	var paths []string
	for _, rt := range routes {
		method, path, _ := strings.Cut(rt.pattern, " ")
		if allow[path] == nil {
			paths = append(paths, path)
		}
		if allow[path] = append(allow[path], method); method == http.MethodGet {
			allow[path] = append(allow[path], http.MethodHead)
		}
		opened[path] = rt.access == open
	}
	for _, path := range paths {
		way := guard
		if opened[path] {
			way = open
		}
		routes = append(routes, route{path, way, domain.NoScope, httpapi.MethodNotAllowed(strings.Join(slices.Sorted(slices.Values(allow[path])), ", "))})
	}
	return append(routes, route{root + "/", guard, domain.NoScope, httpapi.NotFound()}, route{root, guard, domain.NoScope, httpapi.NotFound()})
}

// newServer is the public listener's handler; every request passes
// httpapi.LogRequests first.
func newServer(a *App) http.Handler {
	mux := http.NewServeMux()
	authenticated, limited := authenticate(a.keys, a.limiter, a.trustProxy), limit(a.limiter, a.startedBans, a.quota, a.trustProxy)
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
	mux.Handle("/healthz", httpapi.MethodNotAllowed("GET, HEAD"))
	mux.Handle("/readyz", httpapi.MethodNotAllowed("GET, HEAD"))
	addDocsRoutes(mux, a.files, a.openapi)
	mux.Handle("/admin/v1/", adminElsewhere())
	mux.Handle("/admin/v1", adminElsewhere())
	mux.Handle("/", httpapi.NotFound())

	return chain(mux, httpapi.LogRequests(a.logger, a.metrics, a.tracer), closeWhileDraining(a.draining))
}

// closeWhileDraining: during --shutdown-delay each answer carries
// Connection: close, so a keep-alive client, or a load balancer's pooled
// connection, moves on after it. Idle connections are left open until the
// drain ends: closed at once, one could vanish under a request its client
// had just sent (EOF, which no client may retry for a POST).
func closeWhileDraining(draining *atomic.Bool) httpapi.Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if draining.Load() {
				w.Header().Set("Connection", "close")
			}
			next.ServeHTTP(w, r)
		})
	}
}

// adminRoutes are the routes of the admin API under /admin/v1
// (internal/adminapi), each with the admin scope its token needs.
func adminRoutes(a *App) []route {
	d := adminapi.Deps{Keys: a.store, Usage: a.store, History: a.store, Audit: a.store, Bans: a.store, Webhooks: a.store, Servers: a.store, Secrets: a.store, Now: a.now, Limiter: a.limiter, WebhookGuard: a.webhookGuard, StoreBans: a.storeBans, Env: a.env}
	return withOtherMethods("/admin/v1", withAdminToken, []route{
		{"GET /admin/v1/openapi.yaml", open, domain.NoScope, handleDocument(a.adminOpenAPI)},
		{"GET /admin/v1/whoami", withAdminToken, domain.NoScope, adminapi.Whoami()},
		{"POST /admin/v1/keys", withAdminToken, domain.ScopeKeysWrite, adminapi.CreateKey(d, a.env)},
		{"GET /admin/v1/keys", withAdminToken, domain.ScopeKeysRead, adminapi.ListKeys(d)},
		{"GET /admin/v1/keys/{id}", withAdminToken, domain.ScopeKeysRead, adminapi.GetKey(d)},
		{"PATCH /admin/v1/keys/{id}", withAdminToken, domain.ScopeKeysWrite, adminapi.UpdateKey(d)},
		{"POST /admin/v1/keys/{id}/roll", withAdminToken, domain.ScopeKeysWrite, adminapi.RollKey(d)},
		{"POST /admin/v1/keys/{id}/revoke", withAdminToken, domain.ScopeKeysWrite, adminapi.RevokeKey(d)},
		{"GET /admin/v1/keys/{id}/usage", withAdminToken, domain.ScopeKeysRead, adminapi.KeyUsage(d)},
		{"GET /admin/v1/keys/{id}/limits", withAdminToken, domain.ScopeKeysRead, adminapi.KeyLimits(d)},
		{"GET /admin/v1/audit", withAdminToken, domain.ScopeAuditRead, adminapi.Audit(d)},
		{"GET /admin/v1/bans", withAdminToken, domain.ScopeKeysRead, adminapi.ListBans(d)},
		{"GET /admin/v1/backup", withAdminToken, domain.ScopeKeysRead, adminapi.Backup(a.backupStatus)},
		{"DELETE /admin/v1/bans/{subject}", withAdminToken, domain.ScopeKeysWrite, adminapi.LiftBan(d, a.env)},
		{"GET /admin/v1/servers", withAdminToken, domain.ScopeKeysRead, adminapi.ListServers(d)},
		{"GET /admin/v1/webhooks", withAdminToken, domain.ScopeWebhooks, adminapi.ListWebhooks(d)},
		{"POST /admin/v1/webhooks", withAdminToken, domain.ScopeWebhooks, adminapi.AddWebhook(d, a.env)},
		{"DELETE /admin/v1/webhooks/{id}", withAdminToken, domain.ScopeWebhooks, adminapi.RemoveWebhook(d, a.env)},
		{"POST /admin/v1/webhooks/{id}/rotate", withAdminToken, domain.ScopeWebhooks, adminapi.RotateWebhook(d, a.env)},
		{"POST /admin/v1/webhooks/{id}/enable", withAdminToken, domain.ScopeWebhooks, adminapi.EnableWebhook(d, a.env)},
		{"POST /admin/v1/webhooks/{id}/test", withAdminToken, domain.ScopeWebhooks, adminapi.TestWebhook(d)},
		{"GET /admin/v1/webhooks/{id}/deliveries", withAdminToken, domain.ScopeWebhooks, adminapi.WebhookDeliveries(d)},
		{"POST /admin/v1/webhooks/{id}/resend", withAdminToken, domain.ScopeWebhooks, adminapi.ResendWebhook(d)},
	})
}

// newAdminServer is the admin listener's handler: the metrics and the
// profiles (with metrics), and the admin API, whose requests pass
// httpapi.LogRequests as the public API's do; each only for a Host of the admin
// listener's own (adminapi.RequireHost). None of it is ever served on the
// public listener.
func newAdminServer(a *App) http.Handler {
	api := http.NewServeMux()
	gate := &adminapi.Gate{Tokens: a.store, Env: a.env, Failures: a.adminFailures, Metrics: a.metrics}
	for _, rt := range adminRoutes(a) {
		switch rt.access {
		case withAdminToken:
			api.Handle(rt.pattern, chain(rt.handler, gate.Require(rt.need)))
		case open:
			api.Handle(rt.pattern, rt.handler)
		}
	}
	logged := chain(api, httpapi.LogRequests(a.logger, a.metrics, a.tracer), adminapi.NoStore, adminapi.SameOrigin)

	mux := http.NewServeMux()
	mux.Handle("/admin/v1/", logged)
	mux.Handle("/admin/v1", logged)
	console := http.NewServeMux()
	addConsoleRoutes(console, a.files)
	mux.Handle("/console/", chain(console, httpapi.LogRequests(a.logger, a.metrics, a.tracer)))
	mux.Handle("/console", chain(console, httpapi.LogRequests(a.logger, a.metrics, a.tracer)))
	if a.metrics != nil {
		mux.Handle("/", metricsHandler(a.metrics))
	}
	return chain(mux, adminapi.RequireHost(a.adminHosts))
}

// metricsHandler serves the metrics and the profiles. /debug/pprof/cmdline
// is left out: the command line may hold a database URL with its password.
func metricsHandler(m *metrics.Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
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
