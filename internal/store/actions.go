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
func recordActions(ctx context.Context, tx dbTx, events ...domain.AuditEvent) error {
	for _, e := range events {
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
