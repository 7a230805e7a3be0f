package main

import (
	"context"
	"time"
)

// The webhook calls of boundStorage, bounded and timed like the others.

type webhookTimers struct {
	add, endpoints, remove, rotate, enable, event, notices, claim, finish, deliveries, resend, backlog callTimer
}

func newWebhookTimers(m *metrics) webhookTimers {
	return webhookTimers{
		add: m.databaseCall("AddWebhookEndpoint"), endpoints: m.databaseCall("WebhookEndpoints"),
		remove: m.databaseCall("RemoveWebhookEndpoint"), rotate: m.databaseCall("RotateWebhookSecret"),
		enable: m.databaseCall("EnableWebhookEndpoint"), event: m.databaseCall("AddWebhookEvent"),
		notices: m.databaseCall("AddWebhookNotices"), claim: m.databaseCall("ClaimWebhookDeliveries"),
		finish: m.databaseCall("FinishWebhookDelivery"), deliveries: m.databaseCall("WebhookDeliveries"),
		resend: m.databaseCall("ResendWebhookDeliveries"), backlog: m.databaseCall("WebhookBacklog"),
	}
}

func (b *boundStorage) AddWebhookEndpoint(ctx context.Context, e webhookEndpoint, actor string) (_ webhookEndpoint, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.webhooks.add, err) }()
	return b.s.AddWebhookEndpoint(ctx, e, actor)
}

func (b *boundStorage) WebhookEndpoints(ctx context.Context) (_ []webhookEndpoint, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.webhooks.endpoints, err) }()
	return b.s.WebhookEndpoints(ctx)
}

func (b *boundStorage) RemoveWebhookEndpoint(ctx context.Context, id int64, actor string) (err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.webhooks.remove, err) }()
	return b.s.RemoveWebhookEndpoint(ctx, id, actor)
}

func (b *boundStorage) RotateWebhookSecret(ctx context.Context, id int64, secret string, overlap time.Duration, actor string) (_ webhookEndpoint, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.webhooks.rotate, err) }()
	return b.s.RotateWebhookSecret(ctx, id, secret, overlap, actor)
}

func (b *boundStorage) EnableWebhookEndpoint(ctx context.Context, id int64, actor string) (_ webhookEndpoint, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.webhooks.enable, err) }()
	return b.s.EnableWebhookEndpoint(ctx, id, actor)
}

func (b *boundStorage) AddWebhookEvent(ctx context.Context, ev webhookEvent, endpointID int64) (err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.webhooks.event, err) }()
	return b.s.AddWebhookEvent(ctx, ev, endpointID)
}

func (b *boundStorage) AddWebhookNotices(ctx context.Context, notices []webhookNotice) (err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.webhooks.notices, err) }()
	return b.s.AddWebhookNotices(ctx, notices)
}

func (b *boundStorage) ClaimWebhookDeliveries(ctx context.Context, now time.Time, claimFor time.Duration, skip []int64, limit int,
	take func(endpointID int64) bool) (_ []claimedDelivery, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.webhooks.claim, err) }()
	return b.s.ClaimWebhookDeliveries(ctx, now, claimFor, skip, limit, take)
}

func (b *boundStorage) FinishWebhookDelivery(ctx context.Context, o deliveryOutcome, actor string) (_ string, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.webhooks.finish, err) }()
	return b.s.FinishWebhookDelivery(ctx, o, actor)
}

func (b *boundStorage) WebhookDeliveries(ctx context.Context, f deliveryFilter) (_ []webhookDelivery, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.webhooks.deliveries, err) }()
	return b.s.WebhookDeliveries(ctx, f)
}

func (b *boundStorage) ResendWebhookDeliveries(ctx context.Context, f deliveryFilter, now time.Time) (_ int64, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.webhooks.resend, err) }()
	return b.s.ResendWebhookDeliveries(ctx, f, now)
}

func (b *boundStorage) WebhookBacklog(ctx context.Context) (_ int64, _ time.Time, err error) {
	ctx, call := b.begin(ctx)
	defer func() { err = call.end(b.webhooks.backlog, err) }()
	return b.s.WebhookBacklog(ctx)
}
