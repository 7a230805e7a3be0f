package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"petstore/internal/domain"
)

// Usage counts and the usage history arrive in batches, one per flush of a
// server's flusher, and each batch is added once however often it is sent
// (domain.Batch; docs/design.md, "Usage counts").

// keepUsage is how long the days of usage, and the streams that added to
// them, are kept.
const keepUsage = 7 * 24 * time.Hour

var errNoBatch = errors.New("usage counts without the batch of their flush")

// eachNewBatch calls add with the rows of each batch its stream has not
// added yet, and moves the stream's last batch to it. Rows come grouped by
// batch, each stream's in its order.
func eachNewBatch[T any](ctx context.Context, tx dbTx, now time.Time, rows []T, batchOf func(T) domain.Batch, add func([]T) error) error {
	for len(rows) > 0 {
		b, n := batchOf(rows[0]), 1
		for n < len(rows) && batchOf(rows[n]) == b {
			n++
		}
		run := rows[:n]
		rows = rows[n:]
		if b.Stream == "" || b.N <= 0 {
			return errNoBatch
		}
		moved, err := tx.Exec(ctx, `INSERT INTO usage_streams (stream, last_batch, added_at) VALUES (?, ?, ?)
			ON CONFLICT (stream) DO UPDATE SET last_batch = excluded.last_batch, added_at = excluded.added_at
			WHERE usage_streams.last_batch < excluded.last_batch`, b.Stream, b.N, now.Unix())
		if err != nil {
			return fmt.Errorf("usage batch %d: %w", b.N, err)
		}
		if moved == 0 {
			continue // added when it was sent before
		}
		if err := add(run); err != nil {
			return err
		}
	}
	return nil
}

// addUsage is AddUsage on either engine, insert adding one batch's counts
// in its own SQL; the days and the streams past keepUsage go.
func addUsage(ctx context.Context, db sqlEngine, counts []domain.UsageCount, insert func(dbTx, []domain.UsageCount) error) error {
	now := db.clock()
	before := now.Add(-keepUsage)
	return db.update(ctx, func(tx dbTx) error {
		err := eachNewBatch(ctx, tx, now, counts, func(c domain.UsageCount) domain.Batch { return c.Batch },
			func(run []domain.UsageCount) error { return insert(tx, run) })
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM usage WHERE day < ?`, before.UTC().Format(time.DateOnly)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM usage_streams WHERE added_at < ?`, before.Unix())
		return err
	})
}
