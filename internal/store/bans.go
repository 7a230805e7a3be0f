// The bans, written once for both engines over sqlEngine: a ban is stored
// with its key.banned event, and lifted with its ban.lifted event, each as
// one transaction.

package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"petstore/internal/domain"
)

type sqlBans struct{ db sqlEngine }

// MaxStoredAddressBans bounds the address bans the table keeps: an address
// ban beyond it drops the one that ends soonest, so that a client rotating
// its addresses cannot grow the table without bound.
const MaxStoredAddressBans = 10_000

// banColumns are the columns scanBan reads, in its order.
const banColumns = `subject, started_at, ends_at, lifted_at, version`

// AddBans: a stored ban of the same subject gives way only to one that ends
// later and, when it was lifted, began after the lift. Bans that have ended
// go, and address bans beyond MaxStoredAddressBans drop those that end
// soonest.
func (s sqlBans) AddBans(ctx context.Context, started []domain.StartedBan) error {
	now := s.db.clock().UnixMilli()
	return s.db.update(ctx, func(tx dbTx) error {
		version, err := nextBansVersion(ctx, tx)
		if err != nil {
			return err
		}
		addresses := false
		for _, b := range started {
			if _, err := tx.Exec(ctx, `INSERT INTO bans (subject, kind, started_at, ends_at, lifted_at, version) VALUES (?, ?, ?, ?, NULL, ?)
				ON CONFLICT (subject) DO UPDATE SET started_at = excluded.started_at, ends_at = excluded.ends_at, lifted_at = NULL, version = excluded.version
				WHERE excluded.ends_at > bans.ends_at AND (bans.lifted_at IS NULL OR excluded.started_at > bans.lifted_at)`,
				b.Ban.Subject.String(), b.Ban.Subject.Kind(), b.Ban.Since.UnixMilli(), b.Ban.Until.UnixMilli(), version); err != nil {
				return err
			}
			addresses = addresses || b.Ban.Subject.KeyID == 0
			if err := recordActions(ctx, tx, b.Event); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM bans WHERE ends_at <= ?`, now); err != nil || !addresses {
			return err
		}
		n, err := scanOne[int64](tx.QueryRow(ctx, `SELECT count(*) FROM bans WHERE kind = 'address'`).Scan)
		if err != nil || n <= MaxStoredAddressBans {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM bans WHERE subject IN (
			SELECT subject FROM bans WHERE kind = 'address' ORDER BY ends_at, subject LIMIT ?)`, n-MaxStoredAddressBans)
		return err
	})
}

// LiftBan: the keys of a roll share one budget, and so its ban. A key's
// ban is lifted only on its own environment; an address's on any.
func (s sqlBans) LiftBan(ctx context.Context, subject domain.CallerID, actor, env string) (domain.Ban, error) {
	now := s.db.clock()
	var b domain.Ban
	err := s.db.update(ctx, func(tx dbTx) error {
		named := subject
		var err error
		if subject.KeyID != 0 {
			// Only a key of env: another environment's key is not_found.
			err = tx.QueryRow(ctx, `SELECT coalesce(budget_id, id) FROM api_keys WHERE id = ? AND env = ?`, subject.KeyID, env).Scan(&subject.KeyID)
		}
		if err == nil {
			b, err = scanBan(tx.QueryRow(ctx, `SELECT `+banColumns+` FROM bans WHERE subject = ? AND lifted_at IS NULL AND ends_at > ?`+tx.Dialect().forUpdate,
				subject.String(), now.UnixMilli()).Scan)
		}
		if errors.Is(err, errNoRows) {
			return domain.NotFound("%s is not banned", named)
		}
		if err != nil {
			return err
		}
		version, err := nextBansVersion(ctx, tx)
		if err != nil {
			return err
		}
		b.LiftedAt, b.Version = domain.AuditTime(now), version
		if _, err := tx.Exec(ctx, `UPDATE bans SET lifted_at = ?, version = ? WHERE subject = ?`, b.LiftedAt.UnixMilli(), version, subject.String()); err != nil {
			return err
		}
		return recordActions(ctx, tx, domain.LiftEvent(b, named, actor, env, now))
	})
	return b, err
}

func (s sqlBans) Bans(ctx context.Context) ([]domain.Ban, error) {
	now := s.db.clock().UnixMilli()
	return queryRows(ctx, s.db, scanBan, `SELECT `+banColumns+` FROM bans WHERE lifted_at IS NULL AND ends_at > ? ORDER BY started_at, subject`, now)
}

func (s sqlBans) BanChanges(ctx context.Context, version int64) ([]domain.Ban, error) {
	return queryRows(ctx, s.db, scanBan, `SELECT `+banColumns+` FROM bans WHERE version > ? ORDER BY version`, version)
}

// nextBansVersion moves bans_version on, for a write that stores or lifts
// bans: the meta row stays locked until the write commits, so the
// versions commit in their order and a reader that sees one has seen
// every earlier one.
func nextBansVersion(ctx context.Context, tx dbTx) (int64, error) {
	return scanOne[int64](tx.QueryRow(ctx, `UPDATE meta SET value = value + 1 WHERE name = 'bans_version' RETURNING value`).Scan)
}

// scanBan reads one row of banColumns.
func scanBan(scan func(...any) error) (domain.Ban, error) {
	var b domain.Ban
	var subject string
	var since, until int64
	var lifted sql.NullInt64
	if err := scan(&subject, &since, &until, &lifted, &b.Version); err != nil {
		return domain.Ban{}, err
	}
	var err error
	if b.Subject, err = domain.ParseBanSubject(subject); err != nil {
		return domain.Ban{}, err
	}
	b.Since, b.Until, b.LiftedAt = time.UnixMilli(since).UTC(), time.UnixMilli(until).UTC(), milliOrZero(lifted)
	return b, nil
}
