package main

import (
	"context"
	"time"

	"petstore/internal/domain"
	"petstore/internal/webhook"
)

// What the webhooks commands and the admin API share: the rules of an
// endpoint's terms, and how endpoints and deliveries are shown (--json and
// the admin API's bodies alike).

// defaultWebhookOverlap is how long the old secret signs beside the new
// one after a rotation, unless told otherwise.
const defaultWebhookOverlap = 24 * time.Hour

// newEndpointTerms checks an endpoint's URL and event types; a problem is
// invalid, naming the field (url, events).
func newEndpointTerms(url string, events []string) (webhookEndpoint, error) {
	if problem := webhook.URLProblem(url); problem != "" {
		return webhookEndpoint{}, domain.Invalid("%s", problem)
	}
	types, err := parseEventTypes(events)
	if err != nil {
		return webhookEndpoint{}, domain.Invalid("%v", err)
	}
	return webhookEndpoint{URL: url, Events: types, Secret: webhook.NewSecret(), Enabled: true}, nil
}

// webhookAuditEvent is the audit event of action on endpoint e, by actor
// of env.
func webhookAuditEvent(action string, e webhookEndpoint, actor, env string, at time.Time, why string) domain.AuditEvent {
	return domain.AuditEvent{At: domain.AuditTime(at), Action: action, Actor: actor, Env: env, Details: domain.AuditDetails{
		WebhookID: e.ID, URL: webhook.ShownURL(e.URL), Events: e.Events, Reason: why,
	}}
}

// queueTest queues a webhook.test event for endpoint id and returns it.
func queueTest(ctx context.Context, store webhookStorage, id int64, actor string, now time.Time) (webhookEvent, error) {
	ev, err := newWebhookEvent(webhookTestEvent, now, map[string]any{"webhookId": id, "actor": actor})
	if err != nil {
		return ev, err
	}
	return ev, store.AddWebhookEvent(ctx, ev, id)
}

// listedEndpoint is an endpoint as webhooks list and the admin API show
// it: never its secret.
type listedEndpoint struct {
	ID          int64      `json:"id"`
	URL         string     `json:"url"`
	Events      []string   `json:"events"` // empty: every type
	Enabled     bool       `json:"enabled"`
	Created     time.Time  `json:"created"`
	LastAttempt *time.Time `json:"lastAttempt"`
	LastStatus  *int       `json:"lastStatus"` // the last answer's HTTP status; null: never tried, 0: no answer
	LastError   string     `json:"lastError,omitempty"`
	// RotationEnds: while the previous secret still signs, until when.
	RotationEnds *time.Time `json:"rotationEnds,omitempty"`
}

func (e webhookEndpoint) listed(now time.Time) listedEndpoint {
	l := listedEndpoint{
		ID: e.ID, URL: e.URL, Events: e.Events, Enabled: e.Enabled, Created: e.CreatedAt,
		LastAttempt: domain.TimeOrNil(e.LastAttempt), LastError: e.LastError,
	}
	if l.Events == nil {
		l.Events = []string{}
	}
	if !e.LastAttempt.IsZero() {
		status := e.LastStatus
		l.LastStatus = &status
	}
	if e.PreviousSecret != "" && now.Before(e.PreviousUntil) {
		l.RotationEnds = domain.TimeOrNil(e.PreviousUntil)
	}
	return l
}

// listedDelivery is a delivery as webhooks deliveries and the admin API
// show it.
type listedDelivery struct {
	EventID     string     `json:"eventId"`
	Type        string     `json:"type"`
	EndpointID  int64      `json:"endpointId"`
	At          time.Time  `json:"at"`
	State       string     `json:"state"`
	Attempts    int        `json:"attempts"`
	NextAttempt *time.Time `json:"nextAttempt"`
	LastAttempt *time.Time `json:"lastAttempt"`
	LastStatus  *int       `json:"lastStatus"`
	LastError   string     `json:"lastError,omitempty"`
}

func (d webhookDelivery) listed() listedDelivery {
	l := listedDelivery{
		EventID: d.EventID, Type: d.Type, EndpointID: d.EndpointID, At: d.At, State: d.State, Attempts: d.Attempts,
		LastAttempt: domain.TimeOrNil(d.LastAttempt), LastError: d.LastError,
	}
	if d.State == deliveryPending {
		l.NextAttempt = domain.TimeOrNil(d.NextAt)
	}
	if !d.LastAttempt.IsZero() {
		status := d.LastStatus
		l.LastStatus = &status
	}
	return l
}
