package main

import (
	"os"
	"os/user"
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
)

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
}

// auditFilter picks events: those at or after Since (zero: all), of key
// KeyID (0: any; a roll is an event of both its keys), of Action ("": any).
type auditFilter struct {
	Since  time.Time
	KeyID  int64
	Action string
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
	}
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
