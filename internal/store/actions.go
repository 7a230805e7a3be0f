// The one way an audited change is recorded (docs/design.md#what-no-code-may-do).

package store

import (
	"context"
	"errors"

	"petstore/internal/domain"
)

// recordActions writes the audit trail of a change and queues its webhooks,
// in tx, the change's own transaction: each event is appended to
// audit_events, and those that are webhooks too (key.created, key.banned
// ...) are queued for every endpoint of the key's environment that takes
// them. It is the only writer of audit_events (store_invariants_test.go
// checks it), so no change can be audited and its webhook forgotten, nor
// the other way round.
//
// A key.banned event is written once a ban: its ban's row in ban_events
// is written first, and when it was there already (the same ban written
// again, after a write whose caller heard it fail had committed), neither
// the event nor its webhook is written.
func recordActions(ctx context.Context, tx dbTx, events ...domain.AuditEvent) error {
	for _, e := range events {
		if e.Action == domain.AuditKeyBanned {
			added, err := tx.Exec(ctx, `INSERT INTO ban_events (subject, started_at) VALUES (?, ?) ON CONFLICT (subject, started_at) DO NOTHING`,
				bannedSubject(e), e.At.UnixMilli())
			if err != nil {
				return err
			}
			if added == 0 {
				continue
			}
		}
		row, err := AuditRow(e)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO audit_events (`+auditColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, row...); err != nil {
			return err
		}
		ev, env, ok, err := auditWebhookEvent(ctx, tx, e)
		if err == nil && ok {
			err = queueWebhookEvent(ctx, tx, ev, env)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// auditWebhookEvent returns the webhook event of an audit event, with the
// environment of the key it is about, whose endpoints take it; or
// ok=false when it is not sent as one.
func auditWebhookEvent(ctx context.Context, tx dbTx, e domain.AuditEvent) (ev domain.WebhookEvent, env string, ok bool, err error) {
	if !domain.SentAsWebhook(e) {
		return ev, "", false, nil
	}
	// A ban's or a lift's event may not name the key; and the key's own
	// environment is the one whose endpoints hear of it, whoever changed it.
	var name string
	env = e.Env
	if err := tx.QueryRow(ctx, `SELECT name, env FROM api_keys WHERE id = ?`, e.KeyID).Scan(&name, &env); err != nil && !errors.Is(err, errNoRows) {
		return ev, "", false, err
	}
	ev, ok, err = domain.AuditWebhookEvent(e, name)
	return ev, env, ok, err
}

// bannedSubject is the subject of the ban a key.banned event tells of, as
// the bans table names it: the budget of a key of a roll, the key, or the
// client address.
func bannedSubject(e domain.AuditEvent) string {
	switch {
	case e.Details.Budget != 0:
		return domain.CallerID{KeyID: e.Details.Budget}.String()
	case e.KeyID != 0:
		return domain.CallerID{KeyID: e.KeyID}.String()
	}
	return "address:" + e.Address
}
