package main

import (
	"context"
	"sync/atomic"

	"petstore/internal/domain"
	"petstore/internal/limits"
)

// The usage history (docs/admin.md, "The usage history"): for each budget (the
// keys of a roll share one) and UTC day, every request that carried a valid
// key, counted once in one of five columns. A request adds one to an
// atomic counter of its key; the flush every usageFlushEvery writes the
// counts of every key, summed by budget and day, in one batch, where each
// server's counts are added to what the others wrote. Days older than
// usageHistoryDays are pruned hourly.

// outcomeOf is the column of a request the limiter refused with d.
func outcomeOf(d *limits.Decision) domain.UsageOutcome {
	switch {
	case d.Code == codeTemporarilyBanned:
		return domain.UsageBanned
	case d.OverQuota:
		return domain.UsageQuotaExceeded
	}
	return domain.UsageRateLimited
}

// dayTally counts one key's requests of one UTC day by outcome.
type dayTally struct {
	day atomic.Int64 // days since 1970-01-01
	n   [domain.UsageOutcomes]atomic.Int64
}

// count adds a request of the key on day (days since 1970-01-01) to its
// tally: no lock and no allocation. A key keeps two days, by the day's
// parity, so that the requests just before midnight and just after it
// stay apart until the next flush takes them. A slot still holding the day
// before yesterday (flushes failing for a day) takes the new day's counts
// over with them.
func (u *keyUse) count(day int64, o domain.UsageOutcome) {
	t := &u.tally[day&1]
	if t.day.Load() != day {
		t.day.Store(day)
	}
	t.n[o].Add(1)
}

// flushUsage writes the requests counted since the last flush, summed by
// budget and day, through add. What fails to be written is counted again
// for the next flush.
func (k *keyring) flushUsage(ctx context.Context, add func(context.Context, []domain.UsageDay) error) error {
	type taken struct {
		t *dayTally
		n [domain.UsageOutcomes]int64
	}
	var took []taken
	rows := make(map[limits.KeyDay]*domain.UsageDay)
	k.mu.RLock()
	for _, u := range k.uses {
		for i := range u.tally {
			t := &u.tally[i]
			var got taken
			counted := false
			for o := range domain.UsageOutcomes {
				if got.n[o] = t.n[o].Swap(0); got.n[o] != 0 {
					counted = true
				}
			}
			if !counted {
				continue
			}
			got.t = t
			took = append(took, got)
			kd := limits.KeyDay{KeyID: u.budget, Day: t.day.Load()}
			row := rows[kd]
			if row == nil {
				row = &domain.UsageDay{BudgetID: kd.KeyID, Day: limits.DayString(kd.Day)}
				rows[kd] = row
			}
			for o, n := range got.n {
				row.Add(domain.UsageOutcome(o), n)
			}
		}
	}
	k.mu.RUnlock()
	if len(rows) == 0 {
		return nil
	}
	batch := make([]domain.UsageDay, 0, len(rows))
	for _, row := range rows {
		batch = append(batch, *row)
	}
	if err := add(ctx, batch); err != nil {
		for _, got := range took {
			for o, n := range got.n {
				got.t.n[o].Add(n)
			}
		}
		return err
	}
	return nil
}
