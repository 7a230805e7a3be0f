package store

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"petstore/internal/domain"

	"go.opentelemetry.io/otel/trace"
)

// An event keeps the trace context of what queued it (migration 012), read
// back with each of its claimed deliveries, so that a delivery made hours
// later on another server links to it: an audited change's event, a
// notice's and a test event alike, on either engine. What was not traced,
// or traced but not sampled, keeps none.
func TestAnEventKeepsTheTraceContextOfWhatQueuedIt(t *testing.T) {
	traceID, spanID := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	state, err := trace.ParseTraceState("vendor=opaque value,other=1")
	if err != nil {
		t.Fatal(err)
	}
	spanOf := func(flags trace.TraceFlags, state trace.TraceState) context.Context {
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: flags, TraceState: state})
		return trace.ContextWithSpanContext(context.Background(), sc)
	}
	cases := []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"a sampled span", spanOf(trace.FlagsSampled, trace.TraceState{}), traceparent},
		{"a sampled span with a tracestate", spanOf(trace.FlagsSampled, state), traceparent + " vendor=opaque value,other=1"},
		{"a span not sampled", spanOf(0, state), ""},
		{"no span: tracing off", context.Background(), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachEngine(t, func(t *testing.T, s Storage) {
				e, err := s.AddWebhookEndpoint(context.Background(), domain.WebhookEndpoint{URL: "https://hooks.example.test/in",
					Secret: testSecret, Enabled: true}, "test", testEnv)
				if err != nil {
					t.Fatal(err)
				}
				queued := queueEachWay(t, s, c.ctx, e.ID)
				claimed, err := s.ClaimWebhookDeliveries(context.Background(), testEnv, time.Now(), time.Minute, nil, 100,
					func(int64) bool { return true })
				if err != nil {
					t.Fatal(err)
				}
				causes := map[string]string{}
				for _, d := range claimed {
					causes[d.EventID] = d.Cause
				}
				for how, id := range queued {
					if got, ok := causes[id]; !ok || got != c.want {
						t.Errorf("%s: its delivery's cause is %q (claimed: %v), want %q", how, got, ok, c.want)
					}
				}
			})
		})
	}
}

// testSecret is an endpoint's signing secret in the form the store takes.
var testSecret = domain.WebhookSecretPrefix + base64.StdEncoding.EncodeToString(make([]byte, 32))

// queueEachWay queues an event for endpoint in ctx each way the store
// queues one, and returns their ids by way.
func queueEachWay(t *testing.T, s Storage, ctx context.Context, endpoint int64) map[string]string {
	t.Helper()
	createTestKey(t, ctx, s)
	audited, err := s.WebhookDeliveries(ctx, domain.DeliveryFilter{Env: testEnv, Limit: 1})
	if err != nil || len(audited) != 1 || audited[0].Type != domain.AuditKeyCreated {
		t.Fatalf("the key.created event: %+v, %v", audited, err)
	}
	now := time.Now()
	test, err := domain.NewWebhookEvent(domain.WebhookTestEvent, now, map[string]any{"webhookId": endpoint})
	if err == nil {
		err = s.AddWebhookEvent(ctx, test, endpoint, testEnv)
	}
	if err != nil {
		t.Fatal(err)
	}
	notice, err := domain.NewWebhookEvent(domain.WebhookQuotaThreshold, now, map[string]any{"threshold": 80})
	if err == nil {
		err = s.AddWebhookNotices(ctx, []domain.WebhookNotice{
			{Mark: "quota:" + notice.ID, Event: notice, ForgetAt: now.Add(domain.KeepQuotaMarks), Env: testEnv}})
	}
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"an audited change": audited[0].EventID, "a test event": test.ID, "a notice": notice.ID}
}
