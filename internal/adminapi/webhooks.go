package adminapi

import (
	"encoding/json"
	"net/http"
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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		endpoints, err := d.Store.WebhookEndpoints(r.Context())
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, manage.ListedEndpoints(endpoints, d.Now()))
	})
}

func AddWebhook(d Deps, env string) http.Handler {
	fields := []string{"url", "events"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := httpapi.DecodeObject(w, r, fields, "a new webhook endpoint has only "+strings.Join(fields, ", "))
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		var url string
		if err := jsonBody(body).str("url", &url); err != nil {
			httpapi.WriteError(w, err)
			return
		}
		var events []string
		if raw, ok := body["events"]; ok && (string(raw) == "null" || json.Unmarshal(raw, &events) != nil) {
			httpapi.WriteError(w, domain.Invalid("events must be an array of event types (%s)", strings.Join(domain.WebhookEventTypes, ", ")))
			return
		}
		terms, err := manage.NewEndpointTerms(url, events)
		if err == nil {
			if problem := d.WebhookGuard.URLProblem(r.Context(), url); problem != "" {
				err = domain.Invalid("%s", problem)
			}
		}
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		e, err := d.Store.AddWebhookEndpoint(r.Context(), terms, httpapi.RecordOf(w).Admin().Actor(), env)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		w.Header().Set("Location", "/admin/v1/webhooks/"+strconv.FormatInt(e.ID, 10))
		httpapi.WriteJSON(w, http.StatusCreated, CreatedEndpoint{e.Listed(d.Now()), e.Secret})
	})
}

func RemoveWebhook(d Deps, env string) http.Handler {
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) {
		if err := d.Store.RemoveWebhookEndpoint(r.Context(), id, httpapi.RecordOf(w).Admin().Actor(), env); err != nil {
			httpapi.WriteError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func RotateWebhook(d Deps, env string) http.Handler {
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) {
		overlap, err := overlapBody(w, r, manage.DefaultWebhookOverlap, "a rotation has only overlap", manage.SecretOverlapAtZero)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		e, err := d.Store.RotateWebhookSecret(r.Context(), id, webhook.NewSecret(), overlap, httpapi.RecordOf(w).Admin().Actor(), env)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, CreatedEndpoint{e.Listed(d.Now()), e.Secret})
	})
}

func EnableWebhook(d Deps, env string) http.Handler {
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) {
		e, err := d.Store.EnableWebhookEndpoint(r.Context(), id, httpapi.RecordOf(w).Admin().Actor(), env)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, e.Listed(d.Now()))
	})
}

// QueuedEvent answers a test: the event's id, which every attempt carries
// as webhook-id.
type QueuedEvent struct {
	EventID string `json:"eventId"`
}

func TestWebhook(d Deps) http.Handler {
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) {
		ev, err := manage.QueueTest(r.Context(), d.Store, id, httpapi.RecordOf(w).Admin().Actor(), d.Now())
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusAccepted, QueuedEvent{ev.ID})
	})
}

func WebhookDeliveries(d Deps) http.Handler {
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) {
		f := domain.DeliveryFilter{EndpointID: id}
		v := r.URL.Query()
		var err error
		if f.Limit, err = pageLimit(v); err != nil {
			httpapi.WriteError(w, err)
			return
		}
		switch v.Get("failed") {
		case "", "false":
		case "true":
			f.Failed = true
		default:
			httpapi.WriteError(w, domain.Invalid("failed must be true or false"))
			return
		}
		if _, err := findEndpoint(r, d, id); err != nil {
			httpapi.WriteError(w, err)
			return
		}
		deliveries, err := d.Store.WebhookDeliveries(r.Context(), f)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, manage.Listed(deliveries, domain.WebhookDelivery.Listed))
	})
}

// findEndpoint is endpoint id; an unknown id is not_found.
func findEndpoint(r *http.Request, d Deps, id int64) (domain.WebhookEndpoint, error) {
	endpoints, err := d.Store.WebhookEndpoints(r.Context())
	if err != nil {
		return domain.WebhookEndpoint{}, err
	}
	for _, e := range endpoints {
		if e.ID == id {
			return e, nil
		}
	}
	return domain.WebhookEndpoint{}, domain.NotFound("no webhook endpoint has id %d", id)
}

// resent answers a resend: how many deliveries were queued again.
type resent struct {
	Queued int64 `json:"queued"`
}

func ResendWebhook(d Deps) http.Handler {
	fields := []string{"eventId", "failed"}
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) {
		body, err := httpapi.DecodeObject(w, r, fields, "a resend has only eventId or failed")
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		f := domain.DeliveryFilter{EndpointID: id}
		if err := jsonBody(body).str("eventId", &f.EventID); err != nil {
			httpapi.WriteError(w, err)
			return
		}
		if raw, ok := body["failed"]; ok && json.Unmarshal(raw, &f.Failed) != nil {
			httpapi.WriteError(w, domain.Invalid("failed must be true or false"))
			return
		}
		if (f.EventID == "") == !f.Failed {
			httpapi.WriteError(w, domain.Invalid("give eventId (msg_...) or \"failed\": true, one of them"))
			return
		}
		if _, err := findEndpoint(r, d, id); err != nil {
			httpapi.WriteError(w, err)
			return
		}
		n, err := d.Store.ResendWebhookDeliveries(r.Context(), f, d.Now())
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		if n == 0 && f.EventID != "" {
			httpapi.WriteError(w, domain.NotFound("endpoint %d has no delivery of event %s", id, f.EventID))
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, resent{n})
	})
}
