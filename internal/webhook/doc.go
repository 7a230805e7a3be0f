// Package webhook sends the service's notices as Standard Webhooks 1.0
// (docs/webhooks.md): the endpoints' secrets, the signature, one attempt
// over a bounded HTTP client whose guard refuses the local network at dial
// time (after DNS), and when to try again.
//
// Of the project it imports only the domain (the endpoints' secrets and
// URLs as they may be shown): the worker that claims deliveries from the
// store's outbox hands it each attempt.
package webhook
