package server

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"petstore/internal/domain"
	"petstore/internal/keyring"
	"petstore/internal/limits"
)

// A day's counts stay apart from the day before's, and a flush that failed
// (its answer lost, perhaps after its write) is sent again as it was,
// under its batch, and then the counts made since, as the next.
func TestUsageCountsOfTwoDaysStayApartAndAFailedFlushIsSentAgainAsItWas(t *testing.T) {
	t.Parallel()
	s, h := newServerWithAKey(t)
	ctx := context.Background()
	today := limits.UnixDay(s.clock.now())
	h.Use.Count(today-1, domain.UsageAllowed) // just before midnight, flushed after it
	h.Use.Count(today, domain.UsageAllowed)
	h.Use.Count(today, domain.UsageBanned)

	var failed []domain.UsageDay
	failing := errors.New("the database is away")
	if err := s.keys.FlushUsage(ctx, func(_ context.Context, rows []domain.UsageDay) error {
		failed = slices.Clone(rows)
		return failing
	}); err != failing {
		t.Fatalf("flush: %v, want the write's error", err)
	}
	h.Use.Count(today, domain.UsageForbidden) // counted while the write failed
	sent := flushedBatches(t, s)
	if len(sent) != 2 || !slices.Equal(sent[0], failed) || len(sent[1]) != 1 {
		t.Fatalf("flushed %+v, want the failed batch %+v as it was, then one row", sent, failed)
	}
	first, next := failed[0].Batch, sent[1][0].Batch
	if next.Stream != first.Stream || next.N != first.N+1 {
		t.Errorf("the next flush's batch is %+v, want the one after %+v", next, first)
	}
	written := append(sent[0], sent[1]...)
	for i := range written {
		written[i].Batch = domain.Batch{}
	}
	want := []domain.UsageDay{
		{BudgetID: h.Key.BudgetID, Day: limits.DayString(today - 1), Allowed: 1},
		{BudgetID: h.Key.BudgetID, Day: limits.DayString(today), Allowed: 1, Banned: 1},
		{BudgetID: h.Key.BudgetID, Day: limits.DayString(today), Forbidden: 1},
	}
	slices.SortFunc(written[:len(failed)], func(a, b domain.UsageDay) int { return strings.Compare(a.Day, b.Day) })
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

// While a batch waits through an outage of days, each day's requests keep
// their day: the tallies, which hold two days, are emptied at every flush.
func TestAnOutageOfDaysKeepsEachDaysUsage(t *testing.T) {
	t.Parallel()
	s, h := newServerWithAKey(t)
	ctx := context.Background()
	away := func(context.Context, []domain.UsageDay) error { return errors.New("the database is away") }
	today := limits.UnixDay(s.clock.now())
	for day := today - 1; day <= today+2; day++ { // today+2 falls in today's tally
		h.Use.Count(day, domain.UsageAllowed)
		s.keys.FlushUsage(ctx, away)
	}
	sent := flushedBatches(t, s)
	if len(sent) != 2 || len(sent[0]) != 1 || sent[0][0].Day != limits.DayString(today-1) {
		t.Fatalf("flushed %+v, want the waiting batch of the first day, then the rest", sent)
	}
	got := map[string]int64{}
	for _, row := range sent[1] {
		got[row.Day] += row.Allowed
	}
	want := map[string]int64{limits.DayString(today): 1, limits.DayString(today + 1): 1, limits.DayString(today + 2): 1}
	if !maps.Equal(got, want) {
		t.Errorf("the next batch counts %v, want one request on each day: %v", got, want)
	}
}

// newServerWithAKey is a test server and a Free key the keyring holds.
func newServerWithAKey(t *testing.T) (*testServer, *keyring.Held) {
	t.Helper()
	s := newTestServer(t)
	_, token := s.mustCreate(s.keyTerms("free"))
	h, _, err := s.keys.Lookup(context.Background(), token, nil)
	if err != nil || h == nil {
		t.Fatalf("lookup: %v", err)
	}
	return s, h
}

// flushedBatches flushes the usage history to a store that takes every
// write, and returns what each write held.
func flushedBatches(t *testing.T, s *testServer) [][]domain.UsageDay {
	t.Helper()
	var sent [][]domain.UsageDay
	if err := s.keys.FlushUsage(context.Background(), func(_ context.Context, rows []domain.UsageDay) error {
		sent = append(sent, slices.Clone(rows))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return sent
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
