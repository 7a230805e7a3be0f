// Package batch is the batcher: concurrent calls that share one round
// trip or one commit (the pet inserts, the Redis pipelines, the webhook
// notices). It imports nothing of the project but the tracing of a
// batch that serves sampled requests.
package batch

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"

	"petstore/internal/tracing"
)

// Batcher runs concurrent calls in shared batches, for work whose cost is
// mostly per batch (a commit, a round trip): the first caller to find no
// batch running runs everything queued meanwhile, up to Max, in one call
// of Run, then hands the role to a caller still queued. No goroutine of its
// own: an idle batcher costs nothing.
//
// A call whose context ends while it is queued leaves the queue, never run
// (ErrNotRun); once in a batch, it waits for the batch, which runs with the
// context of its call that ends first. Callers pass contexts that end only
// by a deadline (context.WithoutCancel), so that no caller hanging up cuts
// short the batch of others. With MaxQueued set, a call that finds that
// many queued fails at once (ErrQueueFull): work that stalls does not pile
// up without bound.
type Batcher[T any] struct {
	// Name names the span of a batch that serves a sampled request (a
	// commit, a round trip), linked to every sampled call's; "": no span.
	Name      string
	Max       int
	MaxQueued int // 0: no bound
	// Run does a batch: it fills in each item's result, and returns an
	// error that fails the whole batch.
	Run func(ctx context.Context, batch []T) error

	mu      sync.Mutex
	queue   []*batchCall[T]
	running bool // a caller is running a batch; the others queue
}

// Busy says whether a caller is running a batch now.
func (b *Batcher[T]) Busy() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running
}

// batchCall is one call waiting for its batch.
type batchCall[T any] struct {
	ctx  context.Context
	item T
	err  error
	wake chan bool // false: done (or failed); true: run the next batch
}

var (
	// ErrQueueFull: MaxQueued calls wait already.
	ErrQueueFull = errors.New("too many calls wait for a batch")
	// ErrNotRun: the call's context ended before a batch took it.
	ErrNotRun = errors.New("ended before its batch ran")
)

// Do queues item, waits until a batch has run it, and returns it with its
// result filled in, or the error that failed its batch.
func (b *Batcher[T]) Do(ctx context.Context, item T) (T, error) {
	call := &batchCall[T]{ctx: ctx, item: item, wake: make(chan bool, 1)}
	b.mu.Lock()
	if b.MaxQueued > 0 && len(b.queue) >= b.MaxQueued {
		b.mu.Unlock()
		return item, ErrQueueFull
	}
	b.queue = append(b.queue, call)
	lead := !b.running
	b.running = true
	b.mu.Unlock()
	if !lead {
		select {
		case lead = <-call.wake:
		case <-ctx.Done():
			if b.withdraw(call) {
				return item, notRun(ctx)
			}
			// A batch took it meanwhile, or it was handed the role.
			lead = <-call.wake
		}
	}
	if lead {
		// Let the goroutines that are ready to run (requests already read)
		// reach the queue first, so that they share this batch. Without
		// this, on one CPU every batch would hold a single call.
		runtime.Gosched()
		b.runQueued()
	}
	return call.item, call.err
}

func notRun(ctx context.Context) error { return errors.Join(ErrNotRun, context.Cause(ctx)) }

// endsBefore tells whether a has a deadline before b's, or b has none.
func endsBefore(a, b context.Context) bool {
	da, ok := a.Deadline()
	if !ok {
		return false
	}
	db, ok := b.Deadline()
	return !ok || da.Before(db)
}

// withdraw takes call off the queue, if no batch took it: true when it
// did. A call handed the role of running the next batch passes it on.
func (b *Batcher[T]) withdraw(call *batchCall[T]) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.Index(b.queue, call)
	if i < 0 {
		return false
	}
	b.queue = slices.Delete(b.queue, i, i+1)
	select {
	case <-call.wake: // it was to run the next batch
		b.handOn()
	default:
	}
	return true
}

// handOn passes the role of running the next batch to the first call
// queued, or ends it when none is; b.mu is held.
func (b *Batcher[T]) handOn() {
	if len(b.queue) == 0 {
		b.running = false
	} else {
		b.queue[0].wake <- true
	}
}

// runQueued runs the queued calls as one batch, wakes their callers, and
// passes the role on when more are queued. A call whose context ended while
// it was queued is answered without running.
func (b *Batcher[T]) runQueued() {
	b.mu.Lock()
	n := min(len(b.queue), b.Max)
	queued := slices.Clone(b.queue[:n])
	b.queue = slices.Delete(b.queue, 0, n)
	b.mu.Unlock()

	calls := queued[:0]
	var ctx context.Context // of the call that ends first
	for _, call := range queued {
		if call.ctx.Err() != nil {
			call.err = notRun(call.ctx)
			call.wake <- false
			continue
		}
		if ctx == nil || endsBefore(call.ctx, ctx) {
			ctx = call.ctx
		}
		calls = append(calls, call)
	}
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
		b.handOn()
		b.mu.Unlock()
	}()
	if len(batch) == 0 {
		err = nil // every call had ended: nothing to run
		return
	}
	if b.Name != "" {
		var links tracing.Links
		for _, call := range calls {
			links.Add(call.ctx)
		}
		if links.Any() {
			var span tracing.Span
			ctx, span = tracing.Batch(ctx, b.Name, len(calls), &links)
			defer func() { span.Failed(err); span.End() }()
		}
	}
	err = b.Run(ctx, batch)
}
