package manage

import (
	"context"
	"strconv"
	"time"

	"petstore/internal/domain"
	"petstore/internal/limits"
)

// UsageDays reads how many days a usage report covers, given as field: 1
// to maxUsageDays.
func UsageDays(field, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxUsageDays || !domain.IsDigits(s) {
		return 0, domain.Invalid("%s must be an integer from 1 to %d", field, maxUsageDays)
	}
	return n, nil
}

// KeyUsage is the usage history of key id's budget over the days days
// ending today: one row a day, oldest first. An unknown id is not_found.
func KeyUsage(ctx context.Context, store interface {
	domain.KeyStore
	domain.UsageHistoryStore
}, id int64, days int, now time.Time) ([]domain.UsageDay, error) {
	k, _, err := FindKey(ctx, store, id)
	if err != nil {
		return nil, err
	}
	first := limits.UnixDay(now) - int64(days-1)
	history, err := store.UsageHistory(ctx, k.BudgetID, limits.DayString(first))
	if err != nil {
		return nil, err
	}
	return usageWindow(k.BudgetID, history, first, days), nil
}

const (
	UsageHistoryDays       = 400 // days kept
	maxUsageDays           = 400 // the most a report asks for: those kept
	DefaultUsageDays       = 30
	UsageHistoryPruneEvery = time.Hour
)

// usageWindow is the days of a report of days days from the Unix day first,
// oldest first: one row each, zeros where history has none.
func usageWindow(budgetID int64, history []domain.UsageDay, first int64, days int) []domain.UsageDay {
	byDay := make(map[string]domain.UsageDay, len(history))
	for _, h := range history {
		byDay[h.Day] = h
	}
	rows := make([]domain.UsageDay, days)
	for i := range rows {
		day := limits.DayString(first + int64(i))
		row, ok := byDay[day]
		if !ok {
			row = domain.UsageDay{BudgetID: budgetID, Day: day}
		}
		rows[i] = row
	}
	return rows
}

// UsageHistoryCutoff is the first day the history keeps at now.
func UsageHistoryCutoff(now time.Time) string {
	return limits.DayString(limits.UnixDay(now) - UsageHistoryDays + 1)
}
