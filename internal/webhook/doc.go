// Package webhook sends the service's notices as Standard Webhooks 1.0
// (docs/webhooks.md): the signature, one attempt over a bounded HTTP client
// whose guard refuses the local network at dial time (after DNS), when to
// try again, and the worker that claims due deliveries from the outbox,
// sends them, records what came of each, and queues the keys' expiry
// notices.
//
// Of the project it imports only the domain: the outbox is the domain's
// WebhookOutbox, which the store implements, and the metrics reach it as a
// plain function.
package webhook
