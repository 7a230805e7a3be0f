package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"petstore/internal/servertest"
	"slices"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/limits"
	"petstore/internal/manage"
	"petstore/internal/testkit"
	"petstore/internal/webhook"
)

// deliveryOf is the one delivery of event id.
func deliveryOf(s *servertest.Server, eventID string) domain.WebhookDelivery {
	s.T.Helper()
	ds, err := s.Store().WebhookDeliveries(context.Background(), domain.DeliveryFilter{EventID: eventID})
	if err != nil || len(ds) != 1 {
		s.T.Fatalf("deliveries of %s: %+v, %v", eventID, ds, err)
	}
	return ds[0]
}

func TestWebhookKeyEventsAreSentSignedWithTheirAuditEvents(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts.WithWebhooks())
		rc := testkit.NewReceiver(t)
		only := testkit.NewReceiver(t)
		s.AddEndpoint(rc)
		s.AddEndpoint(only, "key.revoked")

		k, token := s.MustCreate(s.KeyTerms("pro"))
		_, rolled, rolledToken := s.Roll(k.ID, time.Hour)
		if _, err := s.Store().RevokeKey(context.Background(), rolled.ID, servertest.Actor); err != nil {
			t.Fatal(err)
		}
		// A key's ban is sent; a client address's is not.
		_, banned := s.MustCreate(s.KeyTerms("enterprise", domain.Limits{PerMinute: 1, PerDay: 100}))
		s.BanOf(banned, 20)
		s.BanOf("", 200)
		s.FlushAudit()
		if n := len(banEvents(s)); n != 2 {
			t.Fatalf("%d bans audited, want 2", n)
		}
		s.DeliverDue()

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
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts.WithWebhooks())
		rc := testkit.NewReceiver(t)
		s.AddEndpoint(rc, "key.banned", "ban.lifted")
		admin := s.MustCreateAdmin("portal", domain.AllAdminScopes)
		k, key := s.MustCreate(s.KeyTerms("enterprise", domain.Limits{PerMinute: 1, PerDay: 100}))
		s.BanOf(key, 20)
		s.BanOf("", 200) // the address of httptest's requests
		s.FlushAudit()
		for _, subject := range []string{fmt.Sprintf("key:%d", k.ID), "address:192.0.2.1"} {
			if w := s.Admin("DELETE", "/admin/v1/bans/"+subject, admin, ""); w.Code != 204 {
				t.Fatalf("DELETE /admin/v1/bans/%s: %d %s, want 204", subject, w.Code, w.Body)
			}
		}
		if n := len(banEvents(s)); n != 2 {
			t.Errorf("%d bans audited, want the key's and the address's", n)
		}
		if lifts, _ := s.Store().AuditEvents(context.Background(), domain.AuditFilter{Action: domain.AuditBanLifted}); len(lifts) != 2 {
			t.Errorf("%d lifts audited, want the key's and the address's", len(lifts))
		}
		s.DeliverDue()

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
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts.WithWebhooks())
		rc := testkit.NewReceiver(t)
		rc.AnswerWith(func(n int, _ testkit.Delivery) int {
			if n == 0 {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		})
		e := s.AddEndpoint(rc)
		ev, err := manage.QueueTest(context.Background(), s.Store(), s.Env, e.ID, servertest.Actor, s.Clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		s.DeliverDue()
		rc.Wait(1, 5*time.Second)
		d := deliveryOf(s, ev.ID)
		if d.State != domain.DeliveryPending || d.Attempts != 1 || d.LastStatus != 503 {
			t.Fatalf("after a 503: %+v", d)
		}
		if wait := d.NextAt.Sub(s.Clock.Now()); wait < 4500*time.Millisecond || wait > 5500*time.Millisecond {
			t.Fatalf("retry due in %s, want 5 s ±10%%", wait)
		}
		s.DeliverDue() // not due yet
		s.Clock.Advance(6 * time.Second)
		s.DeliverDue()
		got := rc.Wait(2, 5*time.Second)
		if len(got) != 2 || got[0].ID != ev.ID || got[1].ID != ev.ID || !got[1].Verified {
			t.Fatalf("deliveries %+v, want two of %s", got, ev.ID)
		}
		if got[0].Timestamp == 0 || got[0].Signatures[0] == "" {
			t.Fatalf("first attempt %+v", got[0])
		}
		if d := deliveryOf(s, ev.ID); d.State != domain.DeliveryDelivered || d.Attempts != 2 || d.LastStatus != 200 {
			t.Fatalf("after a 200: %+v", d)
		}
	})
}

func TestWebhookDeliveryFailsAfterTheScheduleAndGoneDisables(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		opts.Env = "staging"
		s := servertest.Start(t, opts.WithWebhooks())
		failing := testkit.NewReceiver(t)
		failing.AnswerWith(func(int, testkit.Delivery) int { return http.StatusInternalServerError })
		e := s.AddEndpoint(failing)
		ev, err := manage.QueueTest(context.Background(), s.Store(), s.Env, e.ID, servertest.Actor, s.Clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		for i := range len(webhook.RetryDelays) + 1 {
			s.DeliverDue()
			failing.Wait(i+1, 5*time.Second)
			if d := deliveryOf(s, ev.ID); d.State == domain.DeliveryPending {
				s.Clock.Advance(d.NextAt.Sub(s.Clock.Now()))
			}
		}
		d := deliveryOf(s, ev.ID)
		if d.State != domain.DeliveryFailed || d.Attempts != len(webhook.RetryDelays)+1 {
			t.Fatalf("after the schedule: %+v", d)
		}
		failed, err := s.Store().WebhookDeliveries(context.Background(), domain.DeliveryFilter{Failed: true})
		if err != nil || len(failed) != 1 {
			t.Fatalf("failed deliveries %+v, %v", failed, err)
		}
		// Resent, it keeps its id.
		if n, err := s.Store().ResendWebhookDeliveries(context.Background(), domain.DeliveryFilter{Failed: true}, s.Clock.Now()); n != 1 || err != nil {
			t.Fatalf("resend: %d, %v", n, err)
		}
		failing.AnswerWith(nil)
		s.DeliverDue()
		if got := failing.Wait(len(webhook.RetryDelays)+2, 5*time.Second); got[len(got)-1].ID != ev.ID {
			t.Fatalf("resent as %s, want %s", got[len(got)-1].ID, ev.ID)
		}

		gone := testkit.NewReceiver(t)
		gone.AnswerWith(func(int, testkit.Delivery) int { return http.StatusGone })
		g := s.AddEndpoint(gone)
		s.MustCreate(s.KeyTerms("free"))
		s.DeliverDue()
		gone.Wait(1, 5*time.Second)
		if ep := endpoint(s, g.ID); ep.Enabled {
			t.Fatalf("after a 410 the endpoint is %+v, want disabled", ep)
		}
		events, err := s.Store().AuditEvents(context.Background(), domain.AuditFilter{Action: domain.AuditWebhookDisabled})
		if err != nil || len(events) != 1 || events[0].Details.WebhookID != g.ID || events[0].Actor != domain.ServerActor || events[0].Env != "staging" {
			t.Fatalf("webhook.disabled events %+v, %v", events, err)
		}
		s.MustCreate(s.KeyTerms("free"))
		s.DeliverDue()
		if n := len(gone.Deliveries()); n != 1 {
			t.Fatalf("a disabled endpoint got %d deliveries", n)
		}
		if _, err := s.Store().EnableWebhookEndpoint(context.Background(), g.ID, servertest.Actor, s.Env); err != nil {
			t.Fatal(err)
		}
		if !endpoint(s, g.ID).Enabled {
			t.Fatal("enable left it disabled")
		}
	})
}

func TestWebhookEndpointFailingForThreeDaysIsDisabled(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{WebhookAllowPrivate: true})
	rc := testkit.NewReceiver(t)
	rc.AnswerWith(func(int, testkit.Delivery) int { return http.StatusBadGateway })
	e := s.AddEndpoint(rc)
	for day := range 4 {
		if _, err := manage.QueueTest(context.Background(), s.Store(), s.Env, e.ID, servertest.Actor, s.Clock.Now()); err != nil {
			t.Fatal(err)
		}
		s.DeliverDue()
		rc.Wait(day+1, 5*time.Second)
		if enabled := endpoint(s, e.ID).Enabled; enabled != (day < 3) {
			t.Fatalf("after failing for %d days: enabled %v", day, enabled)
		}
		s.Clock.Advance(24 * time.Hour)
	}
}

func endpoint(s *servertest.Server, id int64) domain.WebhookEndpoint {
	s.T.Helper()
	endpoints, err := s.Store().WebhookEndpoints(context.Background(), s.Env)
	if err != nil {
		s.T.Fatal(err)
	}
	for _, e := range endpoints {
		if e.ID == id {
			return e
		}
	}
	s.T.Fatalf("no endpoint %d", id)
	return domain.WebhookEndpoint{}
}

func TestWebhookRotationSignsWithBothSecretsDuringTheOverlap(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts.WithWebhooks())
		rc := testkit.NewReceiver(t)
		e := s.AddEndpoint(rc)
		rotated, err := s.Store().RotateWebhookSecret(context.Background(), e.ID, webhook.NewSecret(), time.Hour, servertest.Actor, s.Env)
		if err != nil {
			t.Fatal(err)
		}
		test := func(n int, trusted string) testkit.Delivery {
			t.Helper()
			rc.Trust(trusted)
			if _, err := manage.QueueTest(context.Background(), s.Store(), s.Env, e.ID, servertest.Actor, s.Clock.Now()); err != nil {
				t.Fatal(err)
			}
			s.DeliverDue()
			return rc.Wait(n, 5*time.Second)[n-1]
		}
		if d := test(1, e.Secret); !d.Verified || len(d.Signatures) != 2 {
			t.Errorf("during the overlap, a receiver with the old secret: %+v", d)
		}
		if d := test(2, rotated.Secret); !d.Verified || len(d.Signatures) != 2 {
			t.Errorf("during the overlap, a receiver with the new secret: %+v", d)
		}
		s.Clock.Advance(2 * time.Hour)
		if d := test(3, e.Secret); d.Verified || len(d.Signatures) != 1 {
			t.Errorf("after the overlap the old secret still signs: %+v", d)
		}
		if d := test(4, rotated.Secret); !d.Verified {
			t.Errorf("after the overlap, the new secret: %+v", d)
		}
		events, _ := s.Store().AuditEvents(context.Background(), domain.AuditFilter{Action: domain.AuditWebhookRotated})
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
	t.Parallel()
	s := servertest.Start(t, servertest.Options{WebhookAllowPrivate: true})
	rc := testkit.NewReceiver(t)
	s.AddEndpoint(rc, domain.WebhookKeyExpiring, domain.WebhookKeyExpired)
	terms := s.KeyTerms("pro")
	terms.ExpiresAt = s.Clock.Now().Add(10 * 24 * time.Hour)
	k, _ := s.MustCreate(terms)
	short := s.KeyTerms("free")
	short.ExpiresAt = s.Clock.Now().Add(3 * 24 * time.Hour) // made after its 7-day mark
	s.MustCreate(short)
	old := s.KeyTerms("free")
	old.ExpiresAt = s.Clock.Now().Add(30 * 24 * time.Hour)
	o, _ := s.MustCreate(old)
	s.Roll(o.ID, time.Hour) // the old key ends in an hour: key.rolled said so

	notice := func() []string {
		t.Helper()
		s.Webhooks().NoticeExpiries(context.Background())
		s.Webhooks().NoticeExpiries(context.Background()) // a second server, or a second look, adds nothing
		s.DeliverDue()
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
		s.Clock.Advance(step.advance)
		want = append(want, step.added...)
		slices.Sort(want)
		got := notice()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("step %d (%s): %q, want %q", i, s.Clock.Now().Format(time.RFC3339), got, want)
		}
	}
	if k.ID != 1 {
		t.Fatalf("the long key is %d; the steps name the short one 2", k.ID)
	}
}

func TestWebhookQuotaThresholdsAreSentOncePerDayAcrossServers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts servertest.Options
	}{
		{"sqlite, in process", servertest.Options{}},
		{"postgres and redis, two servers", servertest.Options{Postgres: true, Redis: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := servertest.Start(t, tc.opts.WithWebhooks())
			servers := []*servertest.Server{s}
			if tc.opts.Postgres {
				servers = append(servers, s.AnotherServer())
			}
			rc := testkit.NewReceiver(t)
			s.AddEndpoint(rc, domain.WebhookQuotaThreshold)
			k, key := s.MustCreate(s.KeyTerms("enterprise", domain.Limits{PerMinute: 1000, PerDay: 10}))
			settle := func() {
				for _, srv := range servers {
					if err := srv.Quota().Flush(context.Background(), srv.Store().AddWebhookNotices); err != nil {
						t.Fatal(err)
					}
				}
				for _, srv := range servers {
					srv.DeliverDue()
				}
			}
			for i := range 14 {
				w := servers[i%len(servers)].Do("GET", "/v1/pets", key, "")
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
			s.Clock.Advance(24 * time.Hour)
			for i := range 8 {
				servers[i%len(servers)].Do("GET", "/v1/pets", key, "")
			}
			settle()
			if got := rc.Wait(3, 5*time.Second); got[2].Event.Data["day"] != "2026-03-11" || got[2].Event.Data["threshold"] != float64(80) {
				t.Errorf("the next day: %+v", got[2].Event)
			}
		})
	}
}

func TestWebhookMetricsCountAttemptsAndTheBacklog(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		m := servertest.NewMetrics()
		opts.Metrics = m
		s := servertest.Start(t, opts.WithWebhooks())
		rc := testkit.NewReceiver(t)
		rc.AnswerWith(func(n int, _ testkit.Delivery) int { return map[bool]int{true: 500, false: 200}[n == 0] })
		e := s.AddEndpoint(rc)
		gauge := func(name string) float64 {
			t.Helper()
			f := testkit.Scrape(t, m.Handler())[name]
			if f == nil || len(f.GetMetric()) != 1 {
				t.Fatalf("%s: %v", name, f)
			}
			return f.GetMetric()[0].GetGauge().GetValue()
		}
		for range 2 {
			if _, err := manage.QueueTest(context.Background(), s.Store(), s.Env, e.ID, servertest.Actor, s.Clock.Now()); err != nil {
				t.Fatal(err)
			}
		}
		s.Clock.Advance(90 * time.Second)
		if w, age := gauge("petstore_webhook_events_waiting"), gauge("petstore_webhook_oldest_waiting_seconds"); w != 2 || age != 90 {
			t.Fatalf("waiting %v, oldest %v s; want 2 and 90", w, age)
		}
		s.DeliverDue()
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
	clock := servertest.NewClock()
	q := limits.NewQuotaWatch(clock.Now)
	key := &domain.Key{ID: 1, BudgetID: 1, Name: "test", Plan: "free"}
	lim := domain.Limits{PerMinute: 60, PerDay: 1000}
	if n := testing.AllocsPerRun(100, func() { q.Observe(context.Background(), key, lim, limits.Decision{DayCount: 500}) }); n != 0 {
		t.Errorf("below 80%%: %v allocations a request", n)
	}
	q.Observe(context.Background(), key, lim, limits.Decision{DayCount: 1000})
	if n := testing.AllocsPerRun(100, func() { q.Observe(context.Background(), key, lim, limits.Decision{DayCount: 1000}) }); n != 0 {
		t.Errorf("at 100%%, noticed already: %v allocations a request", n)
	}
	if len(q.Pending) != 2 || q.Pending[0].Threshold != 80 || q.Pending[1].Threshold != 100 {
		t.Errorf("pending %+v, want 80 and 100 once each", q.Pending)
	}
}

// banEvents are the key.banned events of the server's database.
func banEvents(s *servertest.Server) []domain.AuditEvent {
	s.T.Helper()
	events, err := s.Store().AuditEvents(context.Background(), domain.AuditFilter{Action: domain.AuditKeyBanned})
	if err != nil {
		s.T.Fatal(err)
	}
	return events
}
