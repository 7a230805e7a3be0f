package limits

import (
	"context"
	"sync"
)

// FlushInOrder sends a flusher's batches one at a time, in order. A batch
// whose outcome is not known (*unconfirmed: its flush failed, perhaps
// after the store had added it) goes again as it was; only once it is
// written does next make the counts gathered since into the next batch,
// which is sent in the same call. So however many flushes an outage fails,
// one batch waits, and the counts made meanwhile wait merged, bounded by
// the keys and days they count (docs/design.md, "Usage counts").
//
// The caller holds its flush lock (one flush at a time). mu guards
// *unconfirmed for its readers outside a flush, and is held while next
// runs; nil when it has none.
func FlushInOrder[T any](ctx context.Context, mu sync.Locker, unconfirmed *[]T, next func() []T, add func(context.Context, []T) error) error {
	if mu == nil {
		mu = noLock{}
	}
	for {
		mu.Lock()
		again := len(*unconfirmed) > 0
		if !again {
			*unconfirmed = next()
		}
		batch := *unconfirmed
		mu.Unlock()
		if len(batch) == 0 {
			return nil
		}
		if err := add(ctx, batch); err != nil {
			return err
		}
		mu.Lock()
		*unconfirmed = nil
		mu.Unlock()
		if !again {
			return nil
		}
	}
}

// noLock is the lock of state that only the flush touches.
type noLock struct{}

func (noLock) Lock()   {}
func (noLock) Unlock() {}
