// The keys and their audit trail, written once for both engines over
// sqlEngine: each change of a key and its audit event are one transaction.

package store

import (
	"context"
	"errors"
	"time"

	"petstore/internal/domain"
)

type sqlKeys struct{ db sqlEngine }

// CreateKey stores k (its Hash set, its ExpiresAt and BudgetID when it has
// them) and its key.created event, and returns it with its id.
func (s sqlKeys) CreateKey(ctx context.Context, k domain.Key, actor string) (domain.Key, error) {
	now := s.db.clock()
	err := s.keysUpdate(ctx, func(tx dbTx) error {
		var err error
		k, err = insertCreatedKey(ctx, tx, k, actor, now)
		return err
	})
	return k, err
}

// CreateFirstKey's check and insert see no other writer between them:
// SQLite's write transaction is the file's only writer, and on PostgreSQL
// the table lock (which reads do not wait for) makes a second server's
// check wait for the first's commit. keep runs once the key and its
// event are written, before the commit.
func (s sqlKeys) CreateFirstKey(ctx context.Context, k domain.Key, actor string, keep func(domain.Key) error) (domain.Key, bool, error) {
	now := s.db.clock()
	err := s.keysUpdate(ctx, func(tx dbTx) error {
		if lock := tx.Dialect().lockTable("api_keys"); lock != "" {
			if _, err := tx.Exec(ctx, lock); err != nil {
				return err
			}
		}
		exists, err := scanOne[bool](tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM api_keys)`).Scan)
		if err != nil {
			return err
		}
		if exists {
			return errKeysExist
		}
		k, err = insertCreatedKey(ctx, tx, k, actor, now)
		if err != nil || keep == nil {
			return err
		}
		return keep(k)
	})
	if errors.Is(err, errKeysExist) {
		return domain.Key{}, false, nil
	}
	return k, err == nil, err
}

// errKeysExist rolls back CreateFirstKey's transaction when a key exists.
var errKeysExist = errors.New("a key exists")

// RollKey locks the old key's row for the change, so that of two rolls of
// one key made at once by two processes one succeeds.
func (s sqlKeys) RollKey(ctx context.Context, id int64, hash []byte, overlap time.Duration, actor string) (old, rolled domain.Key, err error) {
	now := s.db.clock()
	err = s.keysUpdate(ctx, func(tx dbTx) error {
		if old, err = keyForUpdate(ctx, tx, id); err != nil {
			return err
		}
		if err := domain.Rollable(old, now); err != nil {
			return err
		}
		if rolled, err = insertKey(ctx, tx, domain.Successor(old, hash), now); err != nil {
			return err
		}
		old.ExpiresAt, old.RolledTo = domain.RollEnd(old, now, overlap), rolled.ID
		if _, err = tx.Exec(ctx, `UPDATE api_keys SET expires_at = ?, rolled_to = ? WHERE id = ?`, old.ExpiresAt.Unix(), old.RolledTo, old.ID); err != nil {
			return err
		}
		return recordActions(ctx, tx, domain.RollEvent(old, rolled, overlap, actor, now))
	})
	return old, rolled, err
}

// RevokeKey locks the key's row for the change, so that of two revocations
// at once one leaves the event.
func (s sqlKeys) RevokeKey(ctx context.Context, id int64, actor string) (revoked bool, err error) {
	now := s.db.clock()
	err = s.keysUpdate(ctx, func(tx dbTx) error {
		k, err := keyForUpdate(ctx, tx, id)
		if err != nil || !k.RevokedAt.IsZero() {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE api_keys SET revoked_at = ? WHERE id = ?`, now.Unix(), id); err != nil {
			return err
		}
		revoked = true
		return recordActions(ctx, tx, domain.KeyEvent(domain.AuditKeyRevoked, k, actor, now))
	})
	return revoked && err == nil, err
}

// Keys returns every key, revoked ones too, oldest first.
func (s sqlKeys) Keys(ctx context.Context) ([]domain.Key, error) {
	return queryRows(ctx, s.db, scanKey, `SELECT `+keyColumns+` FROM api_keys ORDER BY id`)
}

// keysUpdate runs fn in a write transaction that also bumps keys_version,
// so that every running server reloads its keys.
func (s sqlKeys) keysUpdate(ctx context.Context, fn func(dbTx) error) error {
	return s.db.update(ctx, func(tx dbTx) error {
		if err := fn(tx); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE meta SET value = value + 1 WHERE name = 'keys_version'`)
		return err
	})
}

// keyForUpdate reads key id in tx for a change of it; an unknown id is
// not_found.
func keyForUpdate(ctx context.Context, tx dbTx, id int64) (domain.Key, error) {
	k, err := scanKey(tx.QueryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE id = ?`+tx.Dialect().forUpdate, id).Scan)
	if errors.Is(err, errNoRows) {
		return domain.Key{}, domain.NotFound("no API key has id %d", id)
	}
	return k, err
}

// insertCreatedKey inserts k and its key.created event; a key that is not
// revoked holding k's ExternalID refuses it (conflict).
func insertCreatedKey(ctx context.Context, tx dbTx, k domain.Key, actor string, now time.Time) (domain.Key, error) {
	if err := externalIDTaken(ctx, tx, k.ExternalID); err != nil {
		return k, err
	}
	k, err := insertKey(ctx, tx, k, now)
	if err != nil {
		return k, err
	}
	return k, recordActions(ctx, tx, domain.KeyEvent(domain.AuditKeyCreated, k, actor, now))
}

func insertKey(ctx context.Context, tx dbTx, k domain.Key, now time.Time) (domain.Key, error) {
	k.CreatedAt = now.UTC().Truncate(time.Second)
	id, err := tx.Insert(ctx,
		`INSERT INTO api_keys (hash, name, plan, rpm, rpd, env, scopes, created_at, expires_at, budget_id, external_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.Hash, k.Name, k.Plan, k.PerMinute, k.PerDay, k.Env, k.Scopes.String(), k.CreatedAt.Unix(), nullUnix(k.ExpiresAt), nullID(k.BudgetID),
		nullText(k.ExternalID))
	if err != nil {
		return k, err
	}
	k.ID = id
	if k.BudgetID == 0 {
		k.BudgetID = k.ID
	}
	return k, nil
}

func (s sqlKeys) AuditEvents(ctx context.Context, filter domain.AuditFilter) ([]domain.AuditEvent, error) {
	query, args := auditQuery(filter)
	return queryRows(ctx, s.db, scanAuditEvent, query, args...)
}

func (s sqlKeys) AuditCounts(ctx context.Context) (map[string]int64, error) {
	var counts map[string]int64
	err := s.db.view(ctx, func(tx dbTx) error {
		counts = make(map[string]int64)
		rows, err := tx.Query(ctx, `SELECT action, count(*) FROM audit_events GROUP BY action`)
		return each(rows, err, func(scan func(...any) error) error {
			var action string
			var n int64
			err := scan(&action, &n)
			counts[action] = n
			return err
		})
	})
	return counts, err
}
