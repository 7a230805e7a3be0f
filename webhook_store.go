package main

import (
	"context"
	"time"

	"petstore/internal/webhook"
)

// webhookStorage is where webhooks live: the endpoints, the outbox of
// events and their deliveries, and the marks that make each notice once.
// Every change to an endpoint is stored with its audit event (by actor, of
// env), as one change; an unknown endpoint id is not_found.
type webhookStorage interface {
	// AddWebhookEndpoint stores e (URL, Events, Secret) enabled, with its
	// webhook.added event, and returns it with its id.
	AddWebhookEndpoint(ctx context.Context, e webhookEndpoint, actor, env string) (webhookEndpoint, error)
	// WebhookEndpoints returns every endpoint, oldest first.
	WebhookEndpoints(ctx context.Context) ([]webhookEndpoint, error)
	// RemoveWebhookEndpoint deletes endpoint id and its deliveries, with its
	// webhook.removed event.
	RemoveWebhookEndpoint(ctx context.Context, id int64, actor, env string) error
	// RotateWebhookSecret gives endpoint id secret; the one it had signs
	// beside it for overlap.
	RotateWebhookSecret(ctx context.Context, id int64, secret string, overlap time.Duration, actor, env string) (webhookEndpoint, error)
	// EnableWebhookEndpoint enables endpoint id (webhook.enabled); enabling
	// an enabled one changes nothing and writes no event.
	EnableWebhookEndpoint(ctx context.Context, id int64, actor, env string) (webhookEndpoint, error)
	// AddWebhookEvent queues ev for endpoint id alone (webhook.test), even
	// when it is disabled.
	AddWebhookEvent(ctx context.Context, ev webhookEvent, endpointID int64) error
	// AddWebhookNotices stores each notice's mark and queues its event for
	// the endpoints that take it, unless the mark is stored already.
	AddWebhookNotices(ctx context.Context, notices []webhookNotice) error
	// ClaimWebhookDeliveries claims, until now+claimFor, up to limit due
	// deliveries of enabled endpoints not in skip that take accepts, the
	// longest due first; no other server claims them meanwhile, and no
	// endpoint has more than maxInFlightPerEndpoint live claims of all the
	// servers'.
	ClaimWebhookDeliveries(ctx context.Context, now time.Time, claimFor time.Duration, skip []int64, limit int,
		take func(endpointID int64) bool) ([]claimedDelivery, error)
	// FinishWebhookDelivery records an attempt's outcome, and what it does
	// to its endpoint: a 410 disables it, as does failing every delivery
	// for failingDisableAfter (each with webhook.disabled by actor).
	// disabled says why the endpoint was disabled, "" when it was not.
	FinishWebhookDelivery(ctx context.Context, o deliveryOutcome, actor, env string) (disabled string, err error)
	// WebhookDeliveries returns the deliveries f picks, newest first.
	WebhookDeliveries(ctx context.Context, f deliveryFilter) ([]webhookDelivery, error)
	// ResendWebhookDeliveries queues again, at now, the deliveries f picks
	// (those of f.EventID, or the failed ones); it returns how many.
	ResendWebhookDeliveries(ctx context.Context, f deliveryFilter, now time.Time) (int64, error)
	// PruneWebhooks forgets, at now, what is no longer needed: the marks
	// of past days' quota notices, and deliveries long over.
	PruneWebhooks(ctx context.Context, now time.Time) error
	// WebhookBacklog counts the deliveries waiting for enabled endpoints,
	// and tells when the oldest of their events happened.
	WebhookBacklog(ctx context.Context) (waiting int64, oldest time.Time, err error)
}

// webhookEndpoint is a receiver of events. Its secrets sign; they are
// never shown but when made.
type webhookEndpoint struct {
	ID        int64
	URL       string
	Events    []string // the types it takes; empty: all
	Enabled   bool
	CreatedAt time.Time
	Secret    string
	// PreviousSecret signs beside Secret until PreviousUntil, after a
	// rotation.
	PreviousSecret string
	PreviousUntil  time.Time
	// LastStatus is the status of the last attempt's answer (0: none came),
	// LastError why it failed; LastAttempt zero: never tried.
	LastAttempt time.Time
	LastStatus  int
	LastError   string
}

// signingKeys are the HMAC keys of e's secrets at now: the current one,
// and the previous one during a rotation's overlap.
func (e webhookEndpoint) signingKeys(now time.Time) ([][]byte, error) {
	key, err := webhook.SecretKey(e.Secret)
	if err != nil {
		return nil, err
	}
	keys := [][]byte{key}
	if e.PreviousSecret != "" && now.Before(e.PreviousUntil) {
		previous, err := webhook.SecretKey(e.PreviousSecret)
		if err != nil {
			return nil, err
		}
		keys = append(keys, previous)
	}
	return keys, nil
}

// webhookDelivery is one event's delivery to one endpoint.
type webhookDelivery struct {
	EventID     string
	Type        string
	EndpointID  int64
	At          time.Time // when the event happened
	State       string    // pending, delivered or failed
	Attempts    int
	NextAt      time.Time // pending: when the next attempt is due
	LastAttempt time.Time // zero: none yet
	LastStatus  int       // the last answer's status; 0: none came
	LastError   string
}

// claimedDelivery is a delivery this server claimed, with what it takes to
// send it.
type claimedDelivery struct {
	webhookDelivery
	URL  string
	Keys [][]byte
	Body []byte
}

// deliveryOutcome is what an attempt came to.
type deliveryOutcome struct {
	EventID    string
	EndpointID int64
	Attempts   int // made so far, this one included
	At         time.Time
	State      string    // pending (to be retried at NextAt), delivered or failed
	NextAt     time.Time // pending only
	Status     int
	Err        string
	Disable    string // why to disable the endpoint (a 410), or ""
}

// deliveryFilter picks deliveries: of EndpointID (0: any), of EventID (""
// any), only the failed ones.
type deliveryFilter struct {
	EndpointID int64
	EventID    string
	Failed     bool
	Limit      int // 0: no limit
}
