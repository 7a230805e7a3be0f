package main

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
)

// batcher runs concurrent calls in shared batches, for work whose cost is
// mostly per batch (a commit, a round trip): the first caller to find no
// batch running runs everything queued meanwhile, up to max, in one call
// of run, then hands the role to a caller still queued. No goroutine of its
// own: an idle batcher costs nothing.
type batcher[T any] struct {
	max int
	// run does a batch: it fills in each item's result, and returns an
	// error that fails the whole batch.
	run func(ctx context.Context, batch []T) error

	mu      sync.Mutex
	queue   []*batchCall[T]
	running bool // a caller is running a batch; the others queue
}

// batchCall is one call waiting for its batch.
type batchCall[T any] struct {
	item T
	err  error
	wake chan bool // false: done (or failed); true: run the next batch
}

// do queues item, waits until a batch has run it, and returns it with its
// result filled in, or the error that failed its batch.
func (b *batcher[T]) do(ctx context.Context, item T) (T, error) {
	call := &batchCall[T]{item: item, wake: make(chan bool, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, call)
	lead := !b.running
	b.running = true
	b.mu.Unlock()
	if lead || <-call.wake {
		// Let the goroutines that are ready to run (requests already read)
		// reach the queue first, so that they share this batch. Without
		// this, on one CPU every batch would hold a single call.
		runtime.Gosched()
		b.runQueued(ctx)
	}
	return call.item, call.err
}

// runQueued runs the queued calls as one batch, wakes their callers, and
// passes the role on when more are queued.
func (b *batcher[T]) runQueued(ctx context.Context) {
	b.mu.Lock()
	n := min(len(b.queue), b.max)
	calls := slices.Clone(b.queue[:n])
	b.queue = slices.Delete(b.queue, 0, n)
	b.mu.Unlock()

	batch := make([]T, len(calls))
	for i, call := range calls {
		batch[i] = call.item
	}
	err := errors.New("the batch was interrupted") // until run returns
	// Whatever happens below, even a panic, the callers are woken and the
	// role is passed on: no call waits forever.
	defer func() {
		for i, call := range calls {
			call.item, call.err = batch[i], err
			call.wake <- false
		}
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.running = false
		} else {
			b.queue[0].wake <- true
		}
		b.mu.Unlock()
	}()
	err = b.run(ctx, batch)
}
