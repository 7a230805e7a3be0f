package domain

import (
	"context"
	"time"
)

// Every calls fn every interval until ctx ends: the one loop of every
// background chore (the flushes, the database's probe and checkpoints,
// the pets' poll, the ACME lock's extension).
func Every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}
