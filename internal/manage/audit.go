package manage

import (
	"context"
	"slices"
	"strings"
	"time"

	"petstore/internal/domain"
	"petstore/internal/webhook"
)

// The audit trail, and the webhooks that send its events (an endpoint's
// terms, a test event).

// CheckAuditAction refuses an action the trail does not know, given as
// field ("": any).
func CheckAuditAction(field, action string) error {
	if action != "" && !slices.Contains(domain.AuditActions, action) {
		return domain.Invalid("%s: unknown action %q; the actions are %s", field, action, strings.Join(domain.AuditActions, ", "))
	}
	return nil
}

// AuditSince reads since, given as field: a duration back from now or an
// RFC 3339 time; the zero time when not given.
func AuditSince(field, since string, given bool, now time.Time) (time.Time, error) {
	if since == "" && !given {
		return time.Time{}, nil
	}
	if at, err := time.Parse(time.RFC3339, since); err == nil {
		return at, nil
	}
	d, err := domain.ParseLifetime(since)
	if err != nil || d <= 0 {
		return time.Time{}, domain.Invalid("%s must be a duration back from now (24h, 7d, 30m) or an RFC 3339 time (2026-03-01T00:00:00Z), not %q", field, since)
	}
	return now.Add(-d), nil
}

// AuditTimeFormat shows an event's time: UTC, to the millisecond.
const AuditTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// AuditJSON is an event as audit --json shows it.
type AuditJSON struct {
	ID       int64               `json:"id"`
	Time     string              `json:"time"` // UTC, to the millisecond
	Action   string              `json:"action"`
	Actor    string              `json:"actor"`
	KeyID    *int64              `json:"keyId"`    // null for an address's ban and a copy
	NewKeyID *int64              `json:"newKeyId"` // key.rolled: the new key
	Address  *string             `json:"address"`  // key.banned of a client address
	Env      string              `json:"env"`
	Details  domain.AuditDetails `json:"details"`
}

// AuditJSONOf is events as audit --json and GET /admin/v1/audit show them.
func AuditJSONOf(events []domain.AuditEvent) []AuditJSON {
	out := make([]AuditJSON, len(events))
	for i, e := range events {
		out[i] = AuditJSON{
			ID: e.ID, Time: e.At.Format(AuditTimeFormat), Action: e.Action, Actor: e.Actor,
			KeyID: idOrNil(e.KeyID), NewKeyID: idOrNil(e.NewKeyID), Env: e.Env, Details: e.Details,
		}
		if e.Address != "" {
			out[i].Address = &e.Address
		}
	}
	return out
}

func idOrNil(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}

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

// QueueTest queues a webhook.test event for endpoint id of env and returns
// it.
func QueueTest(ctx context.Context, store domain.WebhookEndpointStore, env string, id int64, actor string, now time.Time) (domain.WebhookEvent, error) {
	ev, err := domain.NewWebhookEvent(domain.WebhookTestEvent, now, map[string]any{"webhookId": id, "actor": actor})
	if err != nil {
		return ev, err
	}
	return ev, store.AddWebhookEvent(ctx, ev, id, env)
}

// ListedEndpoints are endpoints as webhooks list --json and the admin API
// show them.
func ListedEndpoints(endpoints []domain.WebhookEndpoint, now time.Time) []domain.ListedEndpoint {
	return Listed(endpoints, func(e domain.WebhookEndpoint) domain.ListedEndpoint { return e.Listed(now) })
}
