package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"petstore/internal/domain"
	"petstore/internal/manage"
	"petstore/internal/webhook"
)

// The webhooks over the admin API (scope webhooks): what the webhooks
// commands do, by the same rules, with the same objects (listedEndpoint,
// listedDelivery). The secret is in the answers of a create and a rotation
// only.

// createdEndpoint is an endpoint made or rotated: its object and, this
// once, its secret.
type createdEndpoint struct {
	domain.ListedEndpoint
	Secret string `json:"secret"`
}

func handleAdminListWebhooks(d adminDeps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		endpoints, err := d.store.WebhookEndpoints(r.Context())
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, r, http.StatusOK, manage.ListedEndpoints(endpoints, d.now()))
	})
}

func handleAdminAddWebhook(d adminDeps, env string) http.Handler {
	fields := []string{"url", "events"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := decodeObject(w, r, fields, "a new webhook endpoint has only "+strings.Join(fields, ", "))
		if err != nil {
			writeError(w, r, err)
			return
		}
		var url string
		if err := jsonBody(body).str("url", &url); err != nil {
			writeError(w, r, err)
			return
		}
		var events []string
		if raw, ok := body["events"]; ok && (string(raw) == "null" || json.Unmarshal(raw, &events) != nil) {
			writeError(w, r, domain.Invalid("events must be an array of event types (%s)", strings.Join(domain.WebhookEventTypes, ", ")))
			return
		}
		terms, err := manage.NewEndpointTerms(url, events)
		if err == nil {
			if problem := d.webhookGuard.URLProblem(r.Context(), url); problem != "" {
				err = domain.Invalid("%s", problem)
			}
		}
		if err != nil {
			writeError(w, r, err)
			return
		}
		e, err := d.store.AddWebhookEndpoint(r.Context(), terms, recordOf(w).admin.Actor(), env)
		if err != nil {
			writeError(w, r, err)
			return
		}
		w.Header().Set("Location", "/admin/v1/webhooks/"+strconv.FormatInt(e.ID, 10))
		writeJSON(w, r, http.StatusCreated, createdEndpoint{e.Listed(d.now()), e.Secret})
	})
}

func handleAdminRemoveWebhook(d adminDeps, env string) http.Handler {
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) {
		if err := d.store.RemoveWebhookEndpoint(r.Context(), id, recordOf(w).admin.Actor(), env); err != nil {
			writeError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func handleAdminRotateWebhook(d adminDeps, env string) http.Handler {
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) {
		overlap, err := overlapBody(w, r, manage.DefaultWebhookOverlap, "a rotation has only overlap", manage.SecretOverlapAtZero)
		if err != nil {
			writeError(w, r, err)
			return
		}
		e, err := d.store.RotateWebhookSecret(r.Context(), id, webhook.NewSecret(), overlap, recordOf(w).admin.Actor(), env)
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, r, http.StatusOK, createdEndpoint{e.Listed(d.now()), e.Secret})
	})
}

func handleAdminEnableWebhook(d adminDeps, env string) http.Handler {
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) {
		e, err := d.store.EnableWebhookEndpoint(r.Context(), id, recordOf(w).admin.Actor(), env)
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, r, http.StatusOK, e.Listed(d.now()))
	})
}

// queuedEvent answers a test: the event's id, which every attempt carries
// as webhook-id.
type queuedEvent struct {
	EventID string `json:"eventId"`
}

func handleAdminTestWebhook(d adminDeps) http.Handler {
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) {
		ev, err := manage.QueueTest(r.Context(), d.store, id, recordOf(w).admin.Actor(), d.now())
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, r, http.StatusAccepted, queuedEvent{ev.ID})
	})
}

func handleAdminWebhookDeliveries(d adminDeps) http.Handler {
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) {
		f := domain.DeliveryFilter{EndpointID: id}
		v := r.URL.Query()
		var err error
		if f.Limit, err = pageLimit(v); err != nil {
			writeError(w, r, err)
			return
		}
		switch v.Get("failed") {
		case "", "false":
		case "true":
			f.Failed = true
		default:
			writeError(w, r, domain.Invalid("failed must be true or false"))
			return
		}
		if _, err := findEndpoint(r, d, id); err != nil {
			writeError(w, r, err)
			return
		}
		deliveries, err := d.store.WebhookDeliveries(r.Context(), f)
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, r, http.StatusOK, manage.Listed(deliveries, domain.WebhookDelivery.Listed))
	})
}

// findEndpoint is endpoint id; an unknown id is not_found.
func findEndpoint(r *http.Request, d adminDeps, id int64) (domain.WebhookEndpoint, error) {
	endpoints, err := d.store.WebhookEndpoints(r.Context())
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

func handleAdminResendWebhook(d adminDeps) http.Handler {
	fields := []string{"eventId", "failed"}
	return withPathID("a webhook endpoint", func(w http.ResponseWriter, r *http.Request, id int64) {
		body, err := decodeObject(w, r, fields, "a resend has only eventId or failed")
		if err != nil {
			writeError(w, r, err)
			return
		}
		f := domain.DeliveryFilter{EndpointID: id}
		if err := jsonBody(body).str("eventId", &f.EventID); err != nil {
			writeError(w, r, err)
			return
		}
		if raw, ok := body["failed"]; ok && json.Unmarshal(raw, &f.Failed) != nil {
			writeError(w, r, domain.Invalid("failed must be true or false"))
			return
		}
		if (f.EventID == "") == !f.Failed {
			writeError(w, r, domain.Invalid("give eventId (msg_...) or \"failed\": true, one of them"))
			return
		}
		if _, err := findEndpoint(r, d, id); err != nil {
			writeError(w, r, err)
			return
		}
		n, err := d.store.ResendWebhookDeliveries(r.Context(), f, d.now())
		if err != nil {
			writeError(w, r, err)
			return
		}
		if n == 0 && f.EventID != "" {
			writeError(w, r, domain.NotFound("endpoint %d has no delivery of event %s", id, f.EventID))
			return
		}
		writeJSON(w, r, http.StatusOK, resent{n})
	})
}
