package main

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// The collector's pace while serving (docs/performance.md, "Memory").
//
// With a million pets most of the heap is the pointer-free copy of them:
// the collector never scans it, so collecting at half the default growth
// costs little CPU and keeps that heap some 20 MiB smaller. A small store's
// heap is a few MiB, though, and at half of that the collector ran some 140
// times a second under load, each time marking again the same long-lived
// structures (the SQL driver's, the S3 client's, the trace exporter's). So
// the heap may always grow by at least gcFloor before a collection: the
// percentage is raised while the live heap is under twice gcFloor.
const (
	serveGCPercent = 50
	gcFloor        = 8 << 20
	// maxGCPercent bounds the percentage of a nearly empty heap, whose
	// growth the floor alone would leave unbounded in proportion.
	maxGCPercent = 1000
)

// gcPercentFor is the GOGC that lets a heap of live bytes grow by
// serveGCPercent of it or by gcFloor, whichever is more.
func gcPercentFor(live uint64) int {
	if live == 0 {
		return maxGCPercent
	}
	return int(min(maxGCPercent, max(serveGCPercent, gcFloor*100/live)))
}

// paceCollector sets the collector's percentage for the live heap now and
// again after every collection, until ctx ends. After each one, not on a
// timer: while the pets are copied into memory at start the heap grows
// tenfold in a fraction of a second, and a percentage set for the heap
// before would let it grow tenfold again.
func paceCollector(ctx context.Context) {
	c := &gcCycle{ctx: ctx, live: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	c.adjust()
	runtime.SetFinalizer(c, nextCycle)
}

// gcCycle is garbage from the start: its finalizer runs once a collection
// has found it unreachable, and sets itself up again for the next one.
type gcCycle struct {
	ctx  context.Context
	live []metrics.Sample
}

func nextCycle(c *gcCycle) {
	if c.ctx.Err() != nil {
		return
	}
	c.adjust()
	runtime.SetFinalizer(c, nextCycle)
}

// adjust sets the percentage for the live heap the last collection found.
func (c *gcCycle) adjust() {
	metrics.Read(c.live)
	var live uint64
	if c.live[0].Value.Kind() == metrics.KindUint64 {
		live = c.live[0].Value.Uint64()
	}
	debug.SetGCPercent(gcPercentFor(live))
}
