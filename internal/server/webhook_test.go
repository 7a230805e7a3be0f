package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/limits"
	"petstore/internal/manage"
	"petstore/internal/testkit"
	"petstore/internal/webhook"
)

// webhookServer is a test server whose webhooks may go to the test's
// receivers on loopback.
func webhookServer(t *testing.T, opts testOptions) *testServer {
	t.Helper()
	opts.webhookAllowPrivate = true
	return newTestServerWith(t, opts)
}

// addEndpoint adds an endpoint for rc taking events (none: all), and has
// rc trust its secret.
func (s *testServer) addEndpoint(rc *testkit.Receiver, events ...string) domain.WebhookEndpoint {
	s.t.Helper()
	terms, err := manage.NewEndpointTerms(rc.URL(), events)
	if err != nil {
		s.t.Fatal(err)
	}
	e, err := s.store.AddWebhookEndpoint(context.Background(), terms, testActor, s.opts.env)
	if err != nil {
		s.t.Fatal(err)
	}
	rc.Trust(e.Secret)
	return e
}

// deliverDue makes the attempts that are due now, as the worker's next
// rounds do, and waits for them.
func (s *testServer) deliverDue() {
	for {
		var attempts sync.WaitGroup
		n := s.webhooks.Dispatch(context.Background(), &attempts)
		attempts.Wait()
		if n == 0 {
			return
		}
	}
}

// deliveryOf is the one delivery of event id.
func (s *testServer) deliveryOf(eventID string) domain.WebhookDelivery {
	s.t.Helper()
	ds, err := s.store.WebhookDeliveries(context.Background(), domain.DeliveryFilter{EventID: eventID})
	if err != nil || len(ds) != 1 {
		s.t.Fatalf("deliveries of %s: %+v, %v", eventID, ds, err)
	}
	return ds[0]
}

func TestWebhookKeyEventsAreSentSignedWithTheirAuditEvents(t *testing.T) {
	eachStore(t, func(t *testing.T, opts testOptions) {
		s := webhookServer(t, opts)
		rc := testkit.NewReceiver(t)
		only := testkit.NewReceiver(t)
		s.addEndpoint(rc)
		s.addEndpoint(only, "key.revoked")

		k, token := s.mustCreate(s.keyTerms("pro"))
		_, rolled, rolledToken := s.roll(k.ID, time.Hour)
		if _, err := s.store.RevokeKey(context.Background(), rolled.ID, testActor); err != nil {
			t.Fatal(err)
		}
		// A key's ban is sent; a client address's is not.
		_, banned := s.mustCreate(s.keyTerms("enterprise", domain.Limits{PerMinute: 1, PerDay: 100}))
		s.banOf(banned, 20)
		s.banOf("", 200)
		s.flushAudit()
		if n := len(s.banEvents()); n != 2 {
			t.Fatalf("%d bans audited, want 2", n)
		}
		s.deliverDue()

		got := rc.Wait(5, 5*time.Second)
		var types []string
		for _, d := range got {
			if !d.Verified {
				t.Errorf("delivery %s failed the receiver's Standard Webhooks check: %+v", d.ID, d)
			}
			types = append(types, d.Event.Type)
			if d.Event.Data["keyName"] != "test" || d.Event.Data["keyId"] == nil {
				t.Errorf("%s data %v, want keyId and keyName", d.Event.Type, d.Event.Data)
			}
			for _, secret := range []string{token, rolledToken, banned, "hash", "psk_", "192.0.2", "address"} {
				if strings.Contains(d.Body, secret) {
					t.Errorf("%s holds %q: %s", d.Event.Type, secret, d.Body)
				}
			}
		}
		slices.Sort(types)
		if want := []string{"key.banned", "key.created", "key.created", "key.revoked", "key.rolled"}; !slices.Equal(types, want) {
			t.Errorf("events %v, want %v", types, want)
		}
		if o := only.Wait(1, 5*time.Second); len(o) != 1 || o[0].Event.Type != "key.revoked" || !o[0].Verified {
			t.Errorf("the endpoint of key.revoked alone got %+v", o)
		}
	})
}

// A key's ban lifted over the admin API is sent as ban.lifted, naming the
// key; a client address banned and lifted is audited twice and sent never.
func TestWebhookALiftedKeyBanIsSentAndAnAddressBanIsNot(t *testing.T) {
	eachStore(t, func(t *testing.T, opts testOptions) {
		s := webhookServer(t, opts)
		rc := testkit.NewReceiver(t)
		s.addEndpoint(rc, "key.banned", "ban.lifted")
		admin := s.mustCreateAdmin("portal", domain.AllAdminScopes)
		k, key := s.mustCreate(s.keyTerms("enterprise", banTerms))
		s.banOf(key, 20)
		s.banOf("", 200) // the address of httptest's requests
		s.flushAudit()
		for _, subject := range []string{fmt.Sprintf("key:%d", k.ID), "address:192.0.2.1"} {
			if w := s.admin("DELETE", "/admin/v1/bans/"+subject, admin, ""); w.Code != 204 {
				t.Fatalf("DELETE /admin/v1/bans/%s: %d %s, want 204", subject, w.Code, w.Body)
			}
		}
		if n := len(s.banEvents()); n != 2 {
			t.Errorf("%d bans audited, want the key's and the address's", n)
		}
		if lifts, _ := s.store.AuditEvents(context.Background(), domain.AuditFilter{Action: domain.AuditBanLifted}); len(lifts) != 2 {
			t.Errorf("%d lifts audited, want the key's and the address's", len(lifts))
		}
		s.deliverDue()

		got := rc.Wait(2, 5*time.Second)
		if len(got) != 2 {
			t.Fatalf("deliveries %+v, want key.banned and ban.lifted of the key alone", got)
		}
		byType := make(map[string]testkit.Delivery)
		for _, d := range got {
			byType[d.Event.Type] = d
		}
		for _, want := range []string{"key.banned", "ban.lifted"} {
			d, ok := byType[want]
			if !ok || !d.Verified {
				t.Errorf("%s: %+v, want one delivery, verified", want, d)
				continue
			}
			if d.Event.Data["keyId"] != float64(k.ID) || d.Event.Data["keyName"] != "test" {
				t.Errorf("%s data %v, want keyId %d and keyName test", d.Event.Type, d.Event.Data, k.ID)
			}
			for _, secret := range []string{key, "192.0.2", "address"} {
				if strings.Contains(d.Body, secret) {
					t.Errorf("%s holds %q: %s", d.Event.Type, secret, d.Body)
				}
			}
		}
		if d := byType["ban.lifted"]; d.Event.Data["actor"] != "admin:portal" {
			t.Errorf("ban.lifted data %v, want actor admin:portal", d.Event.Data)
		}
	})
}

func TestWebhookAFailedAttemptIsRetriedWithTheSameID(t *testing.T) {
	eachStore(t, func(t *testing.T, opts testOptions) {
		s := webhookServer(t, opts)
		rc := testkit.NewReceiver(t)
		rc.AnswerWith(func(n int, _ testkit.Delivery) int {
			if n == 0 {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		})
		e := s.addEndpoint(rc)
		ev, err := manage.QueueTest(context.Background(), s.store, s.env, e.ID, testActor, s.clock.now())
		if err != nil {
			t.Fatal(err)
		}
		s.deliverDue()
		rc.Wait(1, 5*time.Second)
		d := s.deliveryOf(ev.ID)
		if d.State != domain.DeliveryPending || d.Attempts != 1 || d.LastStatus != 503 {
			t.Fatalf("after a 503: %+v", d)
		}
		if wait := d.NextAt.Sub(s.clock.now()); wait < 4500*time.Millisecond || wait > 5500*time.Millisecond {
			t.Fatalf("retry due in %s, want 5 s ±10%%", wait)
		}
		s.deliverDue() // not due yet
		s.clock.advance(6 * time.Second)
		s.deliverDue()
		got := rc.Wait(2, 5*time.Second)
		if len(got) != 2 || got[0].ID != ev.ID || got[1].ID != ev.ID || !got[1].Verified {
			t.Fatalf("deliveries %+v, want two of %s", got, ev.ID)
		}
		if got[0].Timestamp == 0 || got[0].Signatures[0] == "" {
			t.Fatalf("first attempt %+v", got[0])
		}
		if d := s.deliveryOf(ev.ID); d.State != domain.DeliveryDelivered || d.Attempts != 2 || d.LastStatus != 200 {
			t.Fatalf("after a 200: %+v", d)
		}
	})
}

func TestWebhookDeliveryFailsAfterTheScheduleAndGoneDisables(t *testing.T) {
	eachStore(t, func(t *testing.T, opts testOptions) {
		opts.env = "staging"
		s := webhookServer(t, opts)
		failing := testkit.NewReceiver(t)
		failing.AnswerWith(func(int, testkit.Delivery) int { return http.StatusInternalServerError })
		e := s.addEndpoint(failing)
		ev, err := manage.QueueTest(context.Background(), s.store, s.env, e.ID, testActor, s.clock.now())
		if err != nil {
			t.Fatal(err)
		}
		for i := range len(webhook.RetryDelays) + 1 {
			s.deliverDue()
			failing.Wait(i+1, 5*time.Second)
			if d := s.deliveryOf(ev.ID); d.State == domain.DeliveryPending {
				s.clock.advance(d.NextAt.Sub(s.clock.now()))
			}
		}
		d := s.deliveryOf(ev.ID)
		if d.State != domain.DeliveryFailed || d.Attempts != len(webhook.RetryDelays)+1 {
			t.Fatalf("after the schedule: %+v", d)
		}
		failed, err := s.store.WebhookDeliveries(context.Background(), domain.DeliveryFilter{Failed: true})
		if err != nil || len(failed) != 1 {
			t.Fatalf("failed deliveries %+v, %v", failed, err)
		}
		// Resent, it keeps its id.
		if n, err := s.store.ResendWebhookDeliveries(context.Background(), domain.DeliveryFilter{Failed: true}, s.clock.now()); n != 1 || err != nil {
			t.Fatalf("resend: %d, %v", n, err)
		}
		failing.AnswerWith(nil)
		s.deliverDue()
		if got := failing.Wait(len(webhook.RetryDelays)+2, 5*time.Second); got[len(got)-1].ID != ev.ID {
			t.Fatalf("resent as %s, want %s", got[len(got)-1].ID, ev.ID)
		}

		gone := testkit.NewReceiver(t)
		gone.AnswerWith(func(int, testkit.Delivery) int { return http.StatusGone })
		g := s.addEndpoint(gone)
		s.mustCreate(s.keyTerms("free"))
		s.deliverDue()
		gone.Wait(1, 5*time.Second)
		if ep := s.endpoint(g.ID); ep.Enabled {
			t.Fatalf("after a 410 the endpoint is %+v, want disabled", ep)
		}
		events, err := s.store.AuditEvents(context.Background(), domain.AuditFilter{Action: domain.AuditWebhookDisabled})
		if err != nil || len(events) != 1 || events[0].Details.WebhookID != g.ID || events[0].Actor != domain.ServerActor || events[0].Env != "staging" {
			t.Fatalf("webhook.disabled events %+v, %v", events, err)
		}
		s.mustCreate(s.keyTerms("free"))
		s.deliverDue()
		if n := len(gone.Deliveries()); n != 1 {
			t.Fatalf("a disabled endpoint got %d deliveries", n)
		}
		if _, err := s.store.EnableWebhookEndpoint(context.Background(), g.ID, testActor, s.opts.env); err != nil {
			t.Fatal(err)
		}
		if !s.endpoint(g.ID).Enabled {
			t.Fatal("enable left it disabled")
		}
	})
}

func TestWebhookEndpointFailingForThreeDaysIsDisabled(t *testing.T) {
	s := webhookServer(t, testOptions{})
	rc := testkit.NewReceiver(t)
	rc.AnswerWith(func(int, testkit.Delivery) int { return http.StatusBadGateway })
	e := s.addEndpoint(rc)
	for day := range 4 {
		if _, err := manage.QueueTest(context.Background(), s.store, s.env, e.ID, testActor, s.clock.now()); err != nil {
			t.Fatal(err)
		}
		s.deliverDue()
		rc.Wait(day+1, 5*time.Second)
		if enabled := s.endpoint(e.ID).Enabled; enabled != (day < 3) {
			t.Fatalf("after failing for %d days: enabled %v", day, enabled)
		}
		s.clock.advance(24 * time.Hour)
	}
}

func (s *testServer) endpoint(id int64) domain.WebhookEndpoint {
	s.t.Helper()
	endpoints, err := s.store.WebhookEndpoints(context.Background(), s.env)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, e := range endpoints {
		if e.ID == id {
			return e
		}
	}
	s.t.Fatalf("no endpoint %d", id)
	return domain.WebhookEndpoint{}
}

func TestWebhookRotationSignsWithBothSecretsDuringTheOverlap(t *testing.T) {
	eachStore(t, func(t *testing.T, opts testOptions) {
		s := webhookServer(t, opts)
		rc := testkit.NewReceiver(t)
		e := s.addEndpoint(rc)
		rotated, err := s.store.RotateWebhookSecret(context.Background(), e.ID, webhook.NewSecret(), time.Hour, testActor, s.opts.env)
		if err != nil {
			t.Fatal(err)
		}
		test := func(n int, trusted string) testkit.Delivery {
			t.Helper()
			rc.Trust(trusted)
			if _, err := manage.QueueTest(context.Background(), s.store, s.env, e.ID, testActor, s.clock.now()); err != nil {
				t.Fatal(err)
			}
			s.deliverDue()
			return rc.Wait(n, 5*time.Second)[n-1]
		}
		if d := test(1, e.Secret); !d.Verified || len(d.Signatures) != 2 {
			t.Errorf("during the overlap, a receiver with the old secret: %+v", d)
		}
		if d := test(2, rotated.Secret); !d.Verified || len(d.Signatures) != 2 {
			t.Errorf("during the overlap, a receiver with the new secret: %+v", d)
		}
		s.clock.advance(2 * time.Hour)
		if d := test(3, e.Secret); d.Verified || len(d.Signatures) != 1 {
			t.Errorf("after the overlap the old secret still signs: %+v", d)
		}
		if d := test(4, rotated.Secret); !d.Verified {
			t.Errorf("after the overlap, the new secret: %+v", d)
		}
		events, _ := s.store.AuditEvents(context.Background(), domain.AuditFilter{Action: domain.AuditWebhookRotated})
		for _, ev := range events {
			b, _ := json.Marshal(ev)
			if strings.Contains(string(b), strings.TrimPrefix(rotated.Secret, "whsec_")) || strings.Contains(string(b), "whsec_") {
				t.Errorf("the audit event holds the secret: %s", b)
			}
		}
		if len(events) != 1 {
			t.Errorf("webhook.rotated events: %d", len(events))
		}
	})
}

func TestWebhookExpiryNoticesUnderAFakeClock(t *testing.T) {
	s := webhookServer(t, testOptions{})
	rc := testkit.NewReceiver(t)
	s.addEndpoint(rc, domain.WebhookKeyExpiring, domain.WebhookKeyExpired)
	terms := s.keyTerms("pro")
	terms.ExpiresAt = s.clock.now().Add(10 * 24 * time.Hour)
	k, _ := s.mustCreate(terms)
	short := s.keyTerms("free")
	short.ExpiresAt = s.clock.now().Add(3 * 24 * time.Hour) // made after its 7-day mark
	s.mustCreate(short)
	old := s.keyTerms("free")
	old.ExpiresAt = s.clock.now().Add(30 * 24 * time.Hour)
	o, _ := s.mustCreate(old)
	s.roll(o.ID, time.Hour) // the old key ends in an hour: key.rolled said so

	notice := func() []string {
		t.Helper()
		s.webhooks.NoticeExpiries(context.Background())
		s.webhooks.NoticeExpiries(context.Background()) // a second server, or a second look, adds nothing
		s.deliverDue()
		var got []string
		for _, d := range rc.Deliveries() {
			got = append(got, d.Event.Type+" "+testkit.JSONString(d.Event.Data["keyId"])+" "+testkit.JSONString(d.Event.Data["daysBefore"]))
		}
		return got
	}
	id := testkit.JSONString(float64(k.ID))
	steps := []struct {
		advance time.Duration
		added   []string // the notices this step adds
	}{
		{0, nil},
		{2*24*time.Hour + time.Hour, []string{"key.expiring 2 1"}}, // the short key, a day before its end
		{24 * time.Hour, []string{"key.expired 2 <nil>", "key.expiring " + id + " 7"}},
		{24 * time.Hour, nil},
		{5 * 24 * time.Hour, []string{"key.expiring " + id + " 1"}},
		{24 * time.Hour, []string{"key.expired " + id + " <nil>"}},
		{24 * time.Hour, nil},
	}
	var want []string
	for i, step := range steps {
		s.clock.advance(step.advance)
		want = append(want, step.added...)
		slices.Sort(want)
		got := notice()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("step %d (%s): %q, want %q", i, s.clock.now().Format(time.RFC3339), got, want)
		}
	}
	if k.ID != 1 {
		t.Fatalf("the long key is %d; the steps name the short one 2", k.ID)
	}
}

func TestWebhookQuotaThresholdsAreSentOncePerDayAcrossServers(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts testOptions
	}{
		{"sqlite, in process", testOptions{}},
		{"postgres and redis, two servers", testOptions{postgres: true, redis: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := webhookServer(t, tc.opts)
			servers := []*testServer{s}
			if tc.opts.postgres {
				servers = append(servers, s.anotherServer())
			}
			rc := testkit.NewReceiver(t)
			s.addEndpoint(rc, domain.WebhookQuotaThreshold)
			k, key := s.mustCreate(s.keyTerms("enterprise", domain.Limits{PerMinute: 1000, PerDay: 10}))
			settle := func() {
				for _, srv := range servers {
					if err := srv.quota.Flush(context.Background(), srv.store.AddWebhookNotices); err != nil {
						t.Fatal(err)
					}
				}
				for _, srv := range servers {
					srv.deliverDue()
				}
			}
			for i := range 14 {
				w := servers[i%len(servers)].do("GET", "/v1/pets", key, "")
				if want := map[bool]int{true: 200, false: 429}[i < 10]; w.Code != want {
					t.Fatalf("request %d: %d, want %d", i+1, w.Code, want)
				}
				if i%3 == 2 {
					settle()
				}
			}
			settle()
			rc.Wait(2, 5*time.Second)
			time.Sleep(100 * time.Millisecond)
			settle()
			got := rc.Deliveries()
			if len(got) != 2 {
				t.Fatalf("%d quota events, want 2 (80%% and 100%%): %+v", len(got), got)
			}
			thresholds := map[float64]map[string]any{}
			for _, d := range got {
				if !d.Verified || d.Event.Type != domain.WebhookQuotaThreshold {
					t.Fatalf("delivery %+v", d)
				}
				thresholds[d.Event.Data["threshold"].(float64)] = d.Event.Data
			}
			for threshold, used := range map[float64]float64{80: 8, 100: 10} {
				data := thresholds[threshold]
				if data == nil || data["limit"] != float64(10) || data["keyId"] != float64(k.ID) || data["keyName"] != "test" ||
					data["plan"] != "enterprise" || data["day"] != "2026-03-10" || data["used"].(float64) < used {
					t.Errorf("threshold %v: %v", threshold, data)
				}
			}

			// A new UTC day is a new quota, and new notices. (The servers
			// share the test's clock.)
			s.clock.advance(24 * time.Hour)
			for i := range 8 {
				servers[i%len(servers)].do("GET", "/v1/pets", key, "")
			}
			settle()
			if got := rc.Wait(3, 5*time.Second); got[2].Event.Data["day"] != "2026-03-11" || got[2].Event.Data["threshold"] != float64(80) {
				t.Errorf("the next day: %+v", got[2].Event)
			}
		})
	}
}

func TestWebhookMetricsCountAttemptsAndTheBacklog(t *testing.T) {
	eachStore(t, func(t *testing.T, opts testOptions) {
		m := newMetrics()
		opts.metrics = m
		s := webhookServer(t, opts)
		rc := testkit.NewReceiver(t)
		rc.AnswerWith(func(n int, _ testkit.Delivery) int { return map[bool]int{true: 500, false: 200}[n == 0] })
		e := s.addEndpoint(rc)
		gauge := func(name string) float64 {
			t.Helper()
			f := testkit.Scrape(t, m.Handler())[name]
			if f == nil || len(f.GetMetric()) != 1 {
				t.Fatalf("%s: %v", name, f)
			}
			return f.GetMetric()[0].GetGauge().GetValue()
		}
		for range 2 {
			if _, err := manage.QueueTest(context.Background(), s.store, s.env, e.ID, testActor, s.clock.now()); err != nil {
				t.Fatal(err)
			}
		}
		s.clock.advance(90 * time.Second)
		if w, age := gauge("petstore_webhook_events_waiting"), gauge("petstore_webhook_oldest_waiting_seconds"); w != 2 || age != 90 {
			t.Fatalf("waiting %v, oldest %v s; want 2 and 90", w, age)
		}
		s.deliverDue()
		rc.Wait(2, 5*time.Second)
		want := map[string]float64{"delivered": 1, "retried": 1, "failed": 0}
		if got := testkit.CounterValues(t, testkit.Scrape(t, m.Handler()), "petstore_webhook_deliveries_total", "outcome"); !maps.Equal(got, want) {
			t.Errorf("deliveries %v, want %v", got, want)
		}
		if w := gauge("petstore_webhook_events_waiting"); w != 1 {
			t.Errorf("waiting %v after one delivered, want 1", w)
		}
	})
}

// TestQuotaWatchCostsARequestNothing: the request path's look at the day
// count allocates nothing, below 80% and once a threshold is noticed.
func TestQuotaWatchCostsARequestNothing(t *testing.T) {
	clock := newFakeClock()
	q := limits.NewQuotaWatch(clock.now)
	key := &domain.Key{ID: 1, BudgetID: 1, Name: "test", Plan: "free"}
	lim := domain.Limits{PerMinute: 60, PerDay: 1000}
	if n := testing.AllocsPerRun(100, func() { q.Observe(key, lim, limits.Decision{DayCount: 500}) }); n != 0 {
		t.Errorf("below 80%%: %v allocations a request", n)
	}
	q.Observe(key, lim, limits.Decision{DayCount: 1000})
	if n := testing.AllocsPerRun(100, func() { q.Observe(key, lim, limits.Decision{DayCount: 1000}) }); n != 0 {
		t.Errorf("at 100%%, noticed already: %v allocations a request", n)
	}
	if len(q.Pending) != 2 || q.Pending[0].Threshold != 80 || q.Pending[1].Threshold != 100 {
		t.Errorf("pending %+v, want 80 and 100 once each", q.Pending)
	}
}

// TestWebhooksAreCopiedToPostgreSQL: petstore copy carries the endpoints,
// with their secrets, and the deliveries still waiting, which a server on
// PostgreSQL then makes with the same webhook-id.
func TestWebhooksAreCopiedToPostgreSQL(t *testing.T) {
	src := newTestServerWith(t, testOptions{webhookAllowPrivate: true})
	rc := testkit.NewReceiver(t)
	e := src.addEndpoint(rc)
	ev, err := manage.QueueTest(context.Background(), src.store, src.env, e.ID, testActor, src.clock.now())
	if err != nil {
		t.Fatal(err)
	}
	src.store.Close()

	to := testkit.PostgresURL(t)
	if res := viaCLI(t, nil, "copy", "--from", src.dbPath, "--to", to); res.code != 0 {
		t.Fatalf("copy: exit status %d: %s", res.code, res.stderr)
	}
	dst := newTestServerWith(t, testOptions{webhookAllowPrivate: true, postgres: true, db: to, redis: true})
	dst.clock.t = src.clock.now()
	dst.deliverDue()
	if got := rc.Wait(1, 5*time.Second); got[0].ID != ev.ID || !got[0].Verified {
		t.Fatalf("after the copy: %+v", got)
	}
	// The endpoint's id is never given again.
	next := dst.addEndpoint(testkit.NewReceiver(t))
	if next.ID <= e.ID {
		t.Errorf("a new endpoint after the copy has id %d, the copied one %d", next.ID, e.ID)
	}
}
