package server

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"petstore/internal/adminapi"
	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/manage"
	"petstore/internal/store"
	"petstore/internal/testkit"

	"github.com/jackc/pgx/v5"
)

// Environments on one database (docs/admin.md): a production server and a
// staging server may share a database, and each one's admin API sees only
// its own environment's keys, usage, key bans, audit events and webhook
// endpoints. Another environment's id answers as an unknown one does.

// otherEnvServer is a server of env on s's database, as serve --env env
// with the same --db.
func (s *testServer) otherEnvServer(env string) *testServer {
	s.t.Helper()
	other := *s
	other.cfg.Env, other.opts.env = env, env
	other.App = nil
	other.deps.WrapStore = nil
	a, err := New(context.Background(), other.cfg, other.deps)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { a.Close() })
	other.App = a
	return &other
}

// envSide is one environment's server on the shared database, an admin
// token of it with every scope, and what it owns: a key under a ban, and
// a webhook endpoint with a delivery.
type envSide struct {
	s        *testServer
	token    string
	key      domain.Key
	endpoint domain.WebhookEndpoint
}

func newEnvSide(t *testing.T, s *testServer) envSide {
	t.Helper()
	side := envSide{s: s, token: s.mustCreateAdmin("portal", domain.AllAdminScopes)}
	side.key, _ = s.mustCreate(s.keyTerms("free"))
	now := s.clock.now()
	ban := domain.StartedBan{Ban: domain.Ban{Subject: domain.CallerID{KeyID: side.key.ID}, Since: now, Until: now.Add(15 * time.Minute)}}
	ban.Event = domain.KeyEvent(domain.AuditKeyBanned, side.key, domain.ServerActor, now)
	if err := s.store.AddBans(context.Background(), []domain.StartedBan{ban}); err != nil {
		t.Fatal(err)
	}
	side.endpoint = s.addEndpoint(testkit.NewReceiver(t))
	if _, err := manage.QueueTest(context.Background(), s.store, s.env, side.endpoint.ID, testActor, now); err != nil {
		t.Fatal(err)
	}
	return side
}

// envPair is a production side and a staging side on one database, with
// an address ban, which is every environment's.
func envPair(t *testing.T, opts testOptions) (production, staging envSide) {
	t.Helper()
	prod := webhookServer(t, opts)
	production = newEnvSide(t, prod)
	staging = newEnvSide(t, prod.otherEnvServer("staging"))
	now := prod.clock.now()
	address := domain.CallerID{Addr: netip.MustParseAddr("203.0.113.7")}
	until := now.Add(15 * time.Minute)
	if err := prod.store.AddBans(context.Background(), []domain.StartedBan{{Ban: domain.Ban{Subject: address, Since: now, Until: until},
		Event: domain.AuditEvent{At: now, Action: domain.AuditKeyBanned, Actor: domain.ServerActor, Address: "203.0.113.7", Env: "production",
			Details: domain.AuditDetails{BannedUntil: &until, BanFor: "15m0s"}}}}); err != nil {
		t.Fatal(err)
	}
	return production, staging
}

// envRouteBodies are the bodies sent to the routes with an id: each one
// valid, so that only the id can refuse it.
var envRouteBodies = map[string]string{
	"PATCH /admin/v1/keys/{id}":              `{"plan":"enterprise","perMinute":6000,"perDay":600000}`,
	"POST /admin/v1/keys/{id}/roll":          `{"overlap":"0"}`,
	"POST /admin/v1/webhooks/{id}/rotate":    `{"overlap":"0"}`,
	"POST /admin/v1/webhooks/{id}/resend":    `{"failed":true}`,
	"POST /admin/v1/webhooks/{id}/enable":    ``,
	"DELETE /admin/v1/bans/{subject}":        ``,
	"GET /admin/v1/keys/{id}/usage":          ``,
	"POST /admin/v1/webhooks/{id}/test":      ``,
	"GET /admin/v1/webhooks/{id}/deliveries": ``,
}

// envTarget is the path of route pattern for the things of side: its key,
// its endpoint or its key's ban. A pattern with a wildcard the test does
// not know fails the test, so that a new route cannot be forgotten here.
func envTarget(t *testing.T, pattern string, side envSide) (method, target string) {
	t.Helper()
	method, path, _ := strings.Cut(pattern, " ")
	key, endpoint := strconv.FormatInt(side.key.ID, 10), strconv.FormatInt(side.endpoint.ID, 10)
	switch {
	case strings.HasPrefix(path, "/admin/v1/keys/{id}"):
		path = strings.Replace(path, "{id}", key, 1)
	case strings.HasPrefix(path, "/admin/v1/webhooks/{id}"):
		path = strings.Replace(path, "{id}", endpoint, 1)
	case path == "/admin/v1/bans/{subject}":
		path = "/admin/v1/bans/key:" + key
	}
	if strings.ContainsAny(path, "{}") {
		t.Fatalf("route %s: the test does not know what to put in its path: name one of each environment's things for it", pattern)
	}
	return method, path
}

// envSnapshot is all a side's token can see of its own things, and what
// the database holds in all: any change made across environments shows.
func envSnapshot(t *testing.T, side envSide) []string {
	t.Helper()
	var seen []string
	for _, path := range []string{"/admin/v1/keys", "/admin/v1/bans", "/admin/v1/webhooks", "/admin/v1/audit",
		"/admin/v1/keys/" + strconv.FormatInt(side.key.ID, 10) + "/usage",
		"/admin/v1/webhooks/" + strconv.FormatInt(side.endpoint.ID, 10) + "/deliveries"} {
		w := side.s.admin("GET", path, side.token, "")
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s with its own environment's token: %d %s", path, w.Code, w.Body)
		}
		seen = append(seen, path+" "+w.Body.String())
	}
	keys, err := side.s.store.Keys(context.Background())
	events, err2 := side.s.store.AuditEvents(context.Background(), domain.AuditFilter{})
	if err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	return append(seen, strconv.Itoa(len(keys))+" keys, "+strconv.Itoa(len(events))+" events in all")
}

// TestATokenOfOneEnvironmentCannotReachTheOthersThings walks every admin
// route with an id in its path: a staging token against a production key,
// endpoint or key ban, and a production token against staging's, answers
// 404 not_found, the answer to an unknown id, and changes nothing (no key
// minted, changed or revoked; no secret rotated; no ban lifted; nothing
// queued). The owner's own token then gets through on each, so each
// request was one that could succeed.
func TestATokenOfOneEnvironmentCannotReachTheOthersThings(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, opts testOptions) {
		production, staging := envPair(t, opts)
		routes := adminRoutes(production.s.App)
		withID := 0
		for _, dir := range []struct {
			name          string
			caller, owner envSide
		}{
			{"a staging token against production's", staging, production},
			{"a production token against staging's", production, staging},
		} {
			before := envSnapshot(t, dir.owner)
			for _, rt := range routes {
				if !strings.Contains(rt.pattern, " ") || !strings.Contains(rt.pattern, "{") {
					continue // a path's other methods, 405 whoever asks
				}
				withID++
				method, target := envTarget(t, rt.pattern, dir.owner)
				w := dir.caller.s.admin(method, target, dir.caller.token, envRouteBodies[rt.pattern])
				if w.Code != http.StatusNotFound {
					t.Errorf("%s: %s %s: HTTP %d, want 404; body: %s", dir.name, method, target, w.Code, w.Body)
					continue
				}
				wantError(t, w, http.StatusNotFound, httpapi.CodeNotFound)
			}
			for i, after := range envSnapshot(t, dir.owner) {
				if after != before[i] {
					t.Errorf("%s: what the owner sees changed:\nbefore %.400s\nafter  %.400s", dir.name, before[i], after)
				}
			}
		}
		if withID < 2*12 {
			t.Fatalf("walked %d routes with an id, want every one (12 or more) both ways", withID)
		}
		// The owner's token gets through on each: the ids and bodies were
		// good ones. Removing the endpoint comes last.
		slices.SortStableFunc(routes, func(a, b route) int { return strings.Compare(a.pattern[:1], b.pattern[:1]) })
		for _, side := range []envSide{staging, production} {
			for _, rt := range routes {
				if !strings.Contains(rt.pattern, " ") || !strings.Contains(rt.pattern, "{") || rt.pattern == "DELETE /admin/v1/webhooks/{id}" {
					continue
				}
				method, target := envTarget(t, rt.pattern, side)
				w := side.s.admin(method, target, side.token, envRouteBodies[rt.pattern])
				if w.Code >= 300 {
					t.Errorf("%s with %s's own token: HTTP %d; body: %s", rt.pattern, side.s.env, w.Code, w.Body)
				}
				if rt.pattern == "POST /admin/v1/keys/{id}/roll" {
					var rolled adminapi.CreatedKey
					testkit.DecodeJSON(t, w, &rolled)
					if !strings.HasPrefix(rolled.Key, domain.KeyPrefixes[side.s.env]) {
						t.Errorf("%s rolled its key to %.9s..., want a %s key", side.s.env, rolled.Key, domain.KeyPrefixes[side.s.env])
					}
				}
			}
			method, target := envTarget(t, "DELETE /admin/v1/webhooks/{id}", side)
			if w := side.s.admin(method, target, side.token, ""); w.Code != http.StatusNoContent {
				t.Errorf("DELETE %s with its own token: %d %s", target, w.Code, w.Body)
			}
		}
	})
}

// TestEachEnvironmentListsOnlyItsOwn: the lists of keys, bans, webhook
// endpoints and the audit trail of one environment show none of the
// other's; an address's ban is in both, as it applies on every server.
func TestEachEnvironmentListsOnlyItsOwn(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, opts testOptions) {
		production, staging := envPair(t, opts)
		for _, dir := range []struct{ self, other envSide }{{production, staging}, {staging, production}} {
			self, other := dir.self, dir.other
			t.Run(self.s.env, func(t *testing.T) {
				var keys []manage.ListedKey
				testkit.DecodeJSON(t, self.s.admin("GET", "/admin/v1/keys", self.token, ""), &keys)
				if len(keys) != 1 || keys[0].ID != self.key.ID {
					t.Errorf("GET /admin/v1/keys: %+v, want only key %d", keys, self.key.ID)
				}
				var bans []manage.ListedBan
				testkit.DecodeJSON(t, self.s.admin("GET", "/admin/v1/bans", self.token, ""), &bans)
				subjects := manage.Listed(bans, func(b manage.ListedBan) string { return b.Subject })
				slices.Sort(subjects)
				if want := []string{"address:203.0.113.7", "key:" + strconv.FormatInt(self.key.ID, 10)}; !slices.Equal(subjects, want) {
					t.Errorf("GET /admin/v1/bans: %q, want %q", subjects, want)
				}
				var endpoints []domain.ListedEndpoint
				testkit.DecodeJSON(t, self.s.admin("GET", "/admin/v1/webhooks", self.token, ""), &endpoints)
				if len(endpoints) != 1 || endpoints[0].ID != self.endpoint.ID {
					t.Errorf("GET /admin/v1/webhooks: %+v, want only endpoint %d", endpoints, self.endpoint.ID)
				}
				var events []manage.AuditJSON
				testkit.DecodeJSON(t, self.s.admin("GET", "/admin/v1/audit", self.token, ""), &events)
				var addressBan, ownBan bool
				for _, e := range events {
					switch {
					case e.KeyID != nil && *e.KeyID == other.key.ID:
						t.Errorf("GET /admin/v1/audit shows an event of the other environment's key: %+v", e)
					case e.Address != nil:
						addressBan = true
					case e.KeyID != nil && *e.KeyID == self.key.ID && e.Action == domain.AuditKeyBanned:
						ownBan = true
					}
				}
				if !addressBan || !ownBan {
					t.Errorf("GET /admin/v1/audit: %+v, want the address's ban and the key's own", events)
				}
				w := self.s.admin("GET", "/admin/v1/audit?key="+strconv.FormatInt(other.key.ID, 10), self.token, "")
				if strings.TrimSpace(w.Body.String()) != "[]" {
					t.Errorf("the audit trail of the other environment's key: %d %s, want []", w.Code, w.Body)
				}
			})
		}
	})
}

// TestAKeysWebhooksGoToItsEnvironmentsEndpoints: an event about a key is
// queued for the endpoints of the key's environment only, whoever made
// it; and a server sends its own environment's deliveries, never the
// other's.
func TestAKeysWebhooksGoToItsEnvironmentsEndpoints(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, opts testOptions) {
		prod := webhookServer(t, opts)
		staging := prod.otherEnvServer("staging")
		prodHooks, stagingHooks := testkit.NewReceiver(t), testkit.NewReceiver(t)
		prodEndpoint, stagingEndpoint := prod.addEndpoint(prodHooks), staging.addEndpoint(stagingHooks)
		token := prod.mustCreateAdmin("portal", domain.AllAdminScopes)
		w := prod.admin("POST", "/admin/v1/keys", token, `{"plan":"free"}`)
		if w.Code != http.StatusCreated {
			t.Fatalf("POST /admin/v1/keys: %d %s", w.Code, w.Body)
		}
		staging.mustCreate(staging.keyTerms("pro"))
		deliveries := func(endpoint int64) []string {
			ds, err := prod.store.WebhookDeliveries(context.Background(), domain.DeliveryFilter{EndpointID: endpoint})
			if err != nil {
				t.Fatal(err)
			}
			return manage.Listed(ds, func(d domain.WebhookDelivery) string { return d.Type })
		}
		if got := deliveries(prodEndpoint.ID); !slices.Equal(got, []string{domain.AuditKeyCreated}) {
			t.Errorf("production's endpoint has %q, want its key's key.created only", got)
		}
		if got := deliveries(stagingEndpoint.ID); !slices.Equal(got, []string{domain.AuditKeyCreated}) {
			t.Errorf("staging's endpoint has %q, want its key's key.created only", got)
		}
		staging.deliverDue()
		stagingHooks.Wait(1, 5*time.Second)
		if got := prodHooks.Deliveries(); len(got) != 0 {
			t.Errorf("the staging server sent production's webhooks: %+v", got)
		}
		prod.deliverDue()
		prodHooks.Wait(1, 5*time.Second)
		if got := stagingHooks.Deliveries(); len(got) != 1 {
			t.Errorf("staging's receiver got %d deliveries, want its one", len(got))
		}
	})
}

// TestWebhookEndpointsMadeBeforeEnvironmentsBelongToProduction: on a
// database of the schema before endpoints had an environment, each engine's
// migration gives the endpoints there production's, so a production server
// keeps sending to them and a staging one sees none.
func TestWebhookEndpointsMadeBeforeEnvironmentsBelongToProduction(t *testing.T) {
	t.Parallel()
	before := slices.IndexFunc(store.Migrations, func(m store.Migration) bool {
		return strings.Contains(m.SQLite, "webhook_endpoints ADD COLUMN env")
	})
	if before < 0 {
		t.Fatal("no migration gives webhook endpoints an environment")
	}
	const endpoint = `INSERT INTO webhook_endpoints (url, events, enabled, created_at, secret)
		VALUES ('https://hooks.example.com/old', '', 1, 1773100000, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')`
	ctx := context.Background()
	opened := map[string]func(t *testing.T) store.Storage{
		"sqlite": func(t *testing.T) store.Storage {
			path := t.TempDir() + "/old.db"
			db, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range append(migrationsOf(func(m store.Migration) string { return m.SQLite })[:before],
				fmt.Sprintf(`PRAGMA user_version = %d`, before), endpoint) {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()
			s, err := store.OpenSQLite(ctx, path, false, newFakeClock().now)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"postgres": func(t *testing.T) store.Storage {
			url := testkit.PostgresURL(t)
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range append(append([]string{`CREATE TABLE petstore_schema (version integer NOT NULL)`,
				fmt.Sprintf(`INSERT INTO petstore_schema (version) VALUES (%d)`, before)},
				migrationsOf(func(m store.Migration) string { return m.Postgres })[:before]...), endpoint) {
				if _, err := conn.Exec(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			conn.Close(ctx)
			s, err := store.OpenPostgres(ctx, url, newFakeClock().now)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			s := opened[engine](t)
			defer s.Close()
			prod, err := s.WebhookEndpoints(ctx, "production")
			staging, err2 := s.WebhookEndpoints(ctx, "staging")
			if err != nil || err2 != nil || len(prod) != 1 || prod[0].Env != "production" || len(staging) != 0 {
				t.Errorf("production's endpoints %+v (%v), staging's %+v (%v); want the old one production's", prod, err, staging, err2)
			}
		})
	}
}
