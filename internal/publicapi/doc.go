// Package publicapi is the pet store's API under /v1 on the public listener
// (docs/api.md): the handlers of the pets, of the rate limit read without
// spending it and of the orders not served yet; and the steps a request
// takes to them: its API key found (Authenticate), counted against its
// limits (Limit, with the rate-limit headers and the 429), refused without
// a key (RequireKey) or without the route's scope (RequireScope), and a
// createPet made safe to retry by its Idempotency-Key (idempotency.go).
// Its routes, and the order of the steps, are written in
// internal/server's routes.go beside the admin API's, so a request's path
// reads from one file.
//
// What it answers with is internal/httpapi's (the record, the errors, the
// body decoder); the pets it reads and creates are internal/petcopy's copy.
package publicapi
