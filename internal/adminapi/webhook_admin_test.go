package adminapi_test

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"petstore/internal/adminapi"
	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/servertest"
	"petstore/internal/testkit"
)

// TestAdminWebhooks: the webhook routes of the admin API do what the
// commands do, with the same objects, the secret only in a create's and a
// rotation's answer, and bad input refused naming the field with nothing
// written.
func TestAdminWebhooks(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts.WithWebhooks())
		token := s.MustCreateAdmin("portal", domain.ScopeWebhooks)
		rc := testkit.NewReceiver(t)

		for _, tc := range []struct{ body, says string }{
			{`{"url":"ftp://hooks.example.com/"}`, "url"},
			{`{}`, "url"},
			{`{"url":"` + rc.URL() + `","events":["pet.sold"]}`, "events"},
			{`{"url":"` + rc.URL() + `","events":"key.created"}`, "events"},
			{`{"url":"` + rc.URL() + `","events":[""]}`, "events"},
			{`{"url":"` + rc.URL() + `","events":["key.created",""]}`, "events"},
			{`{"url":"` + rc.URL() + `","events":["key.created,"]}`, "events"},
			{`{"url":"` + rc.URL() + `","secret":"whsec_x"}`, "secret"},
		} {
			servertest.WantError(t, s.Admin("POST", "/admin/v1/webhooks", token, tc.body), 400, httpapi.CodeInvalidRequest, tc.says)
		}
		var listed []domain.ListedEndpoint
		testkit.DecodeJSON(t, s.Admin("GET", "/admin/v1/webhooks", token, ""), &listed)
		if len(listed) != 0 {
			t.Fatalf("refused creates left %+v", listed)
		}

		w := s.Admin("POST", "/admin/v1/webhooks", token, `{"url":"`+rc.URL()+`","events":["webhook.test","key.created"]}`)
		if w.Code != http.StatusCreated {
			t.Fatalf("POST /admin/v1/webhooks: %d %s", w.Code, w.Body)
		}
		var created adminapi.CreatedEndpoint
		testkit.DecodeJSON(t, w, &created)
		path := "/admin/v1/webhooks/" + strconv.FormatInt(created.ID, 10)
		if w.Header().Get("Location") != path || !webhookSecretForm.MatchString(created.Secret) || !created.Enabled {
			t.Fatalf("created %+v, Location %q", created, w.Header().Get("Location"))
		}
		rc.Trust(created.Secret)
		w = s.Admin("GET", "/admin/v1/webhooks", token, "")
		if strings.Contains(w.Body.String(), "whsec_") {
			t.Fatalf("the list shows a secret: %s", w.Body)
		}

		w = s.Admin("POST", path+"/test", token, "")
		var queued adminapi.QueuedEvent
		testkit.DecodeJSON(t, w, &queued)
		if w.Code != http.StatusAccepted || !strings.HasPrefix(queued.EventID, "msg_") {
			t.Fatalf("test: %d %s", w.Code, w.Body)
		}
		s.DeliverDue()
		if got := rc.Wait(1, 5*time.Second); got[0].ID != queued.EventID || !got[0].Verified || got[0].Event.Type != domain.WebhookTestEvent {
			t.Fatalf("the test event: %+v", got)
		}
		var deliveries []domain.ListedDelivery
		testkit.DecodeJSON(t, s.Admin("GET", path+"/deliveries", token, ""), &deliveries)
		if len(deliveries) != 1 || deliveries[0].State != domain.DeliveryDelivered || deliveries[0].EventID != queued.EventID {
			t.Fatalf("deliveries %+v", deliveries)
		}
		servertest.WantError(t, s.Admin("GET", path+"/deliveries?limit=1&limit=2", token, ""), 400, httpapi.CodeInvalidRequest, "limit must be given at most once")
		servertest.WantError(t, s.Admin("GET", path+"/deliveries?failed=true&failed=false", token, ""), 400, httpapi.CodeInvalidRequest, "failed must be given at most once")
		servertest.WantError(t, s.Admin("POST", path+"/resend", token, `{}`), 400, httpapi.CodeInvalidRequest, "eventId")
		servertest.WantError(t, s.Admin("POST", path+"/resend", token, `{"eventId":"msg_nothing"}`), 404, httpapi.CodeNotFound, "msg_nothing")
		if w := s.Admin("POST", path+"/resend", token, `{"eventId":"`+queued.EventID+`"}`); w.Code != http.StatusOK {
			t.Fatalf("resend: %d %s", w.Code, w.Body)
		}
		s.DeliverDue()
		if got := rc.Wait(2, 5*time.Second); got[1].ID != queued.EventID {
			t.Fatalf("resent as %s", got[1].ID)
		}

		servertest.WantError(t, s.Admin("POST", path+"/rotate", token, `{"overlap":"soon"}`), 400, httpapi.CodeInvalidRequest, "overlap")
		w = s.Admin("POST", path+"/rotate", token, `{"overlap":"1h"}`)
		var rotated adminapi.CreatedEndpoint
		testkit.DecodeJSON(t, w, &rotated)
		if w.Code != http.StatusOK || !webhookSecretForm.MatchString(rotated.Secret) || rotated.Secret == created.Secret || rotated.RotationEnds == nil {
			t.Fatalf("rotate: %d %s", w.Code, w.Body)
		}
		if w := s.Admin("POST", path+"/enable", token, ""); w.Code != http.StatusOK {
			t.Fatalf("enable: %d %s", w.Code, w.Body)
		}
		if w := s.Admin("DELETE", path, token, ""); w.Code != http.StatusNoContent {
			t.Fatalf("delete: %d %s", w.Code, w.Body)
		}
		servertest.WantError(t, s.Admin("DELETE", path, token, ""), 404, httpapi.CodeNotFound)
		servertest.WantError(t, s.Admin("POST", "/admin/v1/webhooks/x/test", token, ""), 400, httpapi.CodeInvalidRequest, "id")

		events, _ := s.Store().AuditEvents(t.Context(), domain.AuditFilter{})
		var actions []string
		for _, e := range events {
			if strings.HasPrefix(e.Action, "webhook.") {
				actions = append(actions, e.Action+" "+e.Actor+" "+e.Env)
			}
		}
		want := []string{"webhook.added admin:portal production", "webhook.rotated admin:portal production", "webhook.removed admin:portal production"}
		if strings.Join(actions, ",") != strings.Join(want, ",") {
			t.Errorf("audit %q, want %q", actions, want)
		}
	})
}

// TestAdminKeyUpdateIsSentAsWebhook: a key changed in place over the admin
// API is a key.updated event, with the terms before and after, sent in the
// transaction of its audit event.
func TestAdminKeyUpdateIsSentAsWebhook(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{WebhookAllowPrivate: true})
	rc := testkit.NewReceiver(t)
	s.AddEndpoint(rc, "key.updated")
	token := s.MustCreateAdmin("portal", domain.ScopeKeysWrite)
	k, _ := s.MustCreate(s.KeyTerms("free"))
	if w := s.Admin("PATCH", "/admin/v1/keys/"+strconv.FormatInt(k.ID, 10), token, `{"plan":"pro"}`); w.Code != http.StatusOK {
		t.Fatalf("PATCH: %d %s", w.Code, w.Body)
	}
	s.DeliverDue()
	d := rc.Wait(1, 5*time.Second)[0]
	before, _ := d.Event.Data["before"].(map[string]any)
	after, _ := d.Event.Data["after"].(map[string]any)
	if !d.Verified || d.Event.Type != "key.updated" || d.Event.Data["keyId"] != float64(k.ID) || d.Event.Data["keyName"] != "test" ||
		d.Event.Data["actor"] != "admin:portal" || before["plan"] != "free" || after["plan"] != "pro" {
		t.Fatalf("key.updated: %+v", d)
	}
}

// TestAdminWebhookOnTheLocalNetworkIsRefusedWithoutTheFlag: a server
// started without --webhook-allow-private refuses, when it is added, an
// endpoint it would never send to: a literal address of this host or a
// local network, or a name that resolves there. With the flag it takes
// them.
func TestAdminWebhookOnTheLocalNetworkIsRefusedWithoutTheFlag(t *testing.T) {
	t.Parallel()
	strict := servertest.Start(t, servertest.Options{})
	token := strict.MustCreateAdmin("portal", domain.ScopeWebhooks)
	local := []string{
		"http://127.0.0.1:9000/in", "http://localhost:9000/in", "http://[::1]/in", "https://10.0.0.7/in",
		"http://169.254.169.254/latest", "http://0.0.0.0:80/", "http://[64:ff9b::7f00:1]/in", "http://[::ffff:127.0.0.1]/in",
	}
	for _, url := range local {
		w := strict.Admin("POST", "/admin/v1/webhooks", token, `{"url":"`+url+`"}`)
		servertest.WantError(t, w, 400, httpapi.CodeInvalidRequest, "url", "--webhook-allow-private")
	}
	// Other forms of 127.0.0.1, as browsers and inet_aton read them.
	disguised := []string{
		"http://127.1/in", "http://2130706433/in", "http://0x7f000001/in", "http://0177.0.0.1/in", "http://127.0.0.1./in",
		"http://[::127.0.0.1]/in", "http://[2002:7f00:1::]/in",
	}
	for _, url := range disguised {
		w := strict.Admin("POST", "/admin/v1/webhooks", token, `{"url":"`+url+`"}`)
		servertest.WantError(t, w, 400, httpapi.CodeInvalidRequest, "url", "127.0.0.1", "--webhook-allow-private")
	}
	var listed []domain.ListedEndpoint
	testkit.DecodeJSON(t, strict.Admin("GET", "/admin/v1/webhooks", token, ""), &listed)
	if len(listed) != 0 {
		t.Fatalf("refused endpoints were stored: %+v", listed)
	}
	// A public address, and a name that does not resolve now (the sender
	// checks again at each attempt), are taken.
	for _, url := range []string{"https://203.0.113.7/in", "https://hooks.example.invalid/in"} {
		if w := strict.Admin("POST", "/admin/v1/webhooks", token, `{"url":"`+url+`"}`); w.Code != http.StatusCreated {
			t.Errorf("POST %s: %d %s", url, w.Code, w.Body)
		}
	}

	allowing := servertest.Start(t, servertest.Options{WebhookAllowPrivate: true})
	token = allowing.MustCreateAdmin("portal", domain.ScopeWebhooks)
	for _, url := range local {
		if w := allowing.Admin("POST", "/admin/v1/webhooks", token, `{"url":"`+url+`"}`); w.Code != http.StatusCreated {
			t.Errorf("with --webhook-allow-private, POST %s: %d %s", url, w.Code, w.Body)
		}
	}
	// The IPv4 forms a server would look up as names are refused all the
	// same; the IPv6 ones it dials.
	for _, url := range disguised[:5] {
		servertest.WantError(t, allowing.Admin("POST", "/admin/v1/webhooks", token, `{"url":"`+url+`"}`), 400, httpapi.CodeInvalidRequest, "url", "write 127.0.0.1")
	}
}

// webhookSecretForm is a webhook secret as the admin API shows it.
var webhookSecretForm = regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{43}=$`)
