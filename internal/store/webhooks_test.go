package store_test

import (
	"context"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/servertest"
	"petstore/internal/testkit"

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
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		for _, c := range cases {
			s := servertest.Start(t, opts)
			e := s.AddEndpoint(testkit.NewReceiver(t))
			queued := queueEachWay(t, s, c.ctx, e.ID)
			claimed, err := s.Store().ClaimWebhookDeliveries(context.Background(), s.Env, s.Clock.Now(), time.Minute, nil, 100,
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
					t.Errorf("%s, %s: its delivery's cause is %q (claimed: %v), want %q", c.name, how, got, ok, c.want)
				}
			}
		}
	})
}

// queueEachWay queues an event for endpoint in ctx each way the store
// queues one, and returns their ids by way.
func queueEachWay(t *testing.T, s *servertest.Server, ctx context.Context, endpoint int64) map[string]string {
	t.Helper()
	terms := s.KeyTerms("free")
	hash := domain.HashKey(domain.NewKeyToken(s.Env))
	terms.Hash = hash[:]
	if _, err := s.Store().CreateKey(ctx, terms, servertest.Actor); err != nil {
		t.Fatal(err)
	}
	audited, err := s.Store().WebhookDeliveries(ctx, domain.DeliveryFilter{Env: s.Env, Limit: 1})
	if err != nil || len(audited) != 1 || audited[0].Type != domain.AuditKeyCreated {
		t.Fatalf("the key.created event: %+v, %v", audited, err)
	}
	test, err := domain.NewWebhookEvent(domain.WebhookTestEvent, s.Clock.Now(), map[string]any{"webhookId": endpoint})
	if err == nil {
		err = s.Store().AddWebhookEvent(ctx, test, endpoint, s.Env)
	}
	if err != nil {
		t.Fatal(err)
	}
	notice, err := domain.NewWebhookEvent(domain.WebhookQuotaThreshold, s.Clock.Now(), map[string]any{"threshold": 80})
	if err == nil {
		err = s.Store().AddWebhookNotices(ctx, []domain.WebhookNotice{
			{Mark: "quota:" + notice.ID, Event: notice, ForgetAt: s.Clock.Now().Add(domain.KeepQuotaMarks), Env: s.Env}})
	}
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"an audited change": audited[0].EventID, "a test event": test.ID, "a notice": notice.ID}
}
