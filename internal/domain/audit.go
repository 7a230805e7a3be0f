package domain

import (
	"strconv"
	"strings"
	"time"
)

// Audit actions, in the order they are listed.
const (
	AuditKeyCreated = "key.created"
	AuditKeyRevoked = "key.revoked"
	AuditKeyRolled  = "key.rolled"
	AuditKeyBanned  = "key.banned"
	AuditKeysCopied = "keys.copied"
	AuditKeyUpdated = "key.updated"
	// An admin token's, with its id (adminId in the details).
	AuditAdminCreated = "admin.created"
	AuditAdminRevoked = "admin.revoked"
	AuditBanLifted    = "ban.lifted"
	// A webhook endpoint's, with webhookId in their details.
	AuditWebhookAdded    = "webhook.added"
	AuditWebhookRemoved  = "webhook.removed"
	AuditWebhookRotated  = "webhook.rotated"
	AuditWebhookEnabled  = "webhook.enabled"
	AuditWebhookDisabled = "webhook.disabled"
)

var AuditActions = []string{
	AuditKeyCreated, AuditKeyRevoked, AuditKeyRolled, AuditKeyBanned, AuditKeysCopied, AuditKeyUpdated,
	AuditAdminCreated, AuditAdminRevoked, AuditBanLifted,
	AuditWebhookAdded, AuditWebhookRemoved, AuditWebhookRotated, AuditWebhookEnabled, AuditWebhookDisabled,
}

// ServerActor is the actor of the events the server writes: the bootstrap
// key and the bans.
const ServerActor = "server"

// AuditEvent is one event of the trail. It never holds a key or its hash:
// its fields are the only things stored, and none can.
type AuditEvent struct {
	ID       int64
	At       time.Time // UTC, to the millisecond
	Action   string
	Actor    string // user@host of a command, or "server"
	KeyID    int64  // 0: none (the ban of a client address, a copy)
	NewKeyID int64  // key.rolled: the key the roll made
	Address  string // key.banned of a client address
	Env      string
	Details  AuditDetails
	// Cause is the W3C trace context of the request that caused an event
	// stored later by a flush (a ban's start), as its webhook event keeps
	// it (internal/tracing's Cause); never written to the audit trail.
	Cause string
}

// AuditDetails are what the change was: a key's terms, a roll's overlap, a
// ban's end, a copy's counts. Each action fills the fields that fit it.
type AuditDetails struct {
	Name      string     `json:"name,omitempty"`
	Plan      string     `json:"plan,omitempty"`
	PerMinute int64      `json:"perMinute,omitempty"`
	PerDay    int64      `json:"perDay,omitempty"`
	Scopes    []string   `json:"scopes,omitempty"`
	Expires   *time.Time `json:"expires,omitempty"`
	// key.rolled: how long the old key was given, and when it stops.
	Overlap     string     `json:"overlap,omitempty"`
	OldKeyStops *time.Time `json:"oldKeyStops,omitempty"`
	// key.banned: until when, for how long, and, for a key of a roll, the
	// key whose budget (shared by the keys of the roll) is banned.
	BannedUntil *time.Time `json:"bannedUntil,omitempty"`
	BanFor      string     `json:"banFor,omitempty"`
	Budget      int64      `json:"budget,omitempty"`
	// keys.copied: the SQLite file copied, and what it held.
	From   string  `json:"from,omitempty"`
	Copied *Copied `json:"copied,omitempty"`
	// key.updated: the key's terms before the change and after it.
	Before *AuditDetails `json:"before,omitempty"`
	After  *AuditDetails `json:"after,omitempty"`
	// admin.created, admin.revoked: the token's id (with its name and
	// scopes above).
	AdminID int64 `json:"adminId,omitempty"`
	// key.created through the admin API: the portal's reference.
	ExternalID string `json:"externalId,omitempty"`
	// webhook.*: the endpoint, its URL as logs show it (no user info or
	// query), its event types, and why a server disabled it. Never its
	// secret.
	WebhookID int64    `json:"webhookId,omitempty"`
	URL       string   `json:"url,omitempty"`
	Events    []string `json:"events,omitempty"`
	Reason    string   `json:"reason,omitempty"`
}

// AuditFilter picks events: those of environment Env ("": any), at or
// after Since (zero: all), of key KeyID (0: any; a roll is an event of
// both its keys), of Action ("": any), a page of them when After or Limit
// say so. An event about a key is of the key's environment; an address's
// ban and its lift are of every environment, as the ban is.
type AuditFilter struct {
	Env    string
	Since  time.Time
	KeyID  int64
	Action string
	After  int64 // only the events after event After in the trail's order (a page's cursor); 0: from the first
	Limit  int   // at most this many; 0: all
	Newest bool  // the trail's order turned round: newest first (After then pages back)
}

// AuditTime is t as the trail keeps it: UTC, to the millisecond.
func AuditTime(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

func KeyEvent(action string, k Key, actor string, at time.Time) AuditEvent {
	return AuditEvent{At: AuditTime(at), Action: action, Actor: actor, KeyID: k.ID, Env: k.Env, Details: termsOf(k)}
}

func termsOf(k Key) AuditDetails {
	return AuditDetails{
		Name: k.Name, Plan: k.Plan, PerMinute: k.PerMinute, PerDay: k.PerDay, Scopes: k.Scopes.Names(), Expires: TimeOrNil(k.ExpiresAt),
		ExternalID: k.ExternalID,
	}
}

func UpdateEvent(before, after Key, actor string, at time.Time) AuditEvent {
	e := KeyEvent(AuditKeyUpdated, after, actor, at)
	b, a := termsOf(before), termsOf(after)
	e.Details = AuditDetails{Before: &b, After: &a}
	return e
}

// RollEvent is the event of a roll of old to rolled: the new key's terms,
// the overlap asked for, and when the old key stops.
func RollEvent(old, rolled Key, overlap time.Duration, actor string, at time.Time) AuditEvent {
	e := KeyEvent(AuditKeyRolled, rolled, actor, at)
	e.KeyID, e.NewKeyID = old.ID, rolled.ID
	e.Details.Overlap = overlap.String()
	e.Details.OldKeyStops = TimeOrNil(old.ExpiresAt)
	return e
}

// MaxPendingAuditEvents bounds the bans a server holds while the database
// does not take them; those beyond are counted, logged and dropped, never
// the request's problem.
const MaxPendingAuditEvents = 10_000

// Pairs are what a line of audit shows of e after its time and action,
// each name with its value, only those that e has.
func (e AuditEvent) Pairs() [][2]string {
	var p [][2]string
	add := func(name, value string) {
		if value != "" {
			p = append(p, [2]string{name, value})
		}
	}
	number := func(n int64) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatInt(n, 10)
	}
	at := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	}
	d := e.Details
	add("key", number(e.KeyID))
	add("newKey", number(e.NewKeyID))
	add("address", e.Address)
	add("actor", e.Actor)
	add("env", e.Env)
	add("name", d.Name)
	add("plan", d.Plan)
	add("perMinute", number(d.PerMinute))
	add("perDay", number(d.PerDay))
	add("scopes", strings.Join(d.Scopes, ","))
	add("expires", at(d.Expires))
	add("overlap", d.Overlap)
	add("oldKeyStops", at(d.OldKeyStops))
	add("bannedUntil", at(d.BannedUntil))
	add("banFor", d.BanFor)
	add("budget", number(d.Budget))
	add("from", d.From)
	if c := d.Copied; c != nil {
		add("pets", strconv.FormatInt(c.Pets, 10))
		add("keys", strconv.FormatInt(c.Keys, 10))
		add("usage", strconv.FormatInt(c.Usage, 10))
		add("idempotency", strconv.FormatInt(c.Idempotency, 10))
		add("auditEvents", strconv.FormatInt(c.AuditEvents, 10))
		add("bans", strconv.FormatInt(c.Bans, 10))
	}
	return p
}

// Copied counts the rows of each table a copy moved.
type Copied struct {
	Pets         int64 `json:"pets"`
	Keys         int64 `json:"keys"`
	Usage        int64 `json:"usage"`
	Idempotency  int64 `json:"idempotency"`
	AuditEvents  int64 `json:"auditEvents"`
	AdminTokens  int64 `json:"adminTokens"`
	UsageHistory int64 `json:"usageHistory"`
	// The webhooks' endpoints, outbox and notice marks.
	WebhookEndpoints  int64 `json:"webhookEndpoints,omitempty"`
	WebhookEvents     int64 `json:"webhookEvents,omitempty"`
	WebhookDeliveries int64 `json:"webhookDeliveries,omitempty"`
	WebhookNotices    int64 `json:"webhookNotices,omitempty"`
	Bans              int64 `json:"bans"`
}
