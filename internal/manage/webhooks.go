package manage

import (
	"context"
	"time"

	"petstore/internal/domain"
	"petstore/internal/webhook"
)

// DefaultWebhookOverlap is how long the old secret signs beside the new
// one after a rotation, unless told otherwise.
const DefaultWebhookOverlap = 24 * time.Hour

// NewEndpointTerms checks an endpoint's URL and event types; a problem is
// invalid, naming the field (url, events).
func NewEndpointTerms(url string, events []string) (domain.WebhookEndpoint, error) {
	if problem := webhook.URLProblem(url); problem != "" {
		return domain.WebhookEndpoint{}, domain.Invalid("%s", problem)
	}
	types, err := domain.ParseEventTypes(events)
	if err != nil {
		return domain.WebhookEndpoint{}, domain.Invalid("%v", err)
	}
	return domain.WebhookEndpoint{URL: url, Events: types, Secret: webhook.NewSecret(), Enabled: true}, nil
}

// QueueTest queues a webhook.test event for endpoint id and returns it.
func QueueTest(ctx context.Context, store domain.WebhookStorage, id int64, actor string, now time.Time) (domain.WebhookEvent, error) {
	ev, err := domain.NewWebhookEvent(domain.WebhookTestEvent, now, map[string]any{"webhookId": id, "actor": actor})
	if err != nil {
		return ev, err
	}
	return ev, store.AddWebhookEvent(ctx, ev, id)
}

// ListedEndpoints are endpoints as webhooks list --json and the admin API
// show them.
func ListedEndpoints(endpoints []domain.WebhookEndpoint, now time.Time) []domain.ListedEndpoint {
	return Listed(endpoints, func(e domain.WebhookEndpoint) domain.ListedEndpoint { return e.Listed(now) })
}
