package store

import (
	"errors"
	"slices"
	"testing"
	"time"

	"petstore/internal/domain"
)

// A flush whose answer was lost is sent again, with the same batch, before
// the next one: each batch's counts are added once, on both engines, for
// the day counts and for the usage history alike.
func TestABatchSentAgainIsAddedOnce(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, s Storage) {
		ctx := t.Context()
		key, day := keyAndToday(t, s)
		count := func(stream string, n, c int64) domain.UsageCount {
			return domain.UsageCount{KeyID: key, Day: day, Count: c, Batch: domain.Batch{Stream: stream, N: n}}
		}
		// A stream is one flusher's: the history's are others than the counts'.
		history := func(stream string, n, allowed int64) domain.UsageDay {
			return domain.UsageDay{BudgetID: key, Day: day, Allowed: allowed, Batch: domain.Batch{Stream: "history " + stream, N: n}}
		}
		for _, step := range []struct {
			name    string
			counts  []domain.UsageCount
			history []domain.UsageDay
			want    int64
		}{
			{"a first batch is added", []domain.UsageCount{count("a", 1, 5)}, []domain.UsageDay{history("a", 1, 5)}, 5},
			{"the same batch sent again is left out", []domain.UsageCount{count("a", 1, 5)}, []domain.UsageDay{history("a", 1, 5)}, 5},
			{"a batch sent again before the next: only the next is added",
				[]domain.UsageCount{count("a", 1, 5), count("a", 2, 3), count("a", 2, 4)},
				[]domain.UsageDay{history("a", 1, 5), history("a", 2, 7)}, 12},
			{"an earlier batch after a later one is left out", []domain.UsageCount{count("a", 1, 5)}, []domain.UsageDay{history("a", 1, 5)}, 12},
			{"another stream's first batch is added", []domain.UsageCount{count("b", 1, 1)}, []domain.UsageDay{history("b", 1, 1)}, 13},
		} {
			if err := s.AddUsage(ctx, step.counts); err != nil {
				t.Fatalf("%s: AddUsage: %v", step.name, err)
			}
			if err := s.AddUsageHistory(ctx, step.history); err != nil {
				t.Fatalf("%s: AddUsageHistory: %v", step.name, err)
			}
			if n, err := s.Usage(ctx, key, day); err != nil || n != step.want {
				t.Errorf("%s: the day's count is %d (%v), want %d", step.name, n, err, step.want)
			}
			days, err := s.UsageHistory(ctx, key, day)
			if err != nil || len(days) != 1 || days[0].Allowed != step.want {
				t.Errorf("%s: the history holds %+v (%v), want %d allowed", step.name, days, err, step.want)
			}
		}
	})
}

// Counts without the batch of their flush could not be told from a flush
// sent again: they are refused, and nothing of the write is kept.
func TestCountsWithoutTheirBatchAreRefused(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, s Storage) {
		ctx := t.Context()
		key, day := keyAndToday(t, s)
		batch := domain.Batch{Stream: "a", N: 1}
		err := s.AddUsage(ctx, []domain.UsageCount{{KeyID: key, Day: day, Count: 2, Batch: batch}, {KeyID: key, Day: day, Count: 3}})
		if !errors.Is(err, errNoBatch) {
			t.Errorf("AddUsage with a count of no batch: %v, want %v", err, errNoBatch)
		}
		if err := s.AddUsageHistory(ctx, []domain.UsageDay{{BudgetID: key, Day: day, Allowed: 1}}); !errors.Is(err, errNoBatch) {
			t.Errorf("AddUsageHistory with a row of no batch: %v, want %v", err, errNoBatch)
		}
		if n, err := s.Usage(ctx, key, day); err != nil || n != 0 {
			t.Errorf("after the refused write the day's count is %d (%v), want 0", n, err)
		}
		// The batch of the refused write was not taken: it is added when sent.
		if err := s.AddUsage(ctx, []domain.UsageCount{{KeyID: key, Day: day, Count: 2, Batch: batch}}); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Usage(ctx, key, day); err != nil || n != 2 {
			t.Errorf("the batch sent again alone: the day's count is %d (%v), want 2", n, err)
		}
	})
}

// The streams' marks go with the days of usage, a week after their last
// batch; a stream seen since stays.
func TestStreamsArePrunedWithTheDaysOfUsage(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, s Storage) {
		ctx := t.Context()
		key, day := keyAndToday(t, s)
		for _, stream := range []string{"old", "new"} {
			if err := s.AddUsage(ctx, []domain.UsageCount{{KeyID: key, Day: day, Count: 1, Batch: domain.Batch{Stream: stream, N: 1}}}); err != nil {
				t.Fatal(err)
			}
		}
		old := time.Now().Add(-keepUsage - time.Minute).Unix()
		if err := s.(sqlEngine).update(ctx, func(tx dbTx) error {
			_, err := tx.Exec(ctx, `UPDATE usage_streams SET added_at = ? WHERE stream = 'old'`, old)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddUsage(ctx, []domain.UsageCount{{KeyID: key, Day: day, Count: 1, Batch: domain.Batch{Stream: "new", N: 2}}}); err != nil {
			t.Fatal(err)
		}
		var streams []string
		if err := s.(sqlEngine).view(ctx, func(tx dbTx) error {
			rows, err := tx.Query(ctx, `SELECT stream FROM usage_streams ORDER BY stream`)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var name string
				if err := rows.Scan(&name); err != nil {
					return err
				}
				streams = append(streams, name)
			}
			return rows.Err()
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(streams, []string{"new"}) {
			t.Errorf("streams kept: %v, want only the one seen this week", streams)
		}
	})
}

// keyAndToday are a new key's id and today's date, for a usage test.
func keyAndToday(t *testing.T, s Storage) (int64, string) {
	t.Helper()
	return createTestKey(t, t.Context(), s).ID, time.Now().UTC().Format(time.DateOnly)
}
