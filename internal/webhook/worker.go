package webhook

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"petstore/internal/domain"

	"go.opentelemetry.io/otel/trace"
)

const (
	// webhookPollEvery is how often a server looks for due deliveries when
	// nothing woke it: an event queued by a command or another server
	// goes out within it.
	webhookPollEvery = time.Second
	AttemptsAtOnce   = 16 // a server's attempts in flight at most
	// PlacesForOthers: an endpoint with an attempt in flight starts
	// another only while more places than this are free, so that slow
	// endpoints never hold them all: each other endpoint finds one.
	PlacesForOthers = AttemptsAtOnce / 2
	// ClaimFor is how long a claimed attempt is this server's: past
	// the attempt's timeout, so that only a server that died mid-attempt
	// lets it go to another.
	ClaimFor = attemptTimeout + 45*time.Second

	expiryScanEvery   = time.Minute // to look for keys to announce as expiring or expired
	webhookPruneEvery = time.Hour   // to forget what the outbox no longer needs
)

// Worker takes due deliveries from the outbox, a claim at a time that
// expires, sends them, and records what came of each. A request never waits
// on it; a receiver that hangs holds at most domain.MaxInFlightPerEndpoint
// of its attempts.
type Worker struct {
	store   domain.WebhookOutbox
	keys    func(context.Context) ([]domain.Key, error)
	sender  *Sender
	now     func() time.Time
	logger  *slog.Logger
	counted func(state string) // counts an attempt that left its delivery in state
	env     string             // whose endpoints it sends to: its server's environment
	tracer  trace.Tracer       // the attempts' spans (trace.go); nil: tracing is off
	wake    chan struct{}

	mu       sync.Mutex
	running  int
	inFlight map[int64]int // attempts in flight by endpoint
}

// NewWorker is a worker on store sending with sender to env's endpoints.
// With a tracer provider tp each attempt is a span (trace.go); with nil,
// tracing off, the worker calls no tracer.
func NewWorker(store domain.WebhookOutbox, keys func(context.Context) ([]domain.Key, error), sender *Sender,
	now func() time.Time, logger *slog.Logger, counted func(state string), env string, tp trace.TracerProvider) *Worker {
	w := &Worker{
		store: store, keys: keys, sender: sender, now: now, logger: logger, counted: counted, env: env,
		wake: make(chan struct{}, 1), inFlight: make(map[int64]int),
	}
	if tp != nil {
		w.tracer = tp.Tracer(tracerName)
	}
	return w
}

// Run sends due deliveries until ctx ends, then waits for the attempts in
// flight (which ctx ends too: their claims expire and another attempt
// follows).
func (w *Worker) Run(ctx context.Context) {
	var attempts sync.WaitGroup
	defer attempts.Wait()
	poll := time.NewTicker(webhookPollEvery)
	defer poll.Stop()
	scan := time.NewTicker(expiryScanEvery)
	defer scan.Stop()
	prune := time.NewTicker(webhookPruneEvery)
	defer prune.Stop()
	w.NoticeExpiries(ctx)
	for {
		w.Dispatch(ctx, &attempts)
		select {
		case <-ctx.Done():
			return
		case <-scan.C:
			w.NoticeExpiries(ctx)
		case <-prune.C:
			if err := w.store.PruneWebhooks(ctx, w.now()); err != nil && ctx.Err() == nil {
				w.logger.Warn("prune the webhook outbox; will retry", "err", err)
			}
		case <-poll.C:
		case <-w.wake:
		}
	}
}

// Poke wakes the worker: an attempt ended, or this server queued an event.
func (w *Worker) Poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// mayStart tells whether an attempt to endpointID may start now: a place
// is free, the endpoint is under its cap, and an endpoint with an attempt
// in flight leaves PlacesForOthers places to the others. Called
// with w.mu held.
func (w *Worker) mayStart(endpointID int64) bool {
	free, n := AttemptsAtOnce-w.running, w.inFlight[endpointID]
	return free > 0 && n < domain.MaxInFlightPerEndpoint && (n == 0 || free > PlacesForOthers)
}

// Dispatch claims as many due deliveries as there is room for and starts
// their attempts; it returns how many.
func (w *Worker) Dispatch(ctx context.Context, attempts *sync.WaitGroup) int {
	w.mu.Lock()
	free := AttemptsAtOnce - w.running
	var busy []int64
	for id := range w.inFlight {
		if !w.mayStart(id) {
			busy = append(busy, id)
		}
	}
	w.mu.Unlock()
	if free <= 0 {
		return 0
	}
	// take is asked in the claim's transaction about each candidate: it
	// reserves a place for the ones it takes. The places of those the claim
	// did not end up with (its transaction failed) are given back.
	reserved := make(map[int64]int)
	take := func(endpointID int64) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.mayStart(endpointID) {
			return false
		}
		w.running++
		w.inFlight[endpointID]++
		reserved[endpointID]++
		return true
	}
	claimed, err := w.store.ClaimWebhookDeliveries(ctx, w.env, w.now(), ClaimFor, busy, free, take)
	for _, c := range claimed {
		reserved[c.EndpointID]--
	}
	for id, n := range reserved {
		for range n {
			w.release(id)
		}
	}
	if err != nil && ctx.Err() == nil {
		w.logger.Warn("claim webhook deliveries; will retry", "err", err)
	}
	for _, c := range claimed {
		attempts.Go(func() {
			defer w.release(c.EndpointID)
			w.attempt(ctx, c)
		})
	}
	return len(claimed)
}

// release gives back the place of an attempt that ended.
func (w *Worker) release(endpointID int64) {
	w.mu.Lock()
	w.running--
	if w.inFlight[endpointID]--; w.inFlight[endpointID] <= 0 {
		delete(w.inFlight, endpointID)
	}
	w.mu.Unlock()
	w.Poke()
}

// attempt sends c once and records what came of it. An attempt cut short
// by the server's stop is not recorded: its claim expires and it is made
// again.
func (w *Worker) attempt(ctx context.Context, c domain.ClaimedDelivery) {
	traced, span := w.startAttempt(ctx, c)
	r := w.sender.Send(traced, Attempt{URL: c.URL, ID: c.EventID, Body: c.Body, Keys: c.Keys})
	endAttempt(span, r)
	if ctx.Err() != nil {
		return
	}
	now := w.now()
	o := domain.DeliveryOutcome{EventID: c.EventID, EndpointID: c.EndpointID, Attempts: c.Attempts + 1, At: now, Status: r.Status, Err: r.Err}
	switch {
	case r.Delivered():
		o.State = domain.DeliveryDelivered
	case r.Status == 410:
		o.State, o.Disable = domain.DeliveryFailed, "the receiver answered 410 Gone"
	default:
		next, ok := nextRetry(o.Attempts, now, r.RetryAfter, rand.Float64()*2-1)
		o.State, o.NextAt = domain.DeliveryPending, next
		if !ok {
			o.State = domain.DeliveryFailed
		}
	}
	log := w.logger.With("event", c.EventID, "type", c.Type, "endpoint", c.EndpointID, "url", domain.ShownURL(c.URL), "attempt", o.Attempts)
	if sc := trace.SpanContextFromContext(traced); sc.IsSampled() {
		log = log.With("trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String())
	}
	switch o.State {
	case domain.DeliveryDelivered:
		log.Info("webhook delivered", "status", r.Status)
	case domain.DeliveryPending:
		log.Warn("webhook attempt failed; will retry", "err", r.Err, "retry_at", o.NextAt.UTC().Format(time.RFC3339))
	default:
		log.Warn("webhook delivery failed", "err", r.Err)
	}
	w.counted(o.State)
	disabled, err := w.store.FinishWebhookDelivery(context.WithoutCancel(ctx), o, domain.ServerActor)
	if err != nil {
		log.Warn("record a webhook attempt; it will be made again", "err", err)
		return
	}
	if disabled != "" {
		log.Warn("webhook endpoint disabled", "why", disabled)
	}
}

// NoticeExpiries queues key.expiring and key.expired for the keys due
// them, each once across servers.
func (w *Worker) NoticeExpiries(ctx context.Context) {
	keys, err := w.keys(ctx)
	if err == nil {
		var notices []domain.WebhookNotice
		if notices, err = domain.ExpiryNotices(keys, w.now()); err == nil && len(notices) > 0 {
			err = w.store.AddWebhookNotices(ctx, notices)
		}
	}
	if err != nil && ctx.Err() == nil {
		w.logger.Warn("queue key expiry notices; will retry", "err", err)
	}
}

// DeliveryOutcomeNames are the outcome labels of
// petstore_webhook_deliveries_total, by the state an attempt left.
var DeliveryOutcomeNames = map[string]string{
	domain.DeliveryDelivered: "delivered", domain.DeliveryPending: "retried", domain.DeliveryFailed: "failed",
}
