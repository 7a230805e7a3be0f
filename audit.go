package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
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

// maxPendingAuditEvents bounds the events a server holds while the database
// does not take them; those beyond are counted, logged and dropped, never
// the request's problem.
const maxPendingAuditEvents = 10_000

// auditLog keeps the events the server records, the start of each ban,
// until the next flush writes them in one batch (every usageFlushEvery, and
// at shutdown): the request that starts a ban never waits for the database.
// A nil *auditLog records nothing.
type auditLog struct {
	env    string
	now    func() time.Time
	logger *slog.Logger

	mu      sync.Mutex
	pending []auditEvent
	dropped int
}

func newAuditLog(env string, now func() time.Time, logger *slog.Logger) *auditLog {
	return &auditLog{env: env, now: now, logger: logger}
}

// banned records the start of a ban that d tells of: of key, or without a
// key, of the client address addr.
func (a *auditLog) banned(key *apiKey, addr netip.Addr, d decision) {
	if a == nil {
		return
	}
	until := d.reset
	e := auditEvent{
		At: auditTime(a.now()), Action: auditKeyBanned, Actor: serverActor, Env: a.env,
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
		e.Address = addr.String()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) >= maxPendingAuditEvents {
		a.dropped++
		return
	}
	a.pending = append(a.pending, e)
}

// flush writes the events recorded since the last flush through add. What
// fails to be written stays for the next flush; events that did not fit
// meanwhile are logged as lost.
func (a *auditLog) flush(ctx context.Context, add func(context.Context, []auditEvent) error) error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	taken := a.pending
	a.pending = nil
	dropped := a.dropped
	a.dropped = 0
	a.mu.Unlock()
	if dropped > 0 {
		a.logger.Error("audit events lost: the database did not take them in time", "events", dropped)
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

// auditActions are the actions of the trail, in the order they are listed.
var auditActions = []string{auditKeyCreated, auditKeyRevoked, auditKeyRolled, auditKeyBanned, auditKeysCopied}

// auditCommand is petstore audit: the events of the trail, oldest first, a
// line each or a JSON array.
func auditCommand(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var db dbFlags
	var since, action string
	var keyID int64
	var asJSON bool
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	db.register(fs)
	fs.StringVar(&since, "since", "", "only events at or after this: a duration back from now (24h, 7d, 30m) or an RFC 3339 time; default all")
	fs.Int64Var(&keyID, "key", 0, "only the events of this key id (a roll is an event of the old key and of the new one)")
	fs.StringVar(&action, "action", "", "only events of this action: "+strings.Join(auditActions, ", "))
	fs.BoolVar(&asJSON, "json", false, "print a JSON array instead of a line an event")
	rest, err := parseFlags(fs, args, getenv, stdout)
	if err != nil {
		return err
	}
	filter, err := auditFilterOf(fs, rest, since, keyID, action, time.Now())
	if err != nil {
		return err
	}
	store, err := db.open(ctx, false)
	if err != nil {
		return err
	}
	defer store.Close()
	events, err := store.AuditEvents(ctx, filter)
	if err != nil {
		return fmt.Errorf("read the audit trail: %w", err)
	}
	if asJSON {
		return writeAuditJSON(stdout, events)
	}
	return writeAuditLines(stdout, events)
}

// auditFilterOf checks audit's flags and arguments, and picks the events
// they ask for at now.
func auditFilterOf(fs *flag.FlagSet, rest []string, since string, keyID int64, action string, now time.Time) (auditFilter, error) {
	f := auditFilter{KeyID: keyID, Action: action}
	switch {
	case len(rest) > 0:
		return f, usagef("audit takes no arguments, got %q", rest[0])
	case given(fs, "key") && keyID < 1:
		return f, usagef("--key must be a key's numeric id from petstore keys list, not %d", keyID)
	case action != "" && !slices.Contains(auditActions, action):
		return f, usagef("--action: unknown action %q; the actions are %s", action, strings.Join(auditActions, ", "))
	}
	if since == "" && !given(fs, "since") {
		return f, nil
	}
	if at, err := time.Parse(time.RFC3339, since); err == nil {
		f.Since = at
		return f, nil
	}
	d, err := parseLifetime(since)
	if err != nil || d <= 0 {
		return f, usagef("--since must be a duration back from now (24h, 7d, 30m) or an RFC 3339 time (2026-03-01T00:00:00Z), not %q", since)
	}
	f.Since = now.Add(-d)
	return f, nil
}

// auditTimeFormat shows an event's time: UTC, to the millisecond.
const auditTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// writeAuditLines prints each event on a line: its time and action, then
// name=value pairs.
func writeAuditLines(w io.Writer, events []auditEvent) error {
	bw := bufio.NewWriter(w)
	for _, e := range events {
		bw.WriteString(e.At.Format(auditTimeFormat))
		bw.WriteString(" " + e.Action)
		for _, p := range e.pairs() {
			bw.WriteString(" " + p[0] + "=" + logfmtValue(p[1]))
		}
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// pairs are what a line of audit shows of e after its time and action,
// each name with its value, only those that e has.
func (e auditEvent) pairs() [][2]string {
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
	}
	return p
}

// logfmtValue is v as a value of a name=value pair: quoted when it holds a
// space, a quote, an equals sign or a character that is not printable.
func logfmtValue(v string) string {
	if strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == '"' || r == '=' || r == 0x7f || !unicode.IsPrint(r) }) {
		return strconv.Quote(v)
	}
	return v
}

// auditJSON is an event as audit --json shows it.
type auditJSON struct {
	ID       int64        `json:"id"`
	Time     string       `json:"time"` // UTC, to the millisecond
	Action   string       `json:"action"`
	Actor    string       `json:"actor"`
	KeyID    *int64       `json:"keyId"`    // null for an address's ban and a copy
	NewKeyID *int64       `json:"newKeyId"` // key.rolled: the new key
	Address  *string      `json:"address"`  // key.banned of a client address
	Env      string       `json:"env"`
	Details  auditDetails `json:"details"`
}

// writeAuditJSON prints the events as a JSON array, [] for none.
func writeAuditJSON(w io.Writer, events []auditEvent) error {
	out := make([]auditJSON, len(events))
	for i, e := range events {
		out[i] = auditJSON{
			ID: e.ID, Time: e.At.Format(auditTimeFormat), Action: e.Action, Actor: e.Actor,
			KeyID: idOrNil(e.KeyID), NewKeyID: idOrNil(e.NewKeyID), Env: e.Env, Details: e.Details,
		}
		if e.Address != "" {
			out[i].Address = &e.Address
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func idOrNil(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}
