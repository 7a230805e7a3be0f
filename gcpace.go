package main

import (
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

// collectorPace sets the collector's percentage for the live heap the
// last collection found; serve calls adjust every second, as the store
// grows.
type collectorPace struct {
	live    []metrics.Sample
	percent int
}

func newCollectorPace() *collectorPace {
	p := &collectorPace{live: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	p.adjust()
	return p
}

func (p *collectorPace) adjust() {
	metrics.Read(p.live)
	var live uint64
	if p.live[0].Value.Kind() == metrics.KindUint64 {
		live = p.live[0].Value.Uint64()
	}
	if want := gcPercentFor(live); want != p.percent {
		debug.SetGCPercent(want)
		p.percent = want
	}
}
