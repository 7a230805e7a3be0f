package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/servertest"
	"petstore/internal/testkit"
)

var cliWebhookSecret = regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{43}=$`)

// addWebhookCLI runs webhooks add and returns the endpoint's id and secret.
func addWebhookCLI(t *testing.T, petstore cliRunner, db, url string, args ...string) (id, secret string) {
	t.Helper()
	res := petstore(t, nil, append([]string{"webhooks", "add", "--db", db, url}, args...)...)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if res.Code != 0 || len(lines) != 2 || !cliWebhookSecret.MatchString(lines[1]) {
		t.Fatalf("webhooks add: exit status %d, stdout %q, stderr %s", res.Code, res.Stdout, res.Stderr)
	}
	if strings.Contains(res.Stderr, lines[1]) {
		t.Fatalf("the secret is on standard error too: %s", res.Stderr)
	}
	return lines[0], lines[1]
}

func TestWebhooksCommands(t *testing.T) {
	t.Parallel()
	viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
		db := filepath.Join(t.TempDir(), "petstore.db")
		id, secret := addWebhookCLI(t, petstore, db, "https://user:pw@203.0.113.10/in?token=abc", "--events", "key.created,key.expiring")

		res := petstore(t, nil, "webhooks", "list", "--db", db, "--json")
		var listed []map[string]any
		if err := json.Unmarshal([]byte(res.Stdout), &listed); err != nil || len(listed) != 1 {
			t.Fatalf("webhooks list --json: %v %s", err, res.Stdout)
		}
		if l := listed[0]; l["url"] != "https://user:pw@203.0.113.10/in?token=abc" || l["enabled"] != true || l["lastStatus"] != nil ||
			testkit.JSONString(l["events"]) != `["key.created","key.expiring"]` || testkit.JSONString(l["id"]) != id {
			t.Errorf("listed %v", l)
		}
		res = petstore(t, nil, "webhooks", "rotate", "--db", db, id, "--overlap", "1h")
		if res.Code != 0 || !cliWebhookSecret.MatchString(strings.TrimSpace(res.Stdout)) || strings.TrimSpace(res.Stdout) == secret {
			t.Fatalf("webhooks rotate: %d %q %s", res.Code, res.Stdout, res.Stderr)
		}
		res = petstore(t, nil, "webhooks", "test", "--db", db, id)
		eventID := strings.TrimSpace(res.Stdout)
		if res.Code != 0 || !strings.HasPrefix(eventID, "msg_") {
			t.Fatalf("webhooks test: %d %q %s", res.Code, res.Stdout, res.Stderr)
		}
		res = petstore(t, nil, "webhooks", "deliveries", "--db", db, "--json")
		var deliveries []domain.ListedDelivery
		if err := json.Unmarshal([]byte(res.Stdout), &deliveries); err != nil || len(deliveries) != 1 ||
			deliveries[0].EventID != eventID || deliveries[0].State != domain.DeliveryPending {
			t.Fatalf("webhooks deliveries --json: %v %s", err, res.Stdout)
		}
		if res := petstore(t, nil, "webhooks", "resend", "--db", db, eventID); res.Code != 0 {
			t.Fatalf("webhooks resend: %d %s", res.Code, res.Stderr)
		}
		if res := petstore(t, nil, "webhooks", "enable", "--db", db, id); res.Code != 0 {
			t.Fatalf("webhooks enable: %d %s", res.Code, res.Stderr)
		}
		res = petstore(t, nil, "audit", "--db", db, "--json")
		for _, secretPart := range []string{"whsec_", "pw", "token=abc", strings.TrimPrefix(secret, "whsec_")} {
			if strings.Contains(res.Stdout, secretPart) {
				t.Errorf("the audit trail holds %q: %s", secretPart, res.Stdout)
			}
		}
		var audited []auditJSONEvent
		if err := json.Unmarshal([]byte(res.Stdout), &audited); err != nil {
			t.Fatal(err)
		}
		var actions []string
		for _, e := range audited {
			actions = append(actions, e.Action+" "+e.Env)
		}
		for _, action := range []string{domain.AuditWebhookAdded, domain.AuditWebhookRotated} {
			if !slices.Contains(actions, action+" production") {
				t.Errorf("the audit trail lacks %s of env production: %q", action, actions)
			}
		}
		if res := petstore(t, nil, "webhooks", "remove", "--db", db, id); res.Code != 0 {
			t.Fatalf("webhooks remove: %d %s", res.Code, res.Stderr)
		}
		wantFailure(t, petstore(t, nil, "webhooks", "remove", "--db", db, id), 1)
	})
}

func TestWebhooksCommandsRefuseBadInputAndWriteNothing(t *testing.T) {
	t.Parallel()
	viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
		db := filepath.Join(t.TempDir(), "petstore.db")
		id, _ := addWebhookCLI(t, petstore, db, "https://203.0.113.10/in")
		for _, tc := range []struct {
			args []string
			says string
		}{
			{[]string{"webhooks", "add", "--db", db, "ftp://203.0.113.10/"}, "url"},
			{[]string{"webhooks", "add", "--db", db, "203.0.113.10/in"}, "url"},
			{[]string{"webhooks", "add", "--db", db, "https://203.0.113.10/", "--events", "key.created,pet.sold"}, "events"},
			{[]string{"webhooks", "add", "--db", db, "https://203.0.113.10/", "--events", ""}, "events"},
			{[]string{"webhooks", "add", "--db", db}, "URL"},
			{[]string{"webhooks", "rotate", "--db", db, id, "--overlap", "soon"}, "--overlap"},
			{[]string{"webhooks", "rotate", "--db", db, id, "--overlap", "-1h"}, "--overlap"},
			{[]string{"webhooks", "rotate", "--db", db, "first"}, "ID"},
			{[]string{"webhooks", "resend", "--db", db}, "EVENT_ID"},
			{[]string{"webhooks", "resend", "--db", db, "12"}, "EVENT_ID"},
			{[]string{"webhooks", "deliveries", "--db", db, "--endpoint", "0"}, "--endpoint"},
			{[]string{"webhooks", "fire", "--db", db}, "fire"},
		} {
			res := petstore(t, nil, tc.args...)
			wantFailure(t, res, 2)
			if !strings.Contains(res.Stderr, tc.says) {
				t.Errorf("%q: %s, want it to name %s", tc.args, res.Stderr, tc.says)
			}
		}
		res := petstore(t, nil, "webhooks", "list", "--db", db, "--json")
		var listed []domain.ListedEndpoint
		if err := json.Unmarshal([]byte(res.Stdout), &listed); err != nil || len(listed) != 1 || listed[0].RotationEnds != nil {
			t.Errorf("after the refusals: %v %s", err, res.Stdout)
		}
		if res := petstore(t, nil, "audit", "--db", db, "--action", domain.AuditWebhookRotated, "--json"); strings.TrimSpace(res.Stdout) != "[]" {
			t.Errorf("a refused rotation left %s", res.Stdout)
		}
	})
}

// TestWebhooksSurviveKill9: events queued while no server runs, and one
// whose attempts failed when its server was killed with SIGKILL, are
// delivered by the next server, to a receiver that checks their
// signatures.
func TestWebhooksSurviveKill9(t *testing.T) {
	t.Parallel()
	servertest.EachStoreInDir(t, func(t *testing.T, dir, db string) {
		t.Parallel() // each store's servers wait out the same Retry-After
		rc := testkit.NewReceiver(t)
		rc.AnswerWith(func(int, testkit.Delivery) int { return http.StatusServiceUnavailable })
		rc.RetryAfter = "5" // the retries wait past the kill
		_, secret := addWebhookCLI(t, viaBinary, db, rc.URL())
		rc.Trust(secret)
		// Queued while no server runs.
		mustCreateKeyCLI(t, viaBinary, "--db", db, "--plan", "free", "--name", "first")
		mustCreateKeyCLI(t, viaBinary, "--db", db, "--plan", "free", "--name", "second")

		s := startPetstore(t, dir, "serve", "--db", db, "--webhook-allow-private")
		testkit.Eventually(t, 10*time.Second, "an attempt of each event recorded", func() bool {
			var deliveries []domain.ListedDelivery
			json.Unmarshal([]byte(petstoreCmd(t, "webhooks", "deliveries", "--db", db, "--json").Stdout), &deliveries)
			return len(deliveries) == 2 && deliveries[0].Attempts > 0 && deliveries[1].Attempts > 0
		})
		s.Kill9()

		rc.AnswerWith(nil)
		if n := len(rc.Deliveries()); n != 2 {
			t.Fatalf("%d attempts before the kill, want 2 (one an event)", n)
		}
		before := len(rc.Deliveries())
		again := startPetstore(t, dir, "serve", "--db", db, "--webhook-allow-private")
		defer func() {
			if t.Failed() {
				t.Logf("deliveries:\n%s\nlog:\n%s", petstoreCmd(t, "webhooks", "deliveries", "--db", db).Stdout, again.Stderr)
			}
		}()
		var got []testkit.Delivery
		testkit.Eventually(t, 20*time.Second, "both key.created delivered after the restart", func() bool {
			got = rc.Deliveries()[before:]
			names := map[any]bool{}
			for _, d := range got {
				if d.Verified {
					names[d.Event.Data["keyName"]] = true
				}
			}
			return names["first"] && names["second"]
		})
		ids := map[string]bool{}
		for _, d := range rc.Deliveries() {
			ids[d.ID] = true
		}
		if len(ids) != 2 {
			t.Errorf("%d webhook-ids over every attempt, want 2 (one an event, kept over retries)", len(ids))
		}
	})
}

// TestWebhooksAddWarnsOfTheLocalNetwork: webhooks add cannot know how the
// servers run, so it adds an endpoint on loopback or a private network but
// warns that a server sends there only with --webhook-allow-private; a host
// no server reaches (an address in another form) it refuses.
func TestWebhooksAddWarnsOfTheLocalNetwork(t *testing.T) {
	t.Parallel()
	viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
		db := filepath.Join(t.TempDir(), "petstore.db")
		for _, tc := range []struct {
			url  string
			warn bool
		}{
			{"http://localhost:9000/in", true},
			{"http://192.168.1.20/in", true},
			{"https://203.0.113.7/in", false},
		} {
			res := petstore(t, nil, "webhooks", "add", "--db", db, tc.url)
			if res.Code != 0 {
				t.Fatalf("webhooks add %s: exit status %d: %s", tc.url, res.Code, res.Stderr)
			}
			if warned := strings.Contains(res.Stderr, "warning:") && strings.Contains(res.Stderr, "--webhook-allow-private"); warned != tc.warn {
				t.Errorf("webhooks add %s: warned %v, want %v: %s", tc.url, warned, tc.warn, res.Stderr)
			}
		}
		res := petstore(t, nil, "webhooks", "list", "--db", db, "--json")
		var listed []domain.ListedEndpoint
		if err := json.Unmarshal([]byte(res.Stdout), &listed); err != nil || len(listed) != 3 {
			t.Errorf("after the adds: %v %s", err, res.Stdout)
		}
		// A host no server reaches whatever its flags is refused, as the
		// admin API refuses it, and nothing is added.
		for _, url := range []string{"http://0x7f000001/in", "http://2130706433/in", "http://1.2.3.256/in"} {
			res := petstore(t, nil, "webhooks", "add", "--db", db, url)
			if res.Code != 2 || !strings.Contains(res.Stderr, "url's host") {
				t.Errorf("webhooks add %s: exit status %d, want 2 naming the url's host: %s", url, res.Code, res.Stderr)
			}
		}
		res = petstore(t, nil, "webhooks", "list", "--db", db, "--json")
		if err := json.Unmarshal([]byte(res.Stdout), &listed); err != nil || len(listed) != 3 {
			t.Errorf("after the refused adds: %v %s", err, res.Stdout)
		}
	})
}
