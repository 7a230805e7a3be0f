package main

import (
	"context"
	"log/slog"
	"os"
	"os/user"
	"sync"
	"time"
)

// The audit trail (DESIGN.md "Restricted keys and the audit trail"): every
// change to a key is an event kept in the database, append only, with who
// made it and when. The commands write theirs in the transaction of the
// change itself; the server writes the start of each ban, in batches.

// Audit actions, in the order they are listed.
const (
	auditKeyCreated = "key.created"
	auditKeyRevoked = "key.revoked"
	auditKeyRolled  = "key.rolled"
	auditKeyBanned  = "key.banned"
	auditKeysCopied = "keys.copied"
	auditKeyUpdated = "key.updated"
	// An admin token's, with its id (adminId in the details).
	auditAdminCreated = "admin.created"
	auditAdminRevoked = "admin.revoked"
	auditBanLifted    = "ban.lifted"
)

var auditActions = []string{
	auditKeyCreated, auditKeyRevoked, auditKeyRolled, auditKeyBanned, auditKeysCopied, auditKeyUpdated,
	auditAdminCreated, auditAdminRevoked, auditBanLifted,
	auditWebhookAdded, auditWebhookRemoved, auditWebhookRotated, auditWebhookEnabled, auditWebhookDisabled,
}

// serverActor is the actor of the events the server writes: the bootstrap
// key and the bans.
const serverActor = "server"

// auditEvent is one event of the trail. It never holds a key or its hash:
// its fields are the only things stored, and none can.
type auditEvent struct {
	ID       int64
	At       time.Time // UTC, to the millisecond
	Action   string
	Actor    string // user@host of a command, or "server"
	KeyID    int64  // 0: none (the ban of a client address, a copy)
	NewKeyID int64  // key.rolled: the key the roll made
	Address  string // key.banned of a client address
	Env      string
	Details  auditDetails
}

// auditDetails are what the change was: a key's terms, a roll's overlap, a
// ban's end, a copy's counts. Each action fills the fields that fit it.
type auditDetails struct {
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
	Copied *copied `json:"copied,omitempty"`
	// key.updated: the key's terms before the change and after it.
	Before *auditDetails `json:"before,omitempty"`
	After  *auditDetails `json:"after,omitempty"`
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

// auditFilter picks events: those at or after Since (zero: all), of key
// KeyID (0: any; a roll is an event of both its keys), of Action ("": any),
// a page of them when After or Limit say so.
type auditFilter struct {
	Since  time.Time
	KeyID  int64
	Action string
	After  int64 // only the events after event After in the trail's order (a page's cursor); 0: from the first
	Limit  int   // at most this many; 0: all
}

// auditTime is t as the trail keeps it: UTC, to the millisecond.
func auditTime(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// keyEvent is the event of action on key k.
func keyEvent(action string, k apiKey, actor string, at time.Time) auditEvent {
	return auditEvent{At: auditTime(at), Action: action, Actor: actor, KeyID: k.ID, Env: k.Env, Details: termsOf(k)}
}

// termsOf are the details of a key's terms.
func termsOf(k apiKey) auditDetails {
	return auditDetails{
		Name: k.Name, Plan: k.Plan, PerMinute: k.PerMinute, PerDay: k.PerDay, Scopes: k.Scopes.names(), Expires: timeOrNil(k.ExpiresAt),
		ExternalID: k.ExternalID,
	}
}

// updateEvent is the event of a change of key before to after.
func updateEvent(before, after apiKey, actor string, at time.Time) auditEvent {
	e := keyEvent(auditKeyUpdated, after, actor, at)
	b, a := termsOf(before), termsOf(after)
	e.Details = auditDetails{Before: &b, After: &a}
	return e
}

// rollEvent is the event of a roll of old to rolled: the new key's terms,
// the overlap asked for, and when the old key stops.
func rollEvent(old, rolled apiKey, overlap time.Duration, actor string, at time.Time) auditEvent {
	e := keyEvent(auditKeyRolled, rolled, actor, at)
	e.KeyID, e.NewKeyID = old.ID, rolled.ID
	e.Details.Overlap = overlap.String()
	e.Details.OldKeyStops = timeOrNil(old.ExpiresAt)
	return e
}

// commandActor is who runs a command, for its events: the operating-system
// user and the host, user@host.
func commandActor() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return name + "@" + host
}

// maxPendingAuditEvents bounds the bans a server holds while the database
// does not take them; those beyond are counted, logged and dropped, never
// the request's problem.
const maxPendingAuditEvents = 10_000

// auditLog keeps the bans the server starts, each with its key.banned
// event, until a flush stores them in one batch: at once in the
// background (storeAsTheyStart), again every usageFlushEvery for what
// failed, before the admin API lists or lifts bans, and at shutdown. The
// request that starts a ban never waits for the database, and a ban is
// listed, and can be lifted, as soon as it is refused
// (docs/production.md#bans). A nil *auditLog records nothing.
type auditLog struct {
	env    string
	now    func() time.Time
	logger *slog.Logger
	wake   chan struct{} // a ban waits to be stored

	flushing sync.Mutex // one flush at a time: a second waits for the first's batch to be stored
	mu       sync.Mutex
	pending  []startedBan
	dropped  int
}

func newAuditLog(env string, now func() time.Time, logger *slog.Logger) *auditLog {
	return &auditLog{env: env, now: now, logger: logger, wake: make(chan struct{}, 1)}
}

// storeAsTheyStart runs store (a flush) as soon as a ban is recorded, until
// ctx ends, so that the ban is listed and can be lifted at once; the
// periodic flush retries what failed here.
func (a *auditLog) storeAsTheyStart(ctx context.Context, store func(context.Context) error, warn func(string, error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
			warn("store bans and their audit events; will retry", store(ctx))
		}
	}
}

// banned records the start of a ban of id that d tells of: of key's
// budget, or without a key, of the client address id names.
func (a *auditLog) banned(key *apiKey, id callerID, d decision) {
	if a == nil {
		return
	}
	now := a.now()
	until := d.reset
	e := auditEvent{
		At: auditTime(now), Action: auditKeyBanned, Actor: serverActor, Env: a.env,
		Details: auditDetails{
			PerMinute: anonymousLimits.PerMinute, PerDay: anonymousLimits.PerDay,
			BannedUntil: &until, BanFor: d.retryAfter.String(),
		},
	}
	if key != nil {
		e.KeyID = key.ID
		e.Details.Plan, e.Details.PerMinute, e.Details.PerDay = key.Plan, key.PerMinute, key.PerDay
		if key.BudgetID != key.ID {
			e.Details.Budget = key.BudgetID
		}
	} else {
		e.Address = id.addressText()
	}
	b := startedBan{Ban: ban{Subject: id, Since: auditTime(now), Until: auditTime(d.bannedUntil)}, Event: e}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) >= maxPendingAuditEvents {
		a.dropped++
		return
	}
	a.pending = append(a.pending, b)
	select {
	case a.wake <- struct{}{}:
	default: // already woken: that flush takes this ban too
	}
}

// flush stores the bans recorded since the last flush through add. What
// fails to be stored stays for the next flush; bans that did not fit
// meanwhile are logged as lost.
func (a *auditLog) flush(ctx context.Context, add func(context.Context, []startedBan) error) error {
	if a == nil {
		return nil
	}
	a.flushing.Lock()
	defer a.flushing.Unlock()
	a.mu.Lock()
	taken := a.pending
	a.pending = nil
	dropped := a.dropped
	a.dropped = 0
	a.mu.Unlock()
	if dropped > 0 {
		a.logger.Error("bans and their audit events lost: the database did not take them in time", "bans", dropped)
	}
	if len(taken) == 0 {
		return nil
	}
	if err := add(ctx, taken); err != nil {
		a.mu.Lock()
		kept := taken[:min(len(taken), max(0, maxPendingAuditEvents-len(a.pending)))]
		a.dropped += len(taken) - len(kept)
		a.pending = append(kept, a.pending...)
		a.mu.Unlock()
		return err
	}
	return nil
}
