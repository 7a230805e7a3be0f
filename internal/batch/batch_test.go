package batch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"petstore/internal/testkit"
)

// blockedBatcher is a batcher whose first batch waits for release, so that
// a test can queue calls behind it.
type blockedBatcher struct {
	b       Batcher[int]
	release chan struct{}
	mu      sync.Mutex
	sizes   []int
}

func newBlockedBatcher(max int, run func(batch []int) error) *blockedBatcher {
	bb := &blockedBatcher{release: make(chan struct{})}
	bb.b = Batcher[int]{Max: max, Run: func(_ context.Context, batch []int) error {
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
		wg.Go(func() { results[i], errs[i] = bb.b.Do(context.Background(), i) })
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
			testkit.Eventually(t, 5*time.Second, "the first batch runs", func() bool { bb.mu.Lock(); defer bb.mu.Unlock(); return len(bb.sizes) == 1 })
			bb.start(&wg, 1, 9, results, errs)
			testkit.Eventually(t, 5*time.Second, "nine calls queue behind it", func() bool { return bb.queued() == 9 })
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
	b := Batcher[int]{Max: 10, Run: func(_ context.Context, batch []int) error {
		runs++
		switch runs {
		case 1:
			return failing
		case 2:
			panic("a bug in run")
		}
		return nil
	}}
	if _, err := b.Do(context.Background(), 1); !errors.Is(err, failing) {
		t.Errorf("a call of a failed batch: %v, want %v", err, failing)
	}
	func() {
		defer func() { recover() }()
		b.Do(context.Background(), 2)
	}()
	// The panicking batch released the role: the next call runs.
	if _, err := b.Do(context.Background(), 3); err != nil {
		t.Errorf("a call after a failed and a panicking batch: %v", err)
	}
}

// stalledBatcher is a batcher whose first batch stalls, as a database that
// does not answer: until its context ends, or until release when it has no
// deadline. Later batches run at once; ran has every item run by one.
type stalledBatcher struct {
	b       Batcher[int]
	release chan struct{}
	mu      sync.Mutex
	batches int
	ran     []int
	// deadlines has each batch's deadline (zero: none).
	deadlines []time.Time
}

func newStalledBatcher(maxQueued int) *stalledBatcher {
	sb := &stalledBatcher{release: make(chan struct{})}
	sb.b = Batcher[int]{Max: 10, MaxQueued: maxQueued, Run: func(ctx context.Context, batch []int) error {
		sb.mu.Lock()
		sb.batches++
		first := sb.batches == 1
		d, _ := ctx.Deadline()
		sb.deadlines = append(sb.deadlines, d)
		sb.mu.Unlock()
		if first {
			select {
			case <-sb.release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		sb.mu.Lock()
		sb.ran = append(sb.ran, batch...)
		sb.mu.Unlock()
		return nil
	}}
	return sb
}

// call runs item with a deadline after timeout (none when 0), and reports
// what it got and how long it took.
func (sb *stalledBatcher) call(item int, timeout time.Duration) (took time.Duration, err error) {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	start := time.Now()
	_, err = sb.b.Do(ctx, item)
	return time.Since(start), err
}

func (sb *stalledBatcher) stalled() bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.batches == 1
}

// Calls queued behind a batch that stalls leave at their own deadline, never
// run; the stalled batch fails at its deadline; a call whose deadline is
// later runs in the next batch.
func TestBatcherCallsQueuedBehindAStalledBatchLeaveAtTheirDeadline(t *testing.T) {
	sb := newStalledBatcher(0)
	type result struct {
		err  error
		took time.Duration
	}
	results := make([]result, 4)
	timeouts := []time.Duration{300 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 5 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { results[0].took, results[0].err = sb.call(0, timeouts[0]) })
	testkit.Eventually(t, 5*time.Second, "the first batch stalls", sb.stalled)
	for i := 1; i < len(results); i++ {
		wg.Go(func() { results[i].took, results[i].err = sb.call(i, timeouts[i]) })
	}
	wg.Wait()

	if err := results[0].err; !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNotRun) {
		t.Errorf("the stalled call: %v, want its batch's deadline error", err)
	}
	for _, i := range []int{1, 2} {
		if r := results[i]; !errors.Is(r.err, ErrNotRun) || !errors.Is(r.err, context.DeadlineExceeded) || r.took > timeouts[0] {
			t.Errorf("call %d, queued behind the stall: %v after %v; want errNotRun at its own deadline of %v", i, r.err, r.took, timeouts[i])
		}
	}
	if results[3].err != nil {
		t.Errorf("the call with time left after the stall: %v, want it run", results[3].err)
	}
	if !slices.Equal(sb.ran, []int{3}) {
		t.Errorf("items run %v, want only 3: a call that left the queue is never run", sb.ran)
	}
}

// Past maxQueued, a call fails at once instead of waiting for a batch that
// stalls; those queued before it run once it is over.
func TestBatcherRefusesACallAtOncePastItsQueueBound(t *testing.T) {
	sb := newStalledBatcher(3)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	wg.Go(func() { _, errs[0] = sb.call(0, 0) })
	testkit.Eventually(t, 5*time.Second, "the first batch stalls", sb.stalled)
	for i := 1; i <= 3; i++ {
		wg.Go(func() { _, errs[i] = sb.call(i, 0) })
	}
	testkit.Eventually(t, 5*time.Second, "three calls queue behind the stall", func() bool { sb.b.mu.Lock(); defer sb.b.mu.Unlock(); return len(sb.b.queue) == 3 })
	took, err := sb.call(4, 0)
	if !errors.Is(err, ErrQueueFull) || took > 100*time.Millisecond {
		t.Errorf("a call past the bound: %v after %v, want errQueueFull at once", err, took)
	}
	close(sb.release)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Errorf("the calls within the bound: %v", err)
	}
	slices.Sort(sb.ran)
	if !slices.Equal(sb.ran, []int{0, 1, 2, 3}) {
		t.Errorf("items run %v, want 0 to 3", sb.ran)
	}
}

// A batch runs by the earliest deadline of its calls, and without one when
// none has any.
func TestBatcherRunsABatchByItsEarliestDeadline(t *testing.T) {
	sb := newStalledBatcher(0)
	var wg sync.WaitGroup
	wg.Go(func() { sb.call(0, 0) })
	testkit.Eventually(t, 5*time.Second, "the first batch stalls", sb.stalled)
	start := time.Now()
	for i, timeout := range []time.Duration{3 * time.Second, time.Second, 2 * time.Second} {
		wg.Go(func() { sb.call(i+1, timeout) })
	}
	testkit.Eventually(t, 5*time.Second, "three calls queue behind the stall", func() bool { sb.b.mu.Lock(); defer sb.b.mu.Unlock(); return len(sb.b.queue) == 3 })
	close(sb.release)
	wg.Wait()
	if len(sb.deadlines) != 2 || !sb.deadlines[0].IsZero() {
		t.Fatalf("batch deadlines %v, want none for the first and one for the second", sb.deadlines)
	}
	if d := sb.deadlines[1].Sub(start); d < 900*time.Millisecond || d > 1100*time.Millisecond {
		t.Errorf("the second batch ran by a deadline %v after its calls were made, want the earliest, 1s", d)
	}
}

// However the calls queued behind a stall leave, the role of running the
// next batch is never lost: a call after them runs.
func TestBatcherGoesOnAfterQueuedCallsLeave(t *testing.T) {
	sb := newStalledBatcher(0)
	var wg sync.WaitGroup
	wg.Go(func() { sb.call(0, 0) })
	testkit.Eventually(t, 5*time.Second, "the first batch stalls", sb.stalled)
	var left sync.WaitGroup
	for i := 1; i <= 50; i++ {
		left.Go(func() { sb.call(i, time.Duration(i%5)*time.Millisecond+time.Millisecond) })
	}
	left.Wait() // each left by its deadline, the batch still stalled
	close(sb.release)
	wg.Wait()
	if _, err := sb.call(100, time.Second); err != nil {
		t.Fatalf("a call after the others left: %v", err)
	}
}
