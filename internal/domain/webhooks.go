package domain

// Webhook audit actions (with webhookId in their details).
const (
	AuditWebhookAdded    = "webhook.added"
	AuditWebhookRemoved  = "webhook.removed"
	AuditWebhookRotated  = "webhook.rotated"
	AuditWebhookEnabled  = "webhook.enabled"
	AuditWebhookDisabled = "webhook.disabled"
)
