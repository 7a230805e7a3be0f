package bounded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"petstore/internal/domain"
)

// The health probe: how often it looks, and how long /readyz waits for it.
const (
	dbProbeEvery = 500 * time.Millisecond
	// readyFresh is the age past which /readyz does not answer from the
	// last probe but waits for a new one: with the background probe
	// running, it never waits.
	readyFresh = 2 * dbProbeEvery
	// readyTimeout bounds a probe (and --db-timeout, when shorter, does),
	// and probeGrace the wait for a probe past it that does not end then:
	// /readyz answers within a second whatever the database does.
	readyTimeout = 800 * time.Millisecond
	probeGrace   = 100 * time.Millisecond
)

// dbHealth knows whether the database can serve requests, for /readyz and
// the log. It asks with a probe, the engine's Ping (a round trip through the
// pool on PostgreSQL, the write lock on SQLite), one at a time however many
// ask, each bounded by timeout. /readyz answers from the last probe while it
// is fresh, else waits for the next one; a database call that found the
// database otherwise than the last probe did makes it stale at once. An
// outage is logged once when a probe first fails and once when one
// succeeds again, as the Redis fall-back is.
type dbHealth struct {
	ping    func(ctx context.Context) error
	timeout time.Duration
	logger  *slog.Logger
	setDown func(down bool) // told when an outage starts (true) and ends

	stale atomic.Bool // a call saw the database otherwise than the last probe
	down  atomic.Bool // the last probe failed

	mu        sync.Mutex
	probing   chan struct{} // closed when the probe running ends; nil when none runs
	checkedAt time.Time     // when the last probe ended; zero before the first
	last      error         // what it found: nil when the database answered
	downSince time.Time
}

// watch probes every dbProbeEvery until ctx ends.
func (h *dbHealth) watch(ctx context.Context) {
	domain.Every(ctx, dbProbeEvery, func() { h.check(ctx, false) })
}

// ready tells whether the database answers, from the last probe when it is
// fresh, else from a new one (or the one running), waited for no longer
// than a probe's timeout or ctx allows: even a probe stuck where its
// context is not heard (a disk that hangs) leaves no caller waiting.
func (h *dbHealth) ready(ctx context.Context) error { return h.check(ctx, true) }

// check is ready; when cached is false, it always waits for a new probe.
func (h *dbHealth) check(ctx context.Context, cached bool) error {
	h.mu.Lock()
	if cached && !h.checkedAt.IsZero() && time.Since(h.checkedAt) < readyFresh && !h.stale.Load() {
		defer h.mu.Unlock()
		return h.last
	}
	done := h.probing
	if done == nil {
		done = make(chan struct{})
		h.probing = done
		go h.probe(done)
	}
	h.mu.Unlock()
	timer := time.NewTimer(h.timeout + probeGrace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		return domain.Unavailable(domain.DBTimeout, fmt.Errorf("the probe did not end within %v", h.timeout+probeGrace))
	case <-ctx.Done():
		return domain.Unavailable(domain.DBTimeout, ctx.Err())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// probe asks the database once, keeps the answer, notes an outage's start
// or end, and closes done.
func (h *dbHealth) probe(done chan struct{}) {
	// Cleared before asking: a call that sees otherwise meanwhile asks again.
	h.stale.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	err := h.ping(ctx)
	cancel()
	if err != nil && domain.DBFailureOf(err) == 0 && errors.Is(err, context.DeadlineExceeded) {
		err = domain.Unavailable(domain.DBTimeout, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	h.checkedAt, h.last, h.probing = now, err, nil
	close(done)
	switch {
	case err != nil && !h.down.Load():
		h.down.Store(true)
		h.downSince = now
		why := causeOf(err)
		if errors.Is(err, context.DeadlineExceeded) {
			why = fmt.Errorf("no answer within %v", h.timeout)
		}
		h.logger.Warn("the database does not answer: requests that need it are answered 503 until it does", "err", why)
		h.setDown(true)
	case err == nil && h.down.Load():
		h.down.Store(false)
		h.logger.Info("the database answers again", "outage", now.Sub(h.downSince).Round(time.Millisecond))
		h.setDown(false)
	}
}

// saw notes what a database call found: an answer while the last probe
// failed, or an outage while it succeeded, makes that probe stale.
func (h *dbHealth) saw(err error) {
	if (domain.DBFailureOf(err) != 0) != h.down.Load() {
		h.stale.Store(true)
	}
}

// causeOf is what went wrong underneath a domain.Error, for the log.
func causeOf(err error) error {
	var e *domain.Error
	if errors.As(err, &e) && e.Cause != nil {
		return e.Cause
	}
	return err
}
