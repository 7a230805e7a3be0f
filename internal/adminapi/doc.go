// Package adminapi is the owner's HTTP API under /admin/v1, on the admin
// listener only (docs/admin.md): its handlers for keys, usage, limits, the
// audit trail, bans and webhooks; the gate that admits an admin token with
// the route's scope, and the refusal of a Host that is not the listener's
// own (gate.go). Its routes are written in the root's routes.go
// beside the public API's, so a request's path reads from one file.
//
// What it does is the command line's too, written once in internal/manage;
// what it answers with is internal/httpapi's (the record, the errors, the
// body decoder). It imports those, the domain, the keyring (a token's
// failures), the limits, the metrics, the store and the webhooks.
package adminapi
