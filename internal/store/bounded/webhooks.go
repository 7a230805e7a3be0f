package bounded

import (
	"context"
	"time"

	"petstore/internal/domain"
)

// The webhook calls of Store, bounded and timed like the others.

func (b *Store) AddWebhookEndpoint(ctx context.Context, e domain.WebhookEndpoint, actor, env string) (v domain.WebhookEndpoint, err error) {
	err = b.bounded(ctx, "AddWebhookEndpoint", func(ctx context.Context) (err error) { v, err = b.s.AddWebhookEndpoint(ctx, e, actor, env); return err })
	return v, err
}

func (b *Store) WebhookEndpoints(ctx context.Context) (v []domain.WebhookEndpoint, err error) {
	err = b.bounded(ctx, "WebhookEndpoints", func(ctx context.Context) (err error) { v, err = b.s.WebhookEndpoints(ctx); return err })
	return v, err
}

func (b *Store) RemoveWebhookEndpoint(ctx context.Context, id int64, actor, env string) error {
	return b.bounded(ctx, "RemoveWebhookEndpoint", func(ctx context.Context) error { return b.s.RemoveWebhookEndpoint(ctx, id, actor, env) })
}

func (b *Store) RotateWebhookSecret(ctx context.Context, id int64, secret string, overlap time.Duration, actor, env string) (v domain.WebhookEndpoint, err error) {
	err = b.bounded(ctx, "RotateWebhookSecret", func(ctx context.Context) (err error) {
		v, err = b.s.RotateWebhookSecret(ctx, id, secret, overlap, actor, env)
		return err
	})
	return v, err
}

func (b *Store) EnableWebhookEndpoint(ctx context.Context, id int64, actor, env string) (v domain.WebhookEndpoint, err error) {
	err = b.bounded(ctx, "EnableWebhookEndpoint", func(ctx context.Context) (err error) {
		v, err = b.s.EnableWebhookEndpoint(ctx, id, actor, env)
		return err
	})
	return v, err
}

func (b *Store) AddWebhookEvent(ctx context.Context, ev domain.WebhookEvent, endpointID int64) error {
	return b.bounded(ctx, "AddWebhookEvent", func(ctx context.Context) error { return b.s.AddWebhookEvent(ctx, ev, endpointID) })
}

func (b *Store) AddWebhookNotices(ctx context.Context, notices []domain.WebhookNotice) error {
	return b.bounded(ctx, "AddWebhookNotices", func(ctx context.Context) error { return b.s.AddWebhookNotices(ctx, notices) })
}

func (b *Store) ClaimWebhookDeliveries(ctx context.Context, now time.Time, claimFor time.Duration, skip []int64, limit int,
	take func(endpointID int64) bool) (v []domain.ClaimedDelivery, err error) {
	err = b.bounded(ctx, "ClaimWebhookDeliveries", func(ctx context.Context) (err error) {
		v, err = b.s.ClaimWebhookDeliveries(ctx, now, claimFor, skip, limit, take)
		return err
	})
	return v, err
}

func (b *Store) FinishWebhookDelivery(ctx context.Context, o domain.DeliveryOutcome, actor, env string) (v string, err error) {
	err = b.bounded(ctx, "FinishWebhookDelivery", func(ctx context.Context) (err error) {
		v, err = b.s.FinishWebhookDelivery(ctx, o, actor, env)
		return err
	})
	return v, err
}

func (b *Store) WebhookDeliveries(ctx context.Context, f domain.DeliveryFilter) (v []domain.WebhookDelivery, err error) {
	err = b.bounded(ctx, "WebhookDeliveries", func(ctx context.Context) (err error) { v, err = b.s.WebhookDeliveries(ctx, f); return err })
	return v, err
}

func (b *Store) ResendWebhookDeliveries(ctx context.Context, f domain.DeliveryFilter, now time.Time) (v int64, err error) {
	err = b.bounded(ctx, "ResendWebhookDeliveries", func(ctx context.Context) (err error) { v, err = b.s.ResendWebhookDeliveries(ctx, f, now); return err })
	return v, err
}

func (b *Store) WebhookBacklog(ctx context.Context) (n int64, oldest time.Time, err error) {
	err = b.bounded(ctx, "WebhookBacklog", func(ctx context.Context) (err error) { n, oldest, err = b.s.WebhookBacklog(ctx); return err })
	return n, oldest, err
}

func (b *Store) PruneWebhooks(ctx context.Context, now time.Time) error {
	return b.bounded(ctx, "PruneWebhooks", func(ctx context.Context) error { return b.s.PruneWebhooks(ctx, now) })
}
