package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"petstore/internal/domain"
	"petstore/internal/limits"
)

// The events webhooks send (docs/webhooks.md, "What is sent"): their
// types, their bodies, and the notices the server decides on its own: a
// budget's day quota crossing 80% and 100%, a key about to expire or
// expired.

// Webhook event types besides the audit actions sent as they are.
const (
	webhookQuotaThreshold = "key.quota.threshold"
	webhookKeyExpiring    = "key.expiring"
	webhookKeyExpired     = "key.expired"
	webhookTestEvent      = "webhook.test"
)

// webhookEventTypes are the types an endpoint may take (--events), in the
// order the docs list them. The key.* audit actions among them are sent
// for each audit event of a key, in the transaction that writes it.
var webhookEventTypes = []string{
	"key.created", "key.updated", "key.revoked", "key.rolled", "key.banned", "ban.lifted",
	webhookQuotaThreshold, webhookKeyExpiring, webhookKeyExpired, webhookTestEvent,
}

// auditActionsSent are the audit actions that are also webhook events.
var auditActionsSent = []string{"key.created", "key.updated", "key.revoked", "key.rolled", "key.banned", "ban.lifted"}

// webhookEvent is one event as it waits in the outbox: its id (the
// webhook-id of every attempt), type, time and body.
type webhookEvent struct {
	ID   string
	Type string
	At   time.Time
	Body []byte // {"type", "timestamp", "data"}
}

// newWebhookEvent is an event of typ at at with data, which never holds a
// key, a token or a hash.
func newWebhookEvent(typ string, at time.Time, data any) (webhookEvent, error) {
	at = at.UTC().Truncate(time.Millisecond)
	body, err := json.Marshal(struct {
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Data      any       `json:"data"`
	}{typ, at, data})
	if err != nil {
		return webhookEvent{}, fmt.Errorf("webhook event %s: %w", typ, err)
	}
	return webhookEvent{ID: newWebhookEventID(), Type: typ, At: at, Body: body}, nil
}

// newWebhookEventID is a fresh event id: msg_ and 24 random base62
// characters, unique across databases, so that a receiver fed by two
// deployments never takes one event for another.
func newWebhookEventID() string { return string(appendRandomBase62([]byte("msg_"), 24)) }

// auditWebhookEvent is the webhook event of audit event e, when its action
// is one that is sent and it is about a key (the ban of a client address is
// not: an address is personal data a receiver need not hold). keyName is
// the key's name, for events whose details lack it.
func auditWebhookEvent(e domain.AuditEvent, keyName string) (webhookEvent, bool, error) {
	if !sentAsWebhook(e) {
		return webhookEvent{}, false, nil
	}
	// The details are the audit trail's camelCase object, which never
	// holds a key or a hash; the event names the key first.
	var data map[string]any
	details, err := json.Marshal(e.Details)
	if err == nil {
		err = json.Unmarshal(details, &data)
	}
	if err != nil {
		return webhookEvent{}, false, err
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
	ev, err := newWebhookEvent(e.Action, e.At, data)
	return ev, err == nil, err
}

// sentAsWebhook tells whether audit event e is also a webhook event: an
// action that is sent, about a key.
func sentAsWebhook(e domain.AuditEvent) bool {
	return slices.Contains(auditActionsSent, e.Action) && e.KeyID != 0 && e.Address == ""
}

// parseEventTypes reads --events (or an admin body's events): known types,
// comma-separated; none means all, but an empty type is refused, not taken
// for all.
func parseEventTypes(list []string) ([]string, error) {
	var types []string
	for _, item := range list {
		for t := range strings.SplitSeq(item, ",") {
			t = strings.TrimSpace(t)
			if t == "" {
				return nil, fmt.Errorf("events: %q holds an empty event type; name types (%s), or none for all", item, strings.Join(webhookEventTypes, ", "))
			}
			if !slices.Contains(webhookEventTypes, t) {
				return nil, fmt.Errorf("events: %q is not an event type (%s)", t, strings.Join(webhookEventTypes, ", "))
			}
			if !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
	}
	return types, nil
}

// quotaThresholds are the shares of a day quota whose crossing is sent, in
// percent.
var quotaThresholds = []int{80, 100}

// quotaNotice is a budget's day count reaching a threshold of its quota.
// The store keeps one per budget, day and threshold: the first server to
// store it sends it, every other finds it there.
type quotaNotice struct {
	BudgetID  int64
	KeyID     int64 // the key whose request reached it
	KeyName   string
	Plan      string
	Threshold int
	Used      int64
	Limit     int64
	Day       string // YYYY-MM-DD, UTC
	At        time.Time
}

// mark is what makes a notice once: its budget, day and threshold.
func (n quotaNotice) mark() string {
	return fmt.Sprintf("quota:%d:%s:%d", n.BudgetID, n.Day, n.Threshold)
}

// notice is n as the store keeps it.
func (n quotaNotice) notice() (webhookNotice, error) {
	ev, err := newWebhookEvent(webhookQuotaThreshold, n.At, map[string]any{
		"keyId": n.KeyID, "keyName": n.KeyName, "plan": n.Plan, "threshold": n.Threshold,
		"used": n.Used, "limit": n.Limit, "day": n.Day,
	})
	return webhookNotice{Mark: n.mark(), Event: ev, ForgetAt: n.At.Add(keepQuotaMarks)}, err
}

// webhookNotice is an event the server decides on its own, sent once for
// its mark (a budget's day and threshold, a key's expiry): the first
// server to store the mark sends the event, any other finds it stored.
// The mark is kept until ForgetAt, when no server would make the notice
// again.
type webhookNotice struct {
	Mark     string
	Event    webhookEvent
	ForgetAt time.Time
}

// How long the marks of notices are kept: a quota mark past its day (and
// a day for the servers whose clocks differ), an expiry mark past the last
// time its key's key.expired could be sent (staleExpiry after the expiry),
// and a day more.
const (
	keepQuotaMarks  = 48 * time.Hour
	keepExpiryMarks = staleExpiry + 24*time.Hour
)

// quotaNotices are notices as the store takes them.
func quotaNotices(ns []quotaNotice) ([]webhookNotice, error) {
	out := make([]webhookNotice, 0, len(ns))
	for _, n := range ns {
		wn, err := n.notice()
		if err != nil {
			return nil, err
		}
		out = append(out, wn)
	}
	return out, nil
}

// quotaWatch sees each request's day count as the limiter decided it and
// keeps the thresholds reached, until the usage flush stores them. A budget
// under 80% costs a request one comparison. A nil *quotaWatch sees nothing.
type quotaWatch struct {
	now func() time.Time

	mu      sync.Mutex
	day     int64
	seen    map[quotaSeen]bool // what this server has noticed today
	pending []quotaNotice
}

// quotaSeen is a threshold of a budget's quota, noticed today.
type quotaSeen struct {
	budget    int64
	threshold int
}

func newQuotaWatch(now func() time.Time) *quotaWatch {
	return &quotaWatch{now: now, seen: make(map[quotaSeen]bool)}
}

// observe looks at the day count d reports for key, whose budget has
// limit lim.
func (q *quotaWatch) observe(key *domain.Key, lim domain.Limits, d limits.Decision) {
	if q == nil || key == nil || d.DayCount*100 < lim.PerDay*int64(quotaThresholds[0]) {
		return
	}
	now := q.now()
	today := limits.UnixDay(now)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.day != today {
		q.day, q.seen = today, make(map[quotaSeen]bool)
	}
	for _, t := range quotaThresholds {
		if d.DayCount*100 < lim.PerDay*int64(t) {
			break
		}
		seen := quotaSeen{key.BudgetID, t}
		if q.seen[seen] || len(q.pending) >= domain.MaxPendingAuditEvents {
			continue
		}
		q.seen[seen] = true
		q.pending = append(q.pending, quotaNotice{
			BudgetID: key.BudgetID, KeyID: key.ID, KeyName: key.Name, Plan: key.Plan, Threshold: t,
			Used: d.DayCount, Limit: lim.PerDay, Day: limits.DayString(today), At: now,
		})
	}
}

// flush stores the notices seen since the last flush through add; what
// fails stays for the next.
func (q *quotaWatch) flush(ctx context.Context, add func(context.Context, []webhookNotice) error) error {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	taken := q.pending
	q.pending = nil
	q.mu.Unlock()
	if len(taken) == 0 {
		return nil
	}
	notices, err := quotaNotices(taken)
	if err == nil {
		err = add(ctx, notices)
	}
	if err != nil {
		q.mu.Lock()
		q.pending = append(taken, q.pending...)
		q.mu.Unlock()
		return err
	}
	return nil
}

// expiryMarks are how long before a key's expiry key.expiring is sent.
var expiryMarks = []struct {
	before time.Duration
	days   int
}{{24 * time.Hour, 1}, {7 * 24 * time.Hour, 7}}

// staleExpiry is how long after a key expired its key.expired is still
// sent: a server started on an old database does not announce ends long
// past.
const staleExpiry = 7 * 24 * time.Hour

// expiryNotices are the notices due at now for keys: key.expiring at the
// nearest mark passed while the expiry is ahead (a mark already past when
// the key was made is skipped), key.expired once it passed. Revoked keys
// and the old keys of a roll (whose end key.rolled announced) get none.
func expiryNotices(keys []domain.Key, now time.Time) ([]webhookNotice, error) {
	var notices []webhookNotice
	for _, k := range keys {
		if k.ExpiresAt.IsZero() || !k.RevokedAt.IsZero() || k.RolledTo != 0 {
			continue
		}
		data := map[string]any{"keyId": k.ID, "keyName": k.Name, "plan": k.Plan, "expires": k.ExpiresAt}
		var typ, mark string
		if !now.Before(k.ExpiresAt) {
			if now.Sub(k.ExpiresAt) > staleExpiry {
				continue
			}
			typ, mark = webhookKeyExpired, fmt.Sprintf("expired:%d:%d", k.ID, k.ExpiresAt.Unix())
		} else {
			for _, m := range expiryMarks {
				at := k.ExpiresAt.Add(-m.before)
				if !now.Before(at) && k.CreatedAt.Before(at) {
					typ, mark = webhookKeyExpiring, fmt.Sprintf("expiring:%d:%d:%d", k.ID, k.ExpiresAt.Unix(), m.days)
					data["daysBefore"] = m.days
					break
				}
			}
		}
		if typ == "" {
			continue
		}
		ev, err := newWebhookEvent(typ, now, data)
		if err != nil {
			return nil, err
		}
		notices = append(notices, webhookNotice{Mark: mark, Event: ev, ForgetAt: k.ExpiresAt.Add(keepExpiryMarks)})
	}
	return notices, nil
}
