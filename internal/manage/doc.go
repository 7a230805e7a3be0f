// Package manage is what the company that runs the API does to it, written
// once for its two front ends, the command line and the admin API: minting
// a key on its terms, the rules of a key's name, expiry, overlap and
// externalId, the usage reports, the audit trail's filters, the webhooks'
// endpoint terms, and how keys, bans, endpoints and audit events are shown
// (--json and the admin API's bodies alike).
//
// It imports the domain, the limits (for the day of a usage count) and the
// webhooks (for an endpoint's URL rule and secret); never the store, whose
// parts it reaches through the domain's interfaces.
package manage
