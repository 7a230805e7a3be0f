// The servers' check-ins, written once for both engines over sqlEngine
// (docs/replicas.md, "Upgrading a fleet").

package store

import (
	"context"
	"time"

	"petstore/internal/domain"
)

type sqlServers struct{ db sqlEngine }

func (s sqlServers) CheckIn(ctx context.Context, sv domain.Server) error {
	return s.db.update(ctx, func(tx dbTx) error {
		if tx.Dialect().oneServer {
			if _, err := tx.Exec(ctx, `DELETE FROM servers WHERE address <> ?`, sv.Address); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO servers (address, version, revision, migrations, started_at, last_seen) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (address) DO UPDATE SET version = excluded.version, revision = excluded.revision,
				migrations = excluded.migrations, started_at = excluded.started_at, last_seen = excluded.last_seen`,
			sv.Address, sv.Version, sv.Revision, sv.Migrations, sv.StartedAt.Unix(), sv.LastSeen.Unix())
		return err
	})
}

func (s sqlServers) Servers(ctx context.Context) ([]domain.Server, error) {
	var out []domain.Server
	err := s.db.view(ctx, func(tx dbTx) error {
		rows, err := tx.Query(ctx, `SELECT address, version, revision, migrations, started_at, last_seen FROM servers ORDER BY last_seen DESC, address`)
		return each(rows, err, func(scan func(...any) error) error {
			var sv domain.Server
			var started, seen int64
			if err := scan(&sv.Address, &sv.Version, &sv.Revision, &sv.Migrations, &started, &seen); err != nil {
				return err
			}
			sv.StartedAt, sv.LastSeen = time.Unix(started, 0).UTC(), time.Unix(seen, 0).UTC()
			out = append(out, sv)
			return nil
		})
	})
	return out, err
}

func (s sqlServers) PruneServers(ctx context.Context, before time.Time) (n int64, err error) {
	err = s.db.update(ctx, func(tx dbTx) error {
		n, err = tx.Exec(ctx, `DELETE FROM servers WHERE last_seen < ?`, before.Unix())
		return err
	})
	return n, err
}
