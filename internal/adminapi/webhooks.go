package adminapi

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/manage"
	"petstore/internal/webhook"
)

// The webhooks over the admin API (scope webhooks): what the webhooks
// commands do, by the same rules, with the same objects (domain.ListedEndpoint,
// domain.ListedDelivery). The secret is in the answers of a create and a rotation
// only.

// CreatedEndpoint is an endpoint made or rotated: its object and, this
// once, its secret.
type CreatedEndpoint struct {
	domain.ListedEndpoint
	Secret string `json:"secret"`
}

func ListWebhooks(d Deps) http.Handler {
	return route(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		endpoints, err := d.Webhooks.WebhookEndpoints(r.Context(), d.Env)
		return http.StatusOK, manage.ListedEndpoints(endpoints, d.Now()), err
	})
}

func AddWebhook(d Deps, env string) http.Handler {
	fields := []string{"url", "events"}
	return route(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		body, err := httpapi.DecodeObject(w, r, fields, "a new webhook endpoint has only "+strings.Join(fields, ", "))
		if err != nil {
			return 0, nil, err
		}
		var url string
		if err := jsonBody(body).str("url", &url); err != nil {
			return 0, nil, err
		}
		var events []string
		if raw, ok := body["events"]; ok && (string(raw) == "null" || json.Unmarshal(raw, &events) != nil) {
			return 0, nil, domain.Invalid("events must be an array of event types (%s)", strings.Join(domain.WebhookEventTypes, ", "))
		}
		terms, err := manage.NewEndpointTerms(url, events)
		if err != nil {
			return 0, nil, err
		}
		if problem := d.WebhookGuard.URLProblem(r.Context(), url); problem != "" {
			return 0, nil, domain.Invalid("%s", problem)
		}
		e, err := d.Webhooks.AddWebhookEndpoint(r.Context(), terms, httpapi.RecordOf(w).Admin().Actor(), env)
		if err != nil {
			return 0, nil, err
		}
		w.Header().Set("Location", "/admin/v1/webhooks/"+strconv.FormatInt(e.ID, 10))
		return http.StatusCreated, CreatedEndpoint{e.Listed(d.Now()), e.Secret}, nil
	})
}

func RemoveWebhook(d Deps, env string) http.Handler {
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) (int, any, error) {
		err := d.Webhooks.RemoveWebhookEndpoint(r.Context(), id, httpapi.RecordOf(w).Admin().Actor(), env)
		return http.StatusNoContent, nil, err
	})
}

func RotateWebhook(d Deps, env string) http.Handler {
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) (int, any, error) {
		overlap, err := overlapBody(w, r, manage.DefaultWebhookOverlap, "a rotation has only overlap", manage.SecretOverlapAtZero)
		if err != nil {
			return 0, nil, err
		}
		e, err := d.Webhooks.RotateWebhookSecret(r.Context(), id, webhook.NewSecret(), overlap, httpapi.RecordOf(w).Admin().Actor(), env)
		return http.StatusOK, CreatedEndpoint{e.Listed(d.Now()), e.Secret}, err
	})
}

func EnableWebhook(d Deps, env string) http.Handler {
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) (int, any, error) {
		e, err := d.Webhooks.EnableWebhookEndpoint(r.Context(), id, httpapi.RecordOf(w).Admin().Actor(), env)
		return http.StatusOK, e.Listed(d.Now()), err
	})
}

// QueuedEvent answers a test: the event's id, which every attempt carries
// as webhook-id.
type QueuedEvent struct {
	EventID string `json:"eventId"`
}

func TestWebhook(d Deps) http.Handler {
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) (int, any, error) {
		ev, err := manage.QueueTest(r.Context(), d.Webhooks, d.Env, id, httpapi.RecordOf(w).Admin().Actor(), d.Now())
		return http.StatusAccepted, QueuedEvent{ev.ID}, err
	})
}

func WebhookDeliveries(d Deps) http.Handler {
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) (int, any, error) {
		f := domain.DeliveryFilter{Env: d.Env, EndpointID: id}
		v := r.URL.Query()
		err := atMostOnce(v, "limit", "failed")
		if err != nil {
			return 0, nil, err
		}
		if f.Limit, err = pageLimit(v); err != nil {
			return 0, nil, err
		}
		if failed := v.Get("failed"); failed != "" && failed != "true" && failed != "false" {
			return 0, nil, domain.Invalid("failed must be true or false")
		}
		f.Failed = v.Get("failed") == "true"
		if err := d.checkEndpoint(r.Context(), id); err != nil {
			return 0, nil, err
		}
		deliveries, err := d.Webhooks.WebhookDeliveries(r.Context(), f)
		return http.StatusOK, manage.Listed(deliveries, domain.WebhookDelivery.Listed), err
	})
}

// checkEndpoint refuses an unknown endpoint id, or another environment's:
// not_found.
func (d Deps) checkEndpoint(ctx context.Context, id int64) error {
	endpoints, err := d.Webhooks.WebhookEndpoints(ctx, d.Env)
	if err == nil && !slices.ContainsFunc(endpoints, func(e domain.WebhookEndpoint) bool { return e.ID == id }) {
		err = domain.NotFound("no webhook endpoint has id %d", id)
	}
	return err
}

// resent answers a resend: how many deliveries were queued again.
type resent struct {
	Queued int64 `json:"queued"`
}

func ResendWebhook(d Deps) http.Handler {
	fields := []string{"eventId", "failed"}
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) (int, any, error) {
		body, err := httpapi.DecodeObject(w, r, fields, "a resend has only eventId or failed")
		if err != nil {
			return 0, nil, err
		}
		f := domain.DeliveryFilter{Env: d.Env, EndpointID: id}
		if err := jsonBody(body).str("eventId", &f.EventID); err != nil {
			return 0, nil, err
		}
		if raw, ok := body["failed"]; ok && json.Unmarshal(raw, &f.Failed) != nil {
			return 0, nil, domain.Invalid("failed must be true or false")
		}
		if (f.EventID == "") == !f.Failed {
			return 0, nil, domain.Invalid("give eventId (msg_...) or \"failed\": true, one of them")
		}
		if err := d.checkEndpoint(r.Context(), id); err != nil {
			return 0, nil, err
		}
		n, err := d.Webhooks.ResendWebhookDeliveries(r.Context(), f, d.Now())
		if err != nil {
			return 0, nil, err
		}
		if n == 0 && f.EventID != "" {
			return 0, nil, domain.NotFound("endpoint %d has no delivery of event %s", id, f.EventID)
		}
		return http.StatusOK, resent{n}, nil
	})
}
