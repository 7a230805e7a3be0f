package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// blockedBatcher is a batcher whose first batch waits for release, so that
// a test can queue calls behind it.
type blockedBatcher struct {
	b       batcher[int]
	release chan struct{}
	mu      sync.Mutex
	sizes   []int
}

func newBlockedBatcher(max int, run func(batch []int) error) *blockedBatcher {
	bb := &blockedBatcher{release: make(chan struct{})}
	bb.b = batcher[int]{max: max, run: func(_ context.Context, batch []int) error {
		bb.mu.Lock()
		first := len(bb.sizes) == 0
		bb.sizes = append(bb.sizes, len(batch))
		bb.mu.Unlock()
		if first {
			<-bb.release
		}
		return run(batch)
	}}
	return bb
}

// queued is how many calls wait for the next batch.
func (bb *blockedBatcher) queued() int {
	bb.b.mu.Lock()
	defer bb.b.mu.Unlock()
	return len(bb.b.queue)
}

// start runs n calls of items from, and returns their results by item.
func (bb *blockedBatcher) start(wg *sync.WaitGroup, from, n int, results []int, errs []error) {
	for i := from; i < from+n; i++ {
		wg.Go(func() { results[i], errs[i] = bb.b.do(context.Background(), i) })
	}
}

func TestBatcherRunsTheCallsQueuedMeanwhileTogether(t *testing.T) {
	for _, tc := range []struct {
		name  string
		max   int
		sizes []int
	}{
		{"all queued calls in one batch", 100, []int{1, 9}},
		{"no batch above max", 4, []int{1, 4, 4, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bb := newBlockedBatcher(tc.max, func(batch []int) error {
				for i := range batch {
					batch[i] *= 10
				}
				return nil
			})
			results, errs := make([]int, 10), make([]error, 10)
			var wg sync.WaitGroup
			bb.start(&wg, 0, 1, results, errs)
			waitFor(t, func() bool { bb.mu.Lock(); defer bb.mu.Unlock(); return len(bb.sizes) == 1 })
			bb.start(&wg, 1, 9, results, errs)
			waitFor(t, func() bool { return bb.queued() == 9 })
			close(bb.release)
			wg.Wait()

			for i := range results {
				if results[i] != i*10 || errs[i] != nil {
					t.Errorf("call %d: %d, %v; want %d and no error", i, results[i], errs[i], i*10)
				}
			}
			if !slices.Equal(bb.sizes, tc.sizes) {
				t.Errorf("batch sizes %v, want %v", bb.sizes, tc.sizes)
			}
		})
	}
}

func TestBatcherFailsEveryCallOfAFailedBatchAndGoesOn(t *testing.T) {
	failing := errors.New("the disk is full")
	runs := 0
	b := batcher[int]{max: 10, run: func(_ context.Context, batch []int) error {
		runs++
		switch runs {
		case 1:
			return failing
		case 2:
			panic("a bug in run")
		}
		return nil
	}}
	if _, err := b.do(context.Background(), 1); !errors.Is(err, failing) {
		t.Errorf("a call of a failed batch: %v, want %v", err, failing)
	}
	func() {
		defer func() { recover() }()
		b.do(context.Background(), 2)
	}()
	// The panicking batch released the role: the next call runs.
	if _, err := b.do(context.Background(), 3); err != nil {
		t.Errorf("a call after a failed and a panicking batch: %v", err)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}
