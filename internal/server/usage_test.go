package server

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"petstore/internal/domain"
	"petstore/internal/keyring"
	"petstore/internal/limits"
)

func TestUsageCountsOfTwoDaysStayApartAndAFailedFlushLosesNone(t *testing.T) {
	s := newTestServer(t)
	ctx := context.Background()
	_, token := s.mustCreate(s.keyTerms("free"))
	h, _, err := s.keys.Lookup(ctx, token, nil)
	if err != nil || h == nil {
		t.Fatalf("lookup: %v", err)
	}
	today := limits.UnixDay(s.clock.now())
	h.Use.Count(today-1, domain.UsageAllowed) // just before midnight, flushed after it
	h.Use.Count(today, domain.UsageAllowed)
	h.Use.Count(today, domain.UsageBanned)

	failing := errors.New("the database is away")
	if err := s.keys.FlushUsage(ctx, func(context.Context, []domain.UsageDay) error { return failing }); err != failing {
		t.Fatalf("flush: %v, want the write's error", err)
	}
	h.Use.Count(today, domain.UsageForbidden) // counted while the write failed
	var written []domain.UsageDay
	if err := s.keys.FlushUsage(ctx, func(_ context.Context, rows []domain.UsageDay) error { written = rows; return nil }); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(written, func(a, b domain.UsageDay) int { return strings.Compare(a.Day, b.Day) })
	want := []domain.UsageDay{
		{BudgetID: h.Key.BudgetID, Day: limits.DayString(today - 1), Allowed: 1},
		{BudgetID: h.Key.BudgetID, Day: limits.DayString(today), Allowed: 1, Banned: 1, Forbidden: 1},
	}
	if !slices.Equal(written, want) {
		t.Errorf("flushed %+v, want %+v", written, want)
	}
	if err := s.keys.FlushUsage(ctx, func(_ context.Context, rows []domain.UsageDay) error {
		t.Errorf("a flush with nothing new wrote %+v", rows)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestCountingARequestInTheUsageHistoryCostsNoAllocation: the request path
// adds to an atomic counter of its key, nothing more.
func TestCountingARequestInTheUsageHistoryCostsNoAllocation(t *testing.T) {
	var u keyring.Use
	day := int64(20_000)
	if n := testing.AllocsPerRun(1000, func() { u.Count(day, domain.UsageAllowed) }); n != 0 {
		t.Errorf("counting a request allocates %v times, want 0", n)
	}
}
