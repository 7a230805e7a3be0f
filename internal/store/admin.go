// The admin API's storage, written once for both engines over sqlEngine:
// admin tokens with their audit events, changes of a key in place, and a
// key's usage: the day's and its history.

package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"petstore/internal/domain"
)

func (s sqlKeys) CreateAdminToken(ctx context.Context, t domain.AdminToken, actor string) (domain.AdminToken, error) {
	now := s.db.clock()
	t.CreatedAt = now.UTC().Truncate(time.Second)
	err := s.db.update(ctx, func(tx dbTx) error {
		id, err := tx.Insert(ctx, `INSERT INTO admin_tokens (hash, name, scopes, env, created_at) VALUES (?, ?, ?, ?, ?)`,
			t.Hash, t.Name, t.Scopes.String(), t.Env, t.CreatedAt.Unix())
		if err != nil {
			return err
		}
		t.ID = id
		return recordActions(ctx, tx, domain.AdminEvent(domain.AuditAdminCreated, t, actor, now))
	})
	return t, err
}

// adminTokenColumns are the columns scanAdminToken reads, in its order.
const adminTokenColumns = `id, hash, name, scopes, env, created_at, revoked_at`

func scanAdminToken(scan func(...any) error) (domain.AdminToken, error) {
	var t domain.AdminToken
	var scopes string
	var created int64
	var revoked sql.NullInt64
	if err := scan(&t.ID, &t.Hash, &t.Name, &scopes, &t.Env, &created, &revoked); err != nil {
		return domain.AdminToken{}, err
	}
	t.Scopes = domain.StoredScopes(scopes, domain.AllAdminScopes)
	t.CreatedAt, t.RevokedAt = time.Unix(created, 0).UTC(), unixOrZero(revoked)
	return t, nil
}

// AdminTokens returns every admin token, revoked ones too, oldest first.
func (s sqlKeys) AdminTokens(ctx context.Context) ([]domain.AdminToken, error) {
	return queryRows(ctx, s.db, scanAdminToken, `SELECT `+adminTokenColumns+` FROM admin_tokens ORDER BY id`)
}

// AdminTokenByHash returns the admin token with hash, revoked or not.
func (s sqlKeys) AdminTokenByHash(ctx context.Context, hash []byte) (t domain.AdminToken, ok bool, err error) {
	err = s.db.view(ctx, func(tx dbTx) error {
		t, err = scanAdminToken(tx.QueryRow(ctx, `SELECT `+adminTokenColumns+` FROM admin_tokens WHERE hash = ?`, hash).Scan)
		return err
	})
	if errors.Is(err, errNoRows) {
		return domain.AdminToken{}, false, nil
	}
	return t, err == nil, err
}

func (s sqlKeys) RevokeAdminToken(ctx context.Context, id int64, actor string) (revoked bool, err error) {
	now := s.db.clock()
	err = s.db.update(ctx, func(tx dbTx) error {
		t, err := scanAdminToken(tx.QueryRow(ctx, `SELECT `+adminTokenColumns+` FROM admin_tokens WHERE id = ?`+tx.Dialect().forUpdate, id).Scan)
		switch {
		case errors.Is(err, errNoRows):
			return domain.NotFound("no admin token has id %d", id)
		case err != nil || !t.RevokedAt.IsZero():
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE admin_tokens SET revoked_at = ? WHERE id = ?`, now.Unix(), id); err != nil {
			return err
		}
		revoked = true
		return recordActions(ctx, tx, domain.AdminEvent(domain.AuditAdminRevoked, t, actor, now))
	})
	return revoked && err == nil, err
}

// UpdateKey locks the key's row for the change.
func (s sqlKeys) UpdateKey(ctx context.Context, id int64, change func(domain.Key) (domain.Key, error), actor string) (before, after domain.Key, err error) {
	now := s.db.clock()
	err = s.keysUpdate(ctx, func(tx dbTx) error {
		if before, err = keyForUpdate(ctx, tx, id); err != nil {
			return err
		}
		if after, err = change(before); err != nil {
			return err
		}
		if after.ExternalID != before.ExternalID {
			if err := externalIDTaken(ctx, tx, after.ExternalID); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE api_keys SET name = ?, plan = ?, rpm = ?, rpd = ?, scopes = ?, expires_at = ?, external_id = ? WHERE id = ?`,
			after.Name, after.Plan, after.PerMinute, after.PerDay, after.Scopes.String(), nullUnix(after.ExpiresAt), nullText(after.ExternalID), id); err != nil {
			return err
		}
		return recordActions(ctx, tx, domain.UpdateEvent(before, after, actor, now))
	})
	return before, after, err
}

// externalIDTaken refuses a new key with externalID, or a key changed to
// hold it, while a key that is not revoked holds it (409 conflict, naming
// that key). The table is locked first on PostgreSQL, so that two creates
// with one externalID at once cannot both pass the check.
func externalIDTaken(ctx context.Context, tx dbTx, externalID string) error {
	if externalID == "" {
		return nil
	}
	if lock := tx.Dialect().lockTable("api_keys"); lock != "" {
		if _, err := tx.Exec(ctx, lock); err != nil {
			return err
		}
	}
	var id int64
	err := tx.QueryRow(ctx, `SELECT id FROM api_keys WHERE external_id = ? AND revoked_at IS NULL`, externalID).Scan(&id)
	switch {
	case errors.Is(err, errNoRows):
		return nil
	case err != nil:
		return err
	}
	return domain.Conflict("externalId %q belongs to key %d already, which is not revoked: that key is the one made for it", externalID, id)
}

// Usage returns how many requests key made on day.
func (s sqlKeys) Usage(ctx context.Context, keyID int64, day string) (n int64, err error) {
	err = s.db.view(ctx, func(tx dbTx) error {
		return tx.QueryRow(ctx, `SELECT count FROM usage WHERE key_id = ? AND day = ?`, keyID, day).Scan(&n)
	})
	if errors.Is(err, errNoRows) {
		return 0, nil
	}
	return n, err
}

// AddUsageHistory adds each row's counts to what the history holds for its
// budget and day, in one transaction, each batch once (eachNewBatch): every
// server adds its own.
func (s sqlKeys) AddUsageHistory(ctx context.Context, rows []domain.UsageDay) error {
	return s.db.update(ctx, func(tx dbTx) error {
		return eachNewBatch(ctx, tx, s.db.clock(), rows, func(r domain.UsageDay) domain.Batch { return r.Batch }, func(run []domain.UsageDay) error {
			for _, r := range run {
				if _, err := tx.Exec(ctx, `INSERT INTO usage_history (budget_id, day, allowed, rate_limited, quota_exceeded, banned, forbidden)
					VALUES (?, ?, ?, ?, ?, ?, ?)
					ON CONFLICT (budget_id, day) DO UPDATE SET allowed = usage_history.allowed + excluded.allowed,
						rate_limited = usage_history.rate_limited + excluded.rate_limited,
						quota_exceeded = usage_history.quota_exceeded + excluded.quota_exceeded,
						banned = usage_history.banned + excluded.banned, forbidden = usage_history.forbidden + excluded.forbidden`,
					r.BudgetID, r.Day, r.Allowed, r.RateLimited, r.QuotaExceeded, r.Banned, r.Forbidden); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func (s sqlKeys) UsageHistory(ctx context.Context, budgetID int64, from string) ([]domain.UsageDay, error) {
	return queryRows(ctx, s.db, func(scan func(...any) error) (domain.UsageDay, error) {
		d := domain.UsageDay{BudgetID: budgetID}
		err := scan(&d.Day, &d.Allowed, &d.RateLimited, &d.QuotaExceeded, &d.Banned, &d.Forbidden)
		return d, err
	}, `SELECT day, allowed, rate_limited, quota_exceeded, banned, forbidden FROM usage_history
		WHERE budget_id = ? AND day >= ? ORDER BY day`, budgetID, from)
}

// PruneUsageHistory deletes the days before day before (through the index
// on day) and returns how many rows went.
func (s sqlKeys) PruneUsageHistory(ctx context.Context, before string) (n int64, err error) {
	err = s.db.update(ctx, func(tx dbTx) error {
		n, err = tx.Exec(ctx, `DELETE FROM usage_history WHERE day < ?`, before)
		return err
	})
	return n, err
}
