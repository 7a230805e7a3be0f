package domain

// Webhook audit actions (with webhookId in their details).
const (
	AuditWebhookAdded    = "webhook.added"
	AuditWebhookRemoved  = "webhook.removed"
	AuditWebhookRotated  = "webhook.rotated"
	AuditWebhookEnabled  = "webhook.enabled"
	AuditWebhookDisabled = "webhook.disabled"
)

// MaxInFlightPerEndpoint bounds the attempts all the servers together make
// to one endpoint at once (the claim counts them), so that a receiver that
// hangs holds a few workers, not all of them.
const MaxInFlightPerEndpoint = 4
