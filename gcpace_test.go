package main

import (
	"runtime/debug"
	"testing"
)

func TestTheHeapGrowsByHalfOrByTheFloor(t *testing.T) {
	for _, c := range []struct {
		name string
		live uint64
		want int
	}{
		{"nothing live yet is bounded", 0, maxGCPercent},
		{"a nearly empty heap is bounded", 64 << 10, maxGCPercent},
		{"a small store's heap grows by the floor", 4 << 20, 200},
		{"a heap of twice the floor grows by half", 2 * gcFloor, serveGCPercent},
		{"a million pets' heap grows by half", 60 << 20, serveGCPercent},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := gcPercentFor(c.live); got != c.want {
				t.Errorf("gcPercentFor(%d) = %d, want %d", c.live, got, c.want)
			}
		})
	}
}

func TestTheCollectorIsPacedForTheLiveHeap(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	pace := newCollectorPace()
	if pace.percent < serveGCPercent || pace.percent > maxGCPercent {
		t.Fatalf("percent %d, want between %d and %d", pace.percent, serveGCPercent, maxGCPercent)
	}
	if got := debug.SetGCPercent(100); got != pace.percent {
		t.Errorf("the collector runs at %d%%, the pace set %d%%", got, pace.percent)
	}
}
