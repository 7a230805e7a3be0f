package webhook_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/manage"
	"petstore/internal/servertest"
	"petstore/internal/testkit"
	"petstore/internal/webhook"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// traced is a server with the worker of a server that traces (its
// attempts' spans end up in spans, its lines in log), and an endpoint for
// rc whose URL carries a secret of the receiver's in its path and query,
// which no span may hold.
type traced struct {
	*servertest.Server
	endpoint domain.WebhookEndpoint
	worker   *webhook.Worker
	spans    *tracetest.InMemoryExporter
	log      *testkit.SyncBuffer
}

func tracedServer(t *testing.T, opts servertest.Options, rc *testkit.Receiver) traced {
	t.Helper()
	tr := traced{Server: servertest.Start(t, opts), spans: tracetest.NewInMemoryExporter(), log: &testkit.SyncBuffer{}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tr.spans))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	s := tr.Server
	tr.worker = webhook.NewWorker(s.Store(), s.Store().Keys, webhook.NewSender(nil, "petstore/test", time.Now), s.Clock.Now,
		slog.New(slog.NewJSONHandler(tr.log, nil)), func(string) {}, s.Env, tp)
	terms, err := manage.NewEndpointTerms(rc.URL()+"/receiver-path-secret?token=receiver-query-secret", nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.Store().AddWebhookEndpoint(context.Background(), terms, servertest.Actor, s.Env)
	if err != nil {
		t.Fatal(err)
	}
	rc.Trust(e.Secret)
	tr.endpoint = e
	return tr
}

// deliverDue makes the attempts due now with the traced worker, and waits
// for them.
func (tr traced) deliverDue() {
	for {
		var attempts sync.WaitGroup
		n := tr.worker.Dispatch(context.Background(), &attempts)
		attempts.Wait()
		if n == 0 {
			return
		}
	}
}

// attemptSpans are the spans of the webhooks' attempts the exporter holds.
func attemptSpans(spans *tracetest.InMemoryExporter) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		if s.Name == "webhook deliver" {
			out = append(out, s)
		}
	}
	return out
}

func attributesOf(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// Each attempt of a delivery is a client span of its own trace that links
// to the span that queued the event (a link, not a parent: the attempts
// come minutes or hours later, maybe from another server), says which
// endpoint, event and attempt it was and what the receiver answered, and
// sends its traceparent, so that a receiver that traces sees it inside its
// own trace; its log line names the span. No span holds the endpoint's URL
// path or query, its secret or the body.
func TestWebhookAttemptsAreClientSpansLinkedToTheirCause(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		rc := testkit.NewReceiver(t)
		rc.AnswerWith(func(n int, _ testkit.Delivery) int {
			if n == 0 {
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		})
		s := tracedServer(t, opts, rc)
		e := s.endpoint
		ctx, cause := sdktrace.NewTracerProvider().Tracer("test").Start(context.Background(), "POST /admin/v1/webhooks/{id}/test")
		ev, err := manage.QueueTest(ctx, s.Store(), s.Env, e.ID, servertest.Actor, s.Clock.Now())
		cause.End()
		if err != nil {
			t.Fatal(err)
		}
		s.deliverDue()
		s.Clock.Advance(time.Minute)
		s.deliverDue()

		got, attempts := rc.Wait(2, 5*time.Second), attemptSpans(s.spans)
		if len(attempts) != 2 {
			t.Fatalf("%d attempt spans, want 2 (a 503, then a 204): %+v", len(attempts), attempts)
		}
		for i, want := range []struct {
			status int64
			code   codes.Code
		}{{503, codes.Error}, {204, codes.Unset}} {
			span := attempts[i]
			if span.SpanKind != trace.SpanKindClient || span.Parent.IsValid() || span.SpanContext.TraceID() == cause.SpanContext().TraceID() {
				t.Errorf("attempt %d: kind %v, parent %v, trace %v: want a client span at the root of a trace of its own", i+1,
					span.SpanKind, span.Parent.SpanID(), span.SpanContext.TraceID())
			}
			if len(span.Links) != 1 || span.Links[0].SpanContext.TraceID() != cause.SpanContext().TraceID() ||
				span.Links[0].SpanContext.SpanID() != cause.SpanContext().SpanID() {
				t.Errorf("attempt %d links to %+v, want the span that queued the event %v", i+1, span.Links, cause.SpanContext().SpanID())
			}
			attrs := attributesOf(span)
			for key, value := range map[attribute.Key]attribute.Value{
				"petstore.webhook.endpoint_id": attribute.Int64Value(e.ID), "petstore.webhook.event_type": attribute.StringValue(domain.WebhookTestEvent),
				"petstore.webhook.event_id": attribute.StringValue(ev.ID), "petstore.webhook.attempt": attribute.IntValue(i + 1),
				"http.response.status_code": attribute.Int64Value(want.status), "server.address": attribute.StringValue("127.0.0.1"),
			} {
				if attrs[key] != value {
					t.Errorf("attempt %d: %s = %v, want %v", i+1, key, attrs[key].String(), value.String())
				}
			}
			if span.Status.Code != want.code {
				t.Errorf("attempt %d: status %+v, want %v", i+1, span.Status, want.code)
			}
			traceparent := fmt.Sprintf("00-%s-%s-01", span.SpanContext.TraceID(), span.SpanContext.SpanID())
			if got[i].Traceparent != traceparent || !got[i].Verified {
				t.Errorf("attempt %d: the receiver got traceparent %q (verified: %v), want its span's %q", i+1, got[i].Traceparent, got[i].Verified, traceparent)
			}
			if ids := fmt.Sprintf(`"trace_id":"%s","span_id":"%s"`, span.SpanContext.TraceID(), span.SpanContext.SpanID()); !strings.Contains(s.log.String(), ids) {
				t.Errorf("attempt %d: no log line with %s:\n%s", i+1, ids, s.log.String())
			}
			for _, kv := range span.Attributes {
				if v := kv.Value.String(); strings.Contains(v, "secret") || strings.Contains(v, "whsec_") || strings.Contains(v, "webhookId") {
					t.Errorf("attempt %d: %s = %q holds the URL's path or query, the secret or the body", i+1, kv.Key, v)
				}
			}
		}
		if d := deliveryOf(s.Server, ev.ID); d.State != domain.DeliveryDelivered {
			t.Errorf("the delivery: %+v, want delivered", d)
		}
	})
}

// An event queued by what was not traced (a command, a server before
// migration 012) is delivered with a span that links to nothing.
func TestWebhookAttemptOfAnUntracedEventLinksToNothing(t *testing.T) {
	t.Parallel()
	rc := testkit.NewReceiver(t)
	s := tracedServer(t, servertest.Options{}, rc)
	if _, err := manage.QueueTest(context.Background(), s.Store(), s.Env, s.endpoint.ID, servertest.Actor, s.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	s.deliverDue()
	got, attempts := rc.Wait(1, 5*time.Second), attemptSpans(s.spans)
	if len(attempts) != 1 || len(attempts[0].Links) != 0 || got[0].Traceparent == "" {
		t.Fatalf("spans %+v, traceparent %q: want one span linking to nothing, its traceparent sent", attempts, got[0].Traceparent)
	}
}

// With tracing off the worker sends no traceparent, not even the cause's
// of an event queued by a server that traces.
func TestWebhookAttemptWithTracingOffSendsNoTraceparent(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{}.WithWebhooks())
	rc := testkit.NewReceiver(t)
	e := s.AddEndpoint(rc)
	ctx, cause := sdktrace.NewTracerProvider().Tracer("test").Start(context.Background(), "cause")
	if _, err := manage.QueueTest(ctx, s.Store(), s.Env, e.ID, servertest.Actor, s.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	cause.End()
	s.DeliverDue()
	if got := rc.Wait(1, 5*time.Second); got[0].Traceparent != "" || !got[0].Verified {
		t.Errorf("with tracing off the receiver got traceparent %q (verified: %v), want none", got[0].Traceparent, got[0].Verified)
	}
}

// tracedGet sends GET /v1/pets with key through s's handler in a span of
// tracer, as a request a server traces, and returns the answer and the span.
func tracedGet(s *servertest.Server, tracer trace.Tracer, key string) (*httptest.ResponseRecorder, trace.SpanContext) {
	ctx, span := tracer.Start(context.Background(), "GET /v1/pets")
	defer span.End()
	r := httptest.NewRequest("GET", "/v1/pets", nil).WithContext(ctx)
	r.Header.Set("Authorization", "Bearer "+key)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	return w, span.SpanContext()
}

// linksOf are the links of the attempts' spans of events of type typ.
func linksOf(spans *tracetest.InMemoryExporter, typ string) []sdktrace.Link {
	var links []sdktrace.Link
	for _, span := range attemptSpans(spans) {
		if attributesOf(span)["petstore.webhook.event_type"].AsString() == typ {
			links = append(links, span.Links...)
		}
	}
	return links
}

// A quota notice and a ban's key.banned are stored by a flush after the
// request that reached the threshold or started the ban: their deliveries
// link to that request's span all the same.
func TestWebhookNoticesAndBansLinkToTheRequestThatStartedThem(t *testing.T) {
	t.Parallel()
	tracer := sdktrace.NewTracerProvider().Tracer("test")
	for _, c := range []struct {
		typ   string
		limit domain.Limits
		// started tells whether the answer is the one that started it.
		started func(n int, w *httptest.ResponseRecorder) bool
		flush   func(s traced)
	}{
		{domain.WebhookQuotaThreshold, domain.Limits{PerMinute: 1000, PerDay: 10},
			func(n int, _ *httptest.ResponseRecorder) bool { return n == 8 }, // 80%
			func(s traced) {
				if err := s.Quota().Flush(context.Background(), s.Store().AddWebhookNotices); err != nil {
					t.Fatal(err)
				}
			}},
		{domain.AuditKeyBanned, domain.Limits{PerMinute: 2, PerDay: 1000},
			func(_ int, w *httptest.ResponseRecorder) bool {
				return strings.Contains(w.Body.String(), httpapi.CodeTemporarilyBanned)
			},
			func(s traced) { s.FlushAudit() }},
	} {
		t.Run(c.typ, func(t *testing.T) {
			rc := testkit.NewReceiver(t)
			s := tracedServer(t, servertest.Options{}, rc)
			_, key := s.MustCreate(s.KeyTerms("enterprise", c.limit))
			var cause trace.SpanContext
			for n := 1; n <= 30 && !cause.IsValid(); n++ {
				if w, span := tracedGet(s.Server, tracer, key); c.started(n, w) {
					cause = span
				}
			}
			c.flush(s)
			s.deliverDue()
			rc.Wait(2, 5*time.Second) // key.created, then the event
			links := linksOf(s.spans, c.typ)
			if !cause.IsValid() || len(links) != 1 || links[0].SpanContext.SpanID() != cause.SpanID() || links[0].SpanContext.TraceID() != cause.TraceID() {
				t.Fatalf("the %s event's attempts link to %+v, want the span %v of the request that started it alone", c.typ, links, cause.SpanID())
			}
		})
	}
}
