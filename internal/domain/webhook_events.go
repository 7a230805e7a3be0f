package domain

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Webhook event types besides the audit actions sent as they are.
const (
	WebhookQuotaThreshold = "key.quota.threshold"
	WebhookKeyExpiring    = "key.expiring"
	WebhookKeyExpired     = "key.expired"
	WebhookTestEvent      = "webhook.test"
)

// WebhookEventTypes are the types an endpoint may take (--events), in the
// order the docs list them. The key.* audit actions among them are sent
// for each audit event of a key, in the transaction that writes it.
var WebhookEventTypes = slices.Concat(auditActionsSent,
	[]string{WebhookQuotaThreshold, WebhookKeyExpiring, WebhookKeyExpired, WebhookTestEvent})

var auditActionsSent = []string{AuditKeyCreated, AuditKeyUpdated, AuditKeyRevoked, AuditKeyRolled, AuditKeyBanned, AuditBanLifted}

// WebhookEvent is one event as it waits in the outbox: its id (the
// webhook-id of every attempt), type, time and body.
type WebhookEvent struct {
	ID   string
	Type string
	At   time.Time
	Body []byte // {"type", "timestamp", "data"}
	// Cause is the W3C trace context of the request that caused the
	// event, as the outbox keeps it (internal/tracing's Cause), when that
	// is not what queues it: the request that reached a quota threshold or
	// started a ban, stored by the next flush. "": that of what queues it,
	// if any.
	Cause string
}

// NewWebhookEvent is an event of typ at at with data, which never holds a
// key, a token or a hash.
func NewWebhookEvent(typ string, at time.Time, data any) (WebhookEvent, error) {
	at = at.UTC().Truncate(time.Millisecond)
	body, err := json.Marshal(struct {
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Data      any       `json:"data"`
	}{typ, at, data})
	if err != nil {
		return WebhookEvent{}, fmt.Errorf("webhook event %s: %w", typ, err)
	}
	return WebhookEvent{ID: newWebhookEventID(), Type: typ, At: at, Body: body}, nil
}

// newWebhookEventID is a fresh event id: msg_ and 24 random base62
// characters, unique across databases, so that a receiver fed by two
// deployments never takes one event for another.
func newWebhookEventID() string { return string(appendRandomBase62([]byte("msg_"), 24)) }

// AuditWebhookEvent is the webhook event of audit event e, when its action
// is one that is sent and it is about a key (the ban of a client address is
// not: an address is personal data a receiver need not hold). keyName is
// the key's name, for events whose details lack it.
func AuditWebhookEvent(e AuditEvent, keyName string) (WebhookEvent, bool, error) {
	if !SentAsWebhook(e) {
		return WebhookEvent{}, false, nil
	}
	// The details are the audit trail's camelCase object, which never
	// holds a key or a hash; the event names the key first.
	var data map[string]any
	details, err := json.Marshal(e.Details)
	if err == nil {
		err = json.Unmarshal(details, &data)
	}
	if err != nil {
		return WebhookEvent{}, false, err
	}
	if name, ok := data["name"].(string); ok && name != "" {
		keyName = name
	}
	delete(data, "name")
	data["keyId"], data["keyName"] = e.KeyID, keyName
	if e.NewKeyID != 0 {
		data["newKeyId"] = e.NewKeyID
	}
	data["actor"] = e.Actor
	ev, err := NewWebhookEvent(e.Action, e.At, data)
	ev.Cause = e.Cause
	return ev, err == nil, err
}

func SentAsWebhook(e AuditEvent) bool {
	return slices.Contains(auditActionsSent, e.Action) && e.KeyID != 0 && e.Address == ""
}

// ParseEventTypes reads --events (or an admin body's events): known types,
// comma-separated; none means all, but an empty type is refused, not taken
// for all.
func ParseEventTypes(list []string) ([]string, error) {
	var types []string
	for _, item := range list {
		for t := range strings.SplitSeq(item, ",") {
			t = strings.TrimSpace(t)
			if t == "" {
				return nil, fmt.Errorf("events: %q holds an empty event type; name types (%s), or none for all", item, strings.Join(WebhookEventTypes, ", "))
			}
			if !slices.Contains(WebhookEventTypes, t) {
				return nil, fmt.Errorf("events: %q is not an event type (%s)", t, strings.Join(WebhookEventTypes, ", "))
			}
			if !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
	}
	return types, nil
}

// WebhookNotice is an event the server decides on its own, sent once for
// its mark (a budget's day and threshold, a key's expiry): the first
// server to store the mark sends the event, any other finds it stored.
// The mark is kept until ForgetAt, when no server would make the notice
// again.
type WebhookNotice struct {
	Mark     string
	Event    WebhookEvent
	ForgetAt time.Time
	Env      string // of the key it is about: it goes to that environment's endpoints
}

// WebhookStorage is where webhooks live: the owner's side and the worker's.
type WebhookStorage interface {
	WebhookEndpointStore
	WebhookOutbox
}

// WebhookEndpointStore is the owner's side of the webhooks: the endpoints
// and what is shown and resent of their deliveries. Every change to an
// endpoint is stored with its audit event (by actor, of env), as one
// change; an unknown endpoint id is not_found, and so is the id of an
// endpoint of another environment than env.
type WebhookEndpointStore interface {
	// AddWebhookEndpoint stores e (URL, Events, Secret) enabled, of env,
	// with its webhook.added event, and returns it with its id.
	AddWebhookEndpoint(ctx context.Context, e WebhookEndpoint, actor, env string) (WebhookEndpoint, error)
	// WebhookEndpoints returns every endpoint of env, oldest first.
	WebhookEndpoints(ctx context.Context, env string) ([]WebhookEndpoint, error)
	// RemoveWebhookEndpoint deletes endpoint id and its deliveries, with its
	// webhook.removed event.
	RemoveWebhookEndpoint(ctx context.Context, id int64, actor, env string) error
	// RotateWebhookSecret gives endpoint id secret; the one it had signs
	// beside it for overlap.
	RotateWebhookSecret(ctx context.Context, id int64, secret string, overlap time.Duration, actor, env string) (WebhookEndpoint, error)
	// EnableWebhookEndpoint enables endpoint id (webhook.enabled); enabling
	// an enabled one changes nothing and writes no event.
	EnableWebhookEndpoint(ctx context.Context, id int64, actor, env string) (WebhookEndpoint, error)
	// AddWebhookEvent queues ev for endpoint id of env alone
	// (webhook.test), even when it is disabled.
	AddWebhookEvent(ctx context.Context, ev WebhookEvent, endpointID int64, env string) error
	// WebhookDeliveries returns the deliveries f picks (those of f.Env's
	// endpoints), newest first.
	WebhookDeliveries(ctx context.Context, f DeliveryFilter) ([]WebhookDelivery, error)
	// ResendWebhookDeliveries queues again, at now, the deliveries f picks
	// (those of f.EventID, or the failed ones); it returns how many.
	ResendWebhookDeliveries(ctx context.Context, f DeliveryFilter, now time.Time) (int64, error)
}

// WebhookOutbox is the delivery worker's side: the notices it queues, the
// deliveries it claims and finishes, and what is pruned and counted.
type WebhookOutbox interface {
	// AddWebhookNotices stores each notice's mark and queues its event for
	// the endpoints of its Env that take it, unless the mark is stored
	// already.
	AddWebhookNotices(ctx context.Context, notices []WebhookNotice) error
	// ClaimWebhookDeliveries claims, until now+claimFor, up to limit due
	// deliveries of enabled endpoints of env not in skip that take accepts, the
	// longest due first; no other server claims them meanwhile, and no
	// endpoint has more than MaxInFlightPerEndpoint live claims of all the
	// servers'.
	ClaimWebhookDeliveries(ctx context.Context, env string, now time.Time, claimFor time.Duration, skip []int64, limit int,
		take func(endpointID int64) bool) ([]ClaimedDelivery, error)
	// FinishWebhookDelivery records an attempt's outcome, and what it does
	// to its endpoint: a 410 disables it, as does failing every delivery
	// for FailingDisableAfter (each with webhook.disabled by actor, of the
	// endpoint's environment).
	// disabled says why the endpoint was disabled, "" when it was not.
	FinishWebhookDelivery(ctx context.Context, o DeliveryOutcome, actor string) (disabled string, err error)
	// PruneWebhooks forgets, at now, what is no longer needed: the marks
	// of past days' quota notices, and deliveries long over.
	PruneWebhooks(ctx context.Context, now time.Time) error
	// WebhookBacklog counts the deliveries waiting for enabled endpoints
	// of env, and tells when the oldest of their events happened.
	WebhookBacklog(ctx context.Context, env string) (waiting int64, oldest time.Time, err error)
}

// WebhookEndpoint is a receiver of events. Its secrets sign; they are
// never shown but when made.
type WebhookEndpoint struct {
	ID        int64
	Env       string // production or staging: whose events it takes
	URL       string
	Events    []string // the types it takes; empty: all
	Enabled   bool
	CreatedAt time.Time
	Secret    string
	// PreviousSecret signs beside Secret until PreviousUntil (a rotation).
	PreviousSecret string
	PreviousUntil  time.Time
	// LastStatus is the status of the last attempt's answer (0: none came),
	// LastError why it failed; LastAttempt zero: never tried.
	LastAttempt time.Time
	LastStatus  int
	LastError   string
}

// SigningKeys are the HMAC keys of e's secrets at now: the current one,
// and the previous one during a rotation's overlap.
func (e WebhookEndpoint) SigningKeys(now time.Time) ([][]byte, error) {
	key, err := WebhookSecretKey(e.Secret)
	if err != nil {
		return nil, err
	}
	keys := [][]byte{key}
	if e.PreviousSecret != "" && now.Before(e.PreviousUntil) {
		previous, err := WebhookSecretKey(e.PreviousSecret)
		if err != nil {
			return nil, err
		}
		keys = append(keys, previous)
	}
	return keys, nil
}

// WebhookDelivery is one event's delivery to one endpoint.
type WebhookDelivery struct {
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

// ClaimedDelivery is a delivery this server claimed, with what it takes to
// send it.
type ClaimedDelivery struct {
	WebhookDelivery
	URL  string
	Keys [][]byte
	Body []byte
	// Cause is the W3C trace context of the request that caused the
	// event, as the outbox keeps it (internal/tracing's Cause); "" when it
	// was not traced.
	Cause string
}

// DeliveryOutcome is what an attempt came to.
type DeliveryOutcome struct {
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

// DeliveryFilter picks deliveries of the endpoints of Env: of EndpointID
// (0: any), of EventID ("" any), only the failed ones.
type DeliveryFilter struct {
	Env        string
	EndpointID int64
	EventID    string
	Failed     bool
	Limit      int // 0: no limit
}

// FailingDisableAfter: an endpoint that has failed every delivery for
// this long is disabled.
const FailingDisableAfter = 72 * time.Hour

const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

func WebhookAuditEvent(action string, e WebhookEndpoint, actor, env string, at time.Time, why string) AuditEvent {
	return AuditEvent{At: AuditTime(at), Action: action, Actor: actor, Env: env, Details: AuditDetails{
		WebhookID: e.ID, URL: ShownURL(e.URL), Events: e.Events, Reason: why,
	}}
}

func (e WebhookEndpoint) Listed(now time.Time) ListedEndpoint {
	l := ListedEndpoint{
		ID: e.ID, URL: e.URL, Events: e.Events, Enabled: e.Enabled, Created: e.CreatedAt,
		LastAttempt: TimeOrNil(e.LastAttempt), LastStatus: triedStatus(e.LastAttempt, e.LastStatus), LastError: e.LastError,
	}
	if l.Events == nil {
		l.Events = []string{}
	}
	if e.PreviousSecret != "" && now.Before(e.PreviousUntil) {
		l.RotationEnds = TimeOrNil(e.PreviousUntil)
	}
	return l
}

// WebhookSecretPrefix starts every endpoint secret, as Standard Webhooks
// writes them: whsec_ and the key in base64.
const WebhookSecretPrefix = "whsec_"

func WebhookSecretKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, WebhookSecretPrefix))
	if err != nil || len(key) == 0 {
		return nil, errors.New("a webhook secret is not whsec_ and base64")
	}
	return key, nil
}

// ListedEndpoint is an endpoint as webhooks list and the admin API show
// it: never its secret.
type ListedEndpoint struct {
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

// ListedDelivery is a delivery as webhooks deliveries and the admin API
// show it.
type ListedDelivery struct {
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

func (d WebhookDelivery) Listed() ListedDelivery {
	l := ListedDelivery{
		EventID: d.EventID, Type: d.Type, EndpointID: d.EndpointID, At: d.At, State: d.State, Attempts: d.Attempts,
		LastAttempt: TimeOrNil(d.LastAttempt), LastStatus: triedStatus(d.LastAttempt, d.LastStatus), LastError: d.LastError,
	}
	if d.State == DeliveryPending {
		l.NextAttempt = TimeOrNil(d.NextAt)
	}
	return l
}

// triedStatus is the last attempt's status as the lists show it: none
// (null) when no attempt was made, 0 when one was and no answer came.
func triedStatus(lastAttempt time.Time, status int) *int {
	if lastAttempt.IsZero() {
		return nil
	}
	return &status
}

// ShownURL is an endpoint URL as logs, errors and lists may show it: without
// its user info and query, which may carry a receiver's own secrets.
func ShownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	shown := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return shown.String()
}

// MaxInFlightPerEndpoint bounds the attempts all the servers together make
// to one endpoint at once (the claim counts them), so that a receiver that
// hangs holds a few workers, not all of them.
const MaxInFlightPerEndpoint = 4

// expiryMarks are how long before a key's expiry key.expiring is sent.
var expiryMarks = []struct {
	before time.Duration
	days   int
}{{24 * time.Hour, 1}, {7 * 24 * time.Hour, 7}}

// StaleExpiry is how long after a key expired its key.expired is still
// sent: a server started on an old database does not announce ends long
// past.
const StaleExpiry = 7 * 24 * time.Hour

// ExpiryNotices are the notices due at now for keys: key.expiring at the
// nearest mark passed while the expiry is ahead (a mark already past when
// the key was made is skipped), key.expired once it passed. Revoked keys
// and the old keys of a roll (whose end key.rolled announced) get none.
func ExpiryNotices(keys []Key, now time.Time) ([]WebhookNotice, error) {
	var notices []WebhookNotice
	for _, k := range keys {
		if k.ExpiresAt.IsZero() || !k.RevokedAt.IsZero() || k.RolledTo != 0 {
			continue
		}
		data := map[string]any{"keyId": k.ID, "keyName": k.Name, "plan": k.Plan, "expires": k.ExpiresAt}
		var typ, mark string
		if !now.Before(k.ExpiresAt) {
			if now.Sub(k.ExpiresAt) > StaleExpiry {
				continue
			}
			typ, mark = WebhookKeyExpired, fmt.Sprintf("expired:%d:%d", k.ID, k.ExpiresAt.Unix())
		} else {
			for _, m := range expiryMarks {
				at := k.ExpiresAt.Add(-m.before)
				if !now.Before(at) && k.CreatedAt.Before(at) {
					typ, mark = WebhookKeyExpiring, fmt.Sprintf("expiring:%d:%d:%d", k.ID, k.ExpiresAt.Unix(), m.days)
					data["daysBefore"] = m.days
					break
				}
			}
		}
		if typ == "" {
			continue
		}
		ev, err := NewWebhookEvent(typ, now, data)
		if err != nil {
			return nil, err
		}
		notices = append(notices, WebhookNotice{Mark: mark, Event: ev, ForgetAt: k.ExpiresAt.Add(KeepExpiryMarks), Env: k.Env})
	}
	return notices, nil
}

// How long the marks of notices are kept: a quota mark past its day (and
// a day for the servers whose clocks differ), an expiry mark past the last
// time its key's key.expired could be sent (StaleExpiry after the expiry),
// and a day more.
const (
	KeepQuotaMarks  = 48 * time.Hour
	KeepExpiryMarks = StaleExpiry + 24*time.Hour
)
