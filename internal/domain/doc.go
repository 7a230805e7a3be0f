// Package domain is the pet store's own vocabulary, at the bottom of the
// code: pets, API keys (their format's rules, plans and figures, scopes,
// names, the key rules) and admin tokens, the audit trail's events and
// action names, bans and the subjects they name, usage counts and days, and
// the errors of the domain, which carry a kind (not found, invalid,
// malformed, conflict, unavailable and why, unsure) and never an HTTP
// status: internal/httpapi/errors.go is the one table from kinds to
// statuses and client text.
//
// It also holds the interfaces of storage, one small one per aggregate, and
// the value types that several parts pass between them, so that the store,
// the limits and the webhooks each import this package and never each
// other.
//
// It imports only the standard library: nothing of the project.
package domain
