package webhook_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/servertest"
	"petstore/internal/testkit"
)

// A webhook delivered by another server minutes later is linked to the
// request that queued it, as an OTLP receiver gets the spans over HTTP from
// both servers (their OTEL_* variables read as serve reads them), and the
// receiver of the webhook saw the attempt's traceparent. The server that
// delivers it samples none of its own requests: an attempt linked to a
// sampled request is sampled all the same.
func TestWebhookDeliveredByAnotherServerLaterLinksToTheRequest(t *testing.T) {
	t.Parallel()
	collector := testkit.StartOTLP(t)
	tracedAs := func(service, ratio string) func(string) string {
		env := map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": collector.Endpoint(), "OTEL_SERVICE_NAME": service, "OTEL_BSP_SCHEDULE_DELAY": "50",
			"OTEL_TRACES_SAMPLER_ARG": ratio,
		}
		return func(name string) string { return env[name] }
	}
	a := servertest.Start(t, servertest.Options{Postgres: true, WebhookAllowPrivate: true, Getenv: tracedAs("petstore-a", "1")})
	b := servertest.Start(t, servertest.Options{Postgres: true, DB: a.DBPath, WebhookAllowPrivate: true, Getenv: tracedAs("petstore-b", "0")})
	rc := testkit.NewReceiver(t)
	a.AddEndpoint(rc, domain.AuditKeyCreated)

	admin := a.MustCreateAdmin("portal", domain.AllAdminScopes)
	if w := a.Admin("POST", "/admin/v1/keys", admin, `{"plan":"free","name":"acme"}`); w.Code != http.StatusCreated {
		t.Fatalf("create a key on server A: %d %s", w.Code, w.Body)
	}
	// A never sends it (its worker does not run); B does, 10 minutes on.
	b.Clock.Advance(10 * time.Minute)
	b.DeliverDue()
	got := rc.Wait(1, 5*time.Second)

	spans := collector.WaitFor(10*time.Second, "POST /admin/v1/keys", "webhook deliver")
	request, _ := testkit.Named(spans, "POST /admin/v1/keys")
	attempt, _ := testkit.Named(spans, "webhook deliver")
	if request.Resource["service.name"] != "petstore-a" || attempt.Resource["service.name"] != "petstore-b" {
		t.Errorf("the request was traced by %q, the attempt by %q; want A's and B's", request.Resource["service.name"], attempt.Resource["service.name"])
	}
	if !attempt.LinksTo(request) || attempt.TraceID == request.TraceID || attempt.ParentSpanID != "" || attempt.Kind != "SPAN_KIND_CLIENT" {
		t.Errorf("the attempt (a %s in trace %s, parent %q) links to %+v; want a client span at the root of its own trace, linked to the request's span %s in %s",
			attempt.Kind, attempt.TraceID, attempt.ParentSpanID, attempt.Links, request.SpanID, request.TraceID)
	}
	if attempt.Attributes["petstore.webhook.event_type"] != domain.AuditKeyCreated || attempt.Attributes["http.response.status_code"] != "204" {
		t.Errorf("the attempt's attributes: %v", attempt.Attributes)
	}
	if want := fmt.Sprintf("00-%s-%s-01", attempt.TraceID, attempt.SpanID); got[0].Traceparent != want || !got[0].Verified {
		t.Errorf("the receiver got traceparent %q (verified: %v), want the attempt's %q", got[0].Traceparent, got[0].Verified, want)
	}
}
