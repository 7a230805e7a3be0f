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
	// error that fails the whole batch. It keeps no hold of batch.
	run func(ctx context.Context, batch []T) error

	mu      sync.Mutex
	queue   []*batchCall[T]
	running bool // a caller is running a batch; the others queue
	// One batch runs at a time: its slices serve the next one.
	spare []*batchCall[T]
	items []T
	calls sync.Pool // of *batchCall[T] done with, each with its channel
}

// batchCall is one call waiting for its batch.
type batchCall[T any] struct {
	item T
	err  error
	wake chan bool // false: done (or failed); true: run the next batch
}

// errBatchInterrupted fails the calls of a batch whose run did not return.
var errBatchInterrupted = errors.New("the batch was interrupted")

// do queues item, waits until a batch has run it, and returns it with its
// result filled in, or the error that failed its batch.
func (b *batcher[T]) do(ctx context.Context, item T) (T, error) {
	call, _ := b.calls.Get().(*batchCall[T])
	if call == nil {
		call = &batchCall[T]{wake: make(chan bool, 1)}
	}
	call.item = item
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
	item, err := call.item, call.err
	// A call that ran its own batch was told it is done too: take that
	// back before the call serves another.
	select {
	case <-call.wake:
	default:
	}
	*call = batchCall[T]{wake: call.wake}
	b.calls.Put(call)
	return item, err
}

// runQueued runs the queued calls as one batch, wakes their callers, and
// passes the role on when more are queued.
func (b *batcher[T]) runQueued(ctx context.Context) {
	b.mu.Lock()
	calls := b.queue
	if n := min(len(b.queue), b.max); n < len(b.queue) {
		calls = slices.Clone(b.queue[:n])
		b.queue = slices.Delete(b.queue, 0, n)
	} else {
		b.queue, b.spare = b.spare[:0], nil
	}
	batch := b.items[:0]
	b.items = nil
	b.mu.Unlock()

	for _, call := range calls {
		batch = append(batch, call.item)
	}
	err := errBatchInterrupted // until run returns
	// Whatever happens below, even a panic, the callers are woken and the
	// role is passed on: no call waits forever.
	defer func() {
		for i, call := range calls {
			call.item, call.err = batch[i], err
			call.wake <- false
		}
		clear(calls)
		clear(batch)
		b.mu.Lock()
		b.spare, b.items = calls[:0], batch[:0]
		if len(b.queue) == 0 {
			b.running = false
		} else {
			b.queue[0].wake <- true
		}
		b.mu.Unlock()
	}()
	err = b.run(ctx, batch)
}
