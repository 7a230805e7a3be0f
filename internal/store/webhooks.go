// The webhooks' endpoints, outbox and notices, written once for both
// engines over sqlEngine. Each event is queued in the transaction of what it
// reports: an audited change (through recordActions, actions.go), a notice's
// mark, a test.

package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"petstore/internal/domain"
	"petstore/internal/tracing"
)

type sqlWebhooks struct{ db sqlEngine }

const endpointColumns = `id, env, url, events, enabled, created_at, secret, previous_secret, previous_until,
	last_attempt_at, last_status, last_error`

func scanEndpoint(scan func(...any) error) (domain.WebhookEndpoint, error) {
	var e domain.WebhookEndpoint
	var events string
	var enabled, created int64
	var previous, lastError sql.NullString
	var previousUntil, lastAttempt, lastStatus sql.NullInt64
	if err := scan(&e.ID, &e.Env, &e.URL, &events, &enabled, &created, &e.Secret, &previous, &previousUntil,
		&lastAttempt, &lastStatus, &lastError); err != nil {
		return e, err
	}
	if events != "" {
		e.Events = strings.Split(events, ",")
	}
	e.Enabled = enabled == 1
	e.CreatedAt = time.Unix(created, 0).UTC()
	e.PreviousSecret, e.PreviousUntil = previous.String, milliOrZero(previousUntil)
	e.LastAttempt, e.LastStatus, e.LastError = milliOrZero(lastAttempt), int(lastStatus.Int64), lastError.String
	return e, nil
}

func (s sqlWebhooks) AddWebhookEndpoint(ctx context.Context, e domain.WebhookEndpoint, actor, env string) (domain.WebhookEndpoint, error) {
	now := s.db.clock()
	e.Enabled, e.CreatedAt, e.Env = true, now.UTC().Truncate(time.Second), env
	err := s.db.update(ctx, func(tx dbTx) error {
		var err error
		e.ID, err = tx.Insert(ctx, `INSERT INTO webhook_endpoints (url, events, enabled, created_at, secret, env) VALUES (?, ?, 1, ?, ?, ?)`,
			e.URL, strings.Join(e.Events, ","), e.CreatedAt.Unix(), e.Secret, env)
		if err != nil {
			return err
		}
		return recordActions(ctx, tx, domain.WebhookAuditEvent(domain.AuditWebhookAdded, e, actor, env, now, ""))
	})
	return e, err
}

func (s sqlWebhooks) WebhookEndpoints(ctx context.Context, env string) ([]domain.WebhookEndpoint, error) {
	return queryRows(ctx, s.db, scanEndpoint, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE env = ? ORDER BY id`, env)
}

// withEndpoint runs fn on endpoint id of env ("": of any) in one write
// transaction that first locks the endpoint's row, as every change of it
// does, and returns the endpoint as fn leaves it. An endpoint of another
// environment is not_found, as one that does not exist.
func (s sqlWebhooks) withEndpoint(ctx context.Context, id int64, env string, fn func(tx dbTx, e *domain.WebhookEndpoint) error) (e domain.WebhookEndpoint, err error) {
	err = s.db.update(ctx, func(tx dbTx) error {
		e, err = scanEndpoint(tx.QueryRow(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE id = ? AND (? = '' OR env = ?)`+tx.Dialect().forUpdate,
			id, env, env).Scan)
		if errors.Is(err, errNoRows) {
			return domain.NotFound("no webhook endpoint has id %d", id)
		}
		if err != nil {
			return err
		}
		return fn(tx, &e)
	})
	return e, err
}

func (s sqlWebhooks) RemoveWebhookEndpoint(ctx context.Context, id int64, actor, env string) error {
	now := s.db.clock()
	_, err := s.withEndpoint(ctx, id, env, func(tx dbTx, e *domain.WebhookEndpoint) error {
		if _, err := tx.Exec(ctx, `DELETE FROM webhook_deliveries WHERE endpoint_id = ?`, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM webhook_endpoints WHERE id = ?`, id); err != nil {
			return err
		}
		return recordActions(ctx, tx, domain.WebhookAuditEvent(domain.AuditWebhookRemoved, *e, actor, env, now, ""))
	})
	return err
}

func (s sqlWebhooks) RotateWebhookSecret(ctx context.Context, id int64, secret string, overlap time.Duration, actor, env string) (domain.WebhookEndpoint, error) {
	now := s.db.clock()
	return s.withEndpoint(ctx, id, env, func(tx dbTx, e *domain.WebhookEndpoint) error {
		e.PreviousSecret, e.PreviousUntil, e.Secret = e.Secret, now.Add(overlap), secret
		if _, err := tx.Exec(ctx, `UPDATE webhook_endpoints SET secret = ?, previous_secret = ?, previous_until = ? WHERE id = ?`,
			e.Secret, e.PreviousSecret, e.PreviousUntil.UnixMilli(), id); err != nil {
			return err
		}
		ev := domain.WebhookAuditEvent(domain.AuditWebhookRotated, *e, actor, env, now, "")
		ev.Details.Overlap = overlap.String()
		return recordActions(ctx, tx, ev)
	})
}

// EnableWebhookEndpoint enables endpoint id; its failures start afresh.
func (s sqlWebhooks) EnableWebhookEndpoint(ctx context.Context, id int64, actor, env string) (domain.WebhookEndpoint, error) {
	now := s.db.clock()
	return s.withEndpoint(ctx, id, env, func(tx dbTx, e *domain.WebhookEndpoint) error {
		if e.Enabled {
			return nil
		}
		e.Enabled = true
		if _, err := tx.Exec(ctx, `UPDATE webhook_endpoints SET enabled = 1, failing_since = NULL WHERE id = ?`, id); err != nil {
			return err
		}
		return recordActions(ctx, tx, domain.WebhookAuditEvent(domain.AuditWebhookEnabled, *e, actor, env, now, ""))
	})
}

func (s sqlWebhooks) AddWebhookEvent(ctx context.Context, ev domain.WebhookEvent, endpointID int64, env string) error {
	_, err := s.withEndpoint(ctx, endpointID, env, func(tx dbTx, _ *domain.WebhookEndpoint) error {
		if _, err := tx.Exec(ctx, `INSERT INTO webhook_events (id, type, at, body, trace_context) VALUES (?, ?, ?, ?, ?)`,
			ev.ID, ev.Type, ev.At.UnixMilli(), string(ev.Body), traceCause(ctx, ev)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO webhook_deliveries (event_id, endpoint_id, state, next_at) VALUES (?, ?, 'pending', ?)`,
			ev.ID, endpointID, ev.At.UnixMilli())
		return err
	})
	return err
}

// queueWebhookEvent queues ev in tx for every endpoint of env (the
// environment of the key it is about) that takes its type now; with none,
// nothing is written. The event keeps ctx's trace context (traceCause).
func queueWebhookEvent(ctx context.Context, tx dbTx, ev domain.WebhookEvent, env string) error {
	// events holds the types an endpoint takes between commas, '' for all;
	// no type holds a LIKE wildcard.
	const takers = `FROM webhook_endpoints WHERE enabled = 1 AND env = ? AND (events = '' OR ',' || events || ',' LIKE ?)`
	pattern := "%," + ev.Type + ",%"
	n, err := tx.Exec(ctx, `INSERT INTO webhook_events (id, type, at, body, trace_context)
		SELECT CAST(? AS text), CAST(? AS text), CAST(? AS bigint), CAST(? AS text), CAST(? AS text) WHERE EXISTS (SELECT 1 `+takers+`)`,
		ev.ID, ev.Type, ev.At.UnixMilli(), string(ev.Body), traceCause(ctx, ev), env, pattern)
	if err != nil || n == 0 {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO webhook_deliveries (event_id, endpoint_id, state, next_at)
		SELECT CAST(? AS text), id, 'pending', CAST(? AS bigint) `+takers,
		ev.ID, ev.At.UnixMilli(), env, pattern)
	return err
}

// AddWebhookNotices: of servers that notice one thing at once, one stores
// its mark and sends it.
func (s sqlWebhooks) AddWebhookNotices(ctx context.Context, notices []domain.WebhookNotice) error {
	now := s.db.clock()
	return s.db.update(ctx, func(tx dbTx) error {
		for _, n := range notices {
			added, err := tx.Exec(ctx, `INSERT INTO webhook_notices (mark, at, forget_at) VALUES (?, ?, ?) ON CONFLICT (mark) DO NOTHING`,
				n.Mark, now.UnixMilli(), n.ForgetAt.UnixMilli())
			if err == nil && added > 0 {
				err = queueWebhookEvent(ctx, tx, n.Event, n.Env)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// ClaimWebhookDeliveries claims due deliveries until now+claimFor, an
// endpoint at a time, the endpoint longest due first. Each endpoint's row
// is locked while its deliveries are claimed (on PostgreSQL, skipping one
// another server is claiming for), so that its live claims, counted then,
// are every server's: together they never make more than
// domain.MaxInFlightPerEndpoint attempts to one endpoint at once.
// A server sends its own environment's webhooks only: its endpoints are
// those of its environment (docs/webhooks.md).
func (s sqlWebhooks) ClaimWebhookDeliveries(ctx context.Context, env string, now time.Time, claimFor time.Duration, skip []int64, limit int,
	take func(endpointID int64) bool) ([]domain.ClaimedDelivery, error) {
	const due = `FROM webhook_deliveries WHERE state = 'pending' AND next_at <= ? AND claimed_until <= ?
		AND endpoint_id IN (SELECT id FROM webhook_endpoints WHERE enabled = 1 AND env = ?)`
	// A look outside a write transaction first: most rounds find nothing
	// due, and then take no lock (on SQLite, the file's one writer).
	var found bool
	if err := s.db.view(ctx, func(tx dbTx) error {
		return tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 `+due+`)`, now.UnixMilli(), now.UnixMilli(), env).Scan(&found)
	}); err != nil || !found {
		return nil, err
	}
	var claimed []domain.ClaimedDelivery
	err := s.db.update(ctx, func(tx dbTx) error {
		claimed = nil
		query, args := `SELECT endpoint_id `+due, []any{now.UnixMilli(), now.UnixMilli(), env}
		if len(skip) > 0 {
			query += ` AND endpoint_id NOT IN (?` + strings.Repeat(", ?", len(skip)-1) + `)`
			for _, id := range skip {
				args = append(args, id)
			}
		}
		endpoints, err := txRows(ctx, tx, scanOne[int64], query+` GROUP BY endpoint_id ORDER BY min(next_at) LIMIT ?`, append(args, limit)...)
		for _, id := range endpoints {
			if err != nil || len(claimed) >= limit {
				break
			}
			var got []domain.ClaimedDelivery
			got, err = claimForEndpoint(ctx, tx, id, now, claimFor, limit-len(claimed), take)
			claimed = append(claimed, got...)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return claimed, nil
}

// claimForEndpoint claims in tx up to limit of endpoint id's due
// deliveries, the longest due first, as many as its live claims leave room
// for and take accepts. An endpoint whose row another transaction holds
// is left for the next round.
func claimForEndpoint(ctx context.Context, tx dbTx, id int64, now time.Time, claimFor time.Duration, limit int,
	take func(endpointID int64) bool) ([]domain.ClaimedDelivery, error) {
	var locked int64
	err := tx.QueryRow(ctx, `SELECT id FROM webhook_endpoints WHERE id = ? AND enabled = 1`+tx.Dialect().skipLocked, id).Scan(&locked)
	if errors.Is(err, errNoRows) {
		return nil, nil
	}
	var live int
	if err == nil {
		err = tx.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = ? AND claimed_until > ?`, id, now.UnixMilli()).Scan(&live)
	}
	room := min(domain.MaxInFlightPerEndpoint-live, limit)
	if err != nil || room <= 0 {
		return nil, err
	}
	events, err := txRows(ctx, tx, scanOne[string], `SELECT event_id FROM webhook_deliveries WHERE endpoint_id = ? AND state = 'pending'
		AND next_at <= ? AND claimed_until <= ? ORDER BY next_at LIMIT ?`+tx.Dialect().skipLocked, id, now.UnixMilli(), now.UnixMilli(), room)
	var claimed []domain.ClaimedDelivery
	for _, event := range events {
		if err != nil || !take(id) {
			break
		}
		if _, err = tx.Exec(ctx, `UPDATE webhook_deliveries SET claimed_until = ? WHERE event_id = ? AND endpoint_id = ?`,
			now.Add(claimFor).UnixMilli(), event, id); err != nil {
			break
		}
		var c domain.ClaimedDelivery
		if c, err = claimedOf(ctx, tx, event, id, now); err == nil {
			claimed = append(claimed, c)
		}
	}
	return claimed, err
}

const deliveryColumns = `d.event_id, ev.type, d.endpoint_id, ev.at, d.state, d.attempts, d.next_at, d.last_attempt_at, d.last_status, d.last_error`

func scanDelivery(scan func(...any) error, more ...any) (domain.WebhookDelivery, error) {
	var d domain.WebhookDelivery
	var at, next int64
	var lastAttempt, lastStatus sql.NullInt64
	var lastError sql.NullString
	dest := append([]any{&d.EventID, &d.Type, &d.EndpointID, &at, &d.State, &d.Attempts, &next, &lastAttempt, &lastStatus, &lastError}, more...)
	if err := scan(dest...); err != nil {
		return d, err
	}
	d.At, d.NextAt = time.UnixMilli(at).UTC(), time.UnixMilli(next).UTC()
	d.LastAttempt, d.LastStatus, d.LastError = milliOrZero(lastAttempt), int(lastStatus.Int64), lastError.String
	return d, nil
}

// claimedOf reads what sending a claimed delivery takes.
func claimedOf(ctx context.Context, tx dbTx, eventID string, endpointID int64, now time.Time) (domain.ClaimedDelivery, error) {
	var c domain.ClaimedDelivery
	var body string
	var e domain.WebhookEndpoint
	var previous, cause sql.NullString
	var previousUntil sql.NullInt64
	d, err := scanDelivery(tx.QueryRow(ctx, `SELECT `+deliveryColumns+`, ev.body, ev.trace_context, e.url, e.secret, e.previous_secret, e.previous_until
		FROM webhook_deliveries d JOIN webhook_events ev ON ev.id = d.event_id JOIN webhook_endpoints e ON e.id = d.endpoint_id
		WHERE d.event_id = ? AND d.endpoint_id = ?`, eventID, endpointID).Scan, &body, &cause, &e.URL, &e.Secret, &previous, &previousUntil)
	if err != nil {
		return c, err
	}
	e.PreviousSecret, e.PreviousUntil = previous.String, milliOrZero(previousUntil)
	keys, err := e.SigningKeys(now)
	if err != nil {
		return c, err
	}
	return domain.ClaimedDelivery{WebhookDelivery: d, URL: e.URL, Keys: keys, Body: []byte(body), Cause: cause.String}, nil
}

// traceCause is the trace context ev, queued in ctx, keeps, so that its
// deliveries' spans link to what caused it, however much later and on
// whichever server: ev's own Cause when it has one, else that of the
// sampled request ctx belongs to (tracing.Cause), else NULL. With tracing
// off it allocates nothing and calls no tracer.
func traceCause(ctx context.Context, ev domain.WebhookEvent) any {
	if ev.Cause != "" {
		return ev.Cause
	}
	if cause := tracing.Cause(ctx); cause != "" {
		return cause
	}
	return nil
}

func (s sqlWebhooks) FinishWebhookDelivery(ctx context.Context, o domain.DeliveryOutcome, actor string) (disabled string, err error) {
	at := o.At.UnixMilli()
	if o.NextAt.IsZero() {
		o.NextAt = o.At
	}
	_, err = s.withEndpoint(ctx, o.EndpointID, "", func(tx dbTx, e *domain.WebhookEndpoint) error {
		disabled = ""
		n, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET state = ?, attempts = ?, next_at = ?, claimed_until = 0,
			last_attempt_at = ?, last_status = ?, last_error = ? WHERE event_id = ? AND endpoint_id = ?`,
			o.State, o.Attempts, o.NextAt.UnixMilli(), at, o.Status, nullText(o.Err), o.EventID, o.EndpointID)
		if err != nil || n == 0 {
			return err
		}
		if o.State == domain.DeliveryDelivered {
			_, err := tx.Exec(ctx, `UPDATE webhook_endpoints SET last_attempt_at = ?, last_status = ?, last_error = NULL, failing_since = NULL WHERE id = ?`,
				at, o.Status, o.EndpointID)
			return err
		}
		var failingSince int64
		if err := tx.QueryRow(ctx, `UPDATE webhook_endpoints SET last_attempt_at = ?, last_status = ?, last_error = ?,
			failing_since = coalesce(failing_since, ?) WHERE id = ? RETURNING failing_since`,
			at, o.Status, o.Err, at, o.EndpointID).Scan(&failingSince); err != nil {
			return err
		}
		switch {
		case !e.Enabled:
			return nil
		case o.Disable != "":
			disabled = o.Disable
		case o.At.Sub(time.UnixMilli(failingSince)) >= domain.FailingDisableAfter:
			disabled = "every delivery failed for " + domain.FailingDisableAfter.String()
		default:
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE webhook_endpoints SET enabled = 0 WHERE id = ?`, o.EndpointID); err != nil {
			return err
		}
		return recordActions(ctx, tx, domain.WebhookAuditEvent(domain.AuditWebhookDisabled, *e, actor, e.Env, o.At, disabled))
	})
	// An endpoint removed meanwhile took its deliveries along: nothing to
	// record.
	if gone, ok := errors.AsType[*domain.Error](err); ok && gone.Kind == domain.KindNotFound {
		return "", nil
	}
	return disabled, err
}

func (s sqlWebhooks) WebhookDeliveries(ctx context.Context, f domain.DeliveryFilter) ([]domain.WebhookDelivery, error) {
	where, args := deliveryWhere(f)
	query := `SELECT ` + deliveryColumns + ` FROM webhook_deliveries d JOIN webhook_events ev ON ev.id = d.event_id` +
		where + ` ORDER BY ev.at DESC, d.event_id, d.endpoint_id`
	if f.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return queryRows(ctx, s.db, func(scan func(...any) error) (domain.WebhookDelivery, error) { return scanDelivery(scan) }, query, args...)
}

// deliveryWhere is the WHERE clause of the deliveries f picks, d their
// table.
func deliveryWhere(f domain.DeliveryFilter) (string, []any) {
	var where []string
	var args []any
	if f.Env != "" {
		where, args = append(where, "d.endpoint_id IN (SELECT id FROM webhook_endpoints WHERE env = ?)"), append(args, f.Env)
	}
	if f.EndpointID != 0 {
		where, args = append(where, "d.endpoint_id = ?"), append(args, f.EndpointID)
	}
	if f.EventID != "" {
		where, args = append(where, "d.event_id = ?"), append(args, f.EventID)
	}
	if f.Failed {
		where = append(where, "d.state = 'failed'")
	}
	if len(where) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(where, " AND "), args
}

// ResendWebhookDeliveries counts the attempts afresh; an event keeps its id.
func (s sqlWebhooks) ResendWebhookDeliveries(ctx context.Context, f domain.DeliveryFilter, now time.Time) (int64, error) {
	where, args := deliveryWhere(f)
	var n int64
	err := s.db.update(ctx, func(tx dbTx) error {
		var err error
		n, err = tx.Exec(ctx, `UPDATE webhook_deliveries SET state = 'pending', attempts = 0, next_at = ?, claimed_until = 0
			WHERE (event_id, endpoint_id) IN (SELECT d.event_id, d.endpoint_id FROM webhook_deliveries d`+where+`)`,
			append([]any{now.UnixMilli()}, args...)...)
		return err
	})
	return n, err
}

func (s sqlWebhooks) WebhookBacklog(ctx context.Context, env string) (int64, time.Time, error) {
	var n int64
	var oldest sql.NullInt64
	err := s.db.view(ctx, func(tx dbTx) error {
		return tx.QueryRow(ctx, `SELECT count(*), min(ev.at) FROM webhook_deliveries d JOIN webhook_events ev ON ev.id = d.event_id
			WHERE d.state = 'pending' AND d.endpoint_id IN (SELECT id FROM webhook_endpoints WHERE enabled = 1 AND env = ?)`, env).Scan(&n, &oldest)
	})
	return n, milliOrZero(oldest), err
}

// keepDeliveries is how long the deliveries that are over are kept, with
// their events.
const keepDeliveries = 30 * 24 * time.Hour

// PruneWebhooks forgets, at now, the marks of notices past their forget_at
// (by its index) and the deliveries delivered or failed for
// keepDeliveries, with the events that have no delivery left.
func (s sqlWebhooks) PruneWebhooks(ctx context.Context, now time.Time) error {
	return s.db.update(ctx, func(tx dbTx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM webhook_notices WHERE forget_at < ?`, now.UnixMilli()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM webhook_deliveries WHERE state <> 'pending' AND last_attempt_at < ?`,
			now.Add(-keepDeliveries).UnixMilli()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM webhook_events WHERE at < ? AND NOT EXISTS
			(SELECT 1 FROM webhook_deliveries d WHERE d.event_id = webhook_events.id)`, now.Add(-keepDeliveries).UnixMilli())
		return err
	})
}
