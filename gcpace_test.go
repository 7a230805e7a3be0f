package main

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
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

func TestTheCollectorIsPacedAfterEachCollectionUntilServingEnds(t *testing.T) {
	const elsewhere = 7 // a percentage the pace never sets
	ctx, stop := context.WithCancel(context.Background())
	before := debug.SetGCPercent(elsewhere)
	t.Cleanup(func() { stop(); debug.SetGCPercent(before) })

	paceCollector(ctx)
	if got := gcPercent(); got < serveGCPercent || got > maxGCPercent {
		t.Fatalf("at start the collector runs at %d%%, want between %d and %d", got, serveGCPercent, maxGCPercent)
	}
	debug.SetGCPercent(elsewhere)
	for deadline := time.Now().Add(5 * time.Second); gcPercent() == elsewhere; {
		if time.Now().After(deadline) {
			t.Fatal("collections went by and the pace was not set again")
		}
		runtime.GC()
		time.Sleep(time.Millisecond) // the finalizer goroutine's turn
	}

	stop()
	runtime.GC()
	runtime.GC()
	debug.SetGCPercent(elsewhere)
	for range 3 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := gcPercent(); got != elsewhere {
		t.Errorf("after serving ended the pace still set %d%%", got)
	}
}

func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}
