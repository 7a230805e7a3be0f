package tracing

import (
	"context"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The queue's bounds: spans waiting, and spans in one export.
const (
	queueSize = 2048
	batchSize = 512
)

// queue is the span processor: ended spans wait in a bounded queue and go
// out in batches, from one goroutine, every delay or once batchSize wait.
// A full queue drops the span and counts it (the SDK's batcher drops
// without a word), so that neither a slow endpoint nor a burst ever holds
// a request up.
type queue struct {
	spans    chan sdktrace.ReadOnlySpan
	exporter *countingExporter
	delay    time.Duration
	flush    chan chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func newQueue(e *countingExporter, delay time.Duration) *queue {
	q := &queue{spans: make(chan sdktrace.ReadOnlySpan, queueSize), exporter: e, delay: delay,
		flush: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go q.run()
	return q
}

func (q *queue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	select {
	case q.spans <- s:
	default:
		q.exporter.dropped(1, errQueueFull)
	}
}

func (q *queue) run() {
	defer close(q.done)
	timer := time.NewTimer(q.delay)
	defer timer.Stop()
	batch := make([]sdktrace.ReadOnlySpan, 0, batchSize)
	for {
		select {
		case s := <-q.spans:
			if batch = append(batch, s); len(batch) < batchSize {
				continue
			}
		case <-timer.C:
		case ack := <-q.flush:
			batch = q.send(q.drain(batch))
			close(ack)
			continue
		case <-q.stop:
			q.send(q.drain(batch))
			return
		}
		batch = q.send(batch)
		timer.Reset(q.delay)
	}
}

// drain adds to batch every span queued now.
func (q *queue) drain(batch []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	for {
		select {
		case s := <-q.spans:
			batch = append(batch, s)
		default:
			return batch
		}
	}
}

// send exports batch, batchSize spans at a time, each export bounded by
// exportTimeout, and returns it emptied.
func (q *queue) send(batch []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	for start := 0; start < len(batch); start += batchSize {
		ctx, cancel := context.WithTimeout(context.Background(), exportTimeout)
		_ = q.exporter.ExportSpans(ctx, batch[start:min(start+batchSize, len(batch))])
		cancel()
	}
	clear(batch)
	return batch[:0]
}

// ForceFlush sends every span queued now.
func (q *queue) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case q.flush <- ack:
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown sends the spans queued and stops, by ctx's deadline.
func (q *queue) Shutdown(ctx context.Context) error {
	q.stopOnce.Do(func() { close(q.stop) })
	select {
	case <-q.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return q.exporter.Shutdown(ctx)
}
