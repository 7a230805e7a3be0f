package adminapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"petstore/internal/servertest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"petstore/internal/adminapi"
	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/limits"
	"petstore/internal/manage"
	"petstore/internal/testkit"
)

// adminRequest is a request to a route of the admin API that it answers
// with success given the scope, and that success.
type adminRequest struct {
	method, target, body string
	need                 domain.ScopeSet
	ok                   int
}

// adminRequests are a request for each route of the admin API, on key id.
func adminRequests(id int64) []adminRequest {
	key := "/admin/v1/keys/" + strconv.FormatInt(id, 10)
	return []adminRequest{
		{"POST", "/admin/v1/keys", `{"plan":"free"}`, domain.ScopeKeysWrite, 201},
		{"GET", "/admin/v1/keys", "", domain.ScopeKeysRead, 200},
		{"GET", key, "", domain.ScopeKeysRead, 200},
		{"PATCH", key, `{"name":"renamed"}`, domain.ScopeKeysWrite, 200},
		{"GET", key + "/usage", "", domain.ScopeKeysRead, 200},
		{"GET", "/admin/v1/audit", "", domain.ScopeAuditRead, 200},
		{"GET", "/admin/v1/bans", "", domain.ScopeKeysRead, 200},
		{"DELETE", "/admin/v1/bans/key:999", "", domain.ScopeKeysWrite, 404},
		{"POST", key + "/roll", `{"overlap":"1h"}`, domain.ScopeKeysWrite, 201},
		{"POST", key + "/revoke", "", domain.ScopeKeysWrite, 200},
		{"GET", "/admin/v1/webhooks", "", domain.ScopeWebhooks, 200},
		{"POST", "/admin/v1/webhooks", `{"url":"https://hooks.example.com/in"}`, domain.ScopeWebhooks, 201},
		{"GET", "/admin/v1/webhooks/999/deliveries", "", domain.ScopeWebhooks, 404},
		{"POST", "/admin/v1/webhooks/999/test", "", domain.ScopeWebhooks, 404},
		{"POST", "/admin/v1/webhooks/999/rotate", "", domain.ScopeWebhooks, 404},
		{"POST", "/admin/v1/webhooks/999/enable", "", domain.ScopeWebhooks, 404},
		{"POST", "/admin/v1/webhooks/999/resend", `{"failed":true}`, domain.ScopeWebhooks, 404},
		{"DELETE", "/admin/v1/webhooks/999", "", domain.ScopeWebhooks, 404},
	}
}

func TestAdminRoutesAnswerEachScopeAndRefuseTheOthers(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts)
		for _, held := range []domain.ScopeSet{domain.ScopeKeysRead, domain.ScopeKeysWrite, domain.ScopeAuditRead, domain.ScopeWebhooks} {
			token := s.MustCreateAdmin("only-"+strings.ReplaceAll(held.String(), ":", "-"), held)
			k, _ := s.MustCreate(s.KeyTerms("free"))
			for _, route := range adminRequests(k.ID) {
				t.Run(held.String()+" "+route.method+" "+route.target, func(t *testing.T) {
					w := s.Admin(route.method, route.target, token, route.body)
					if held.Has(route.need) {
						if w.Code != route.ok {
							t.Fatalf("HTTP status %d, want %d; body: %s", w.Code, route.ok, w.Body)
						}
						return
					}
					servertest.WantError(t, w, 403, httpapi.CodeInsufficientScope, route.need.String())
					want := `Bearer realm="petstore-admin", error="insufficient_scope", scope="` + route.need.String() + `"`
					if got := w.Header().Get("WWW-Authenticate"); got != want {
						t.Errorf("WWW-Authenticate %q, want %q", got, want)
					}
				})
			}
		}
	})
}

func TestAdminTokensAndKeysAreNeverTakenForEachOther(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{})
	admin := s.MustCreateAdmin("portal", domain.AllAdminScopes)
	key := s.MustCreateKey("free")
	if w := s.Do("GET", "/v1/pets", admin, ""); w.Code != 401 {
		t.Errorf("an admin token on /v1: HTTP status %d, want 401", w.Code)
	}
	servertest.WantError(t, s.Admin("GET", "/admin/v1/keys", key, ""), 401, httpapi.CodeUnauthorized, "psk_")
	w := s.Admin("GET", "/admin/v1/keys", "", "")
	servertest.WantError(t, w, 401, httpapi.CodeUnauthorized)
	if got := w.Header().Get("WWW-Authenticate"); got != adminapi.Challenge {
		t.Errorf("WWW-Authenticate %q, want %q", got, adminapi.Challenge)
	}
	if w := s.Admin("GET", "/admin/v1/keys", admin, ""); w.Code != 200 {
		t.Errorf("the admin token on /admin/v1: HTTP status %d, want 200", w.Code)
	}
	// The public listener has no admin API at all.
	if w := s.Do("GET", "/admin/v1/keys", admin, ""); w.Code != 404 {
		t.Errorf("/admin/v1 on the public listener: HTTP status %d, want 404", w.Code)
	}
	// Unknown paths and other methods, after the token.
	servertest.WantError(t, s.Admin("GET", "/admin/v1/nothing", "", ""), 401, httpapi.CodeUnauthorized)
	servertest.WantError(t, s.Admin("GET", "/admin/v1/nothing", admin, ""), 404, httpapi.CodeNotFound)
	w = s.Admin("DELETE", "/admin/v1/keys", admin, "")
	servertest.WantError(t, w, 405, httpapi.CodeMethodNotAllowed)
	if got := w.Header().Get("Allow"); got != "GET, HEAD, POST" {
		t.Errorf("Allow %q", got)
	}
}

func TestAdminFailuresAreLimitedByAddressApartFromV1(t *testing.T) {
	t.Parallel()
	m := servertest.NewMetrics()
	s := servertest.Start(t, servertest.Options{Metrics: m, BanAfter: 2})
	key := s.MustCreateKey("free")
	wrong := domain.NewSecret(domain.AdminPrefixes["production"]) // the shape of a token, and no such token
	send := func(token string) *httptest.ResponseRecorder { return adminFrom(s, "198.51.100.7:4000", token) }
	for i := range domain.AnonymousLimits.PerMinute {
		if w := send(wrong); w.Code != 401 {
			t.Fatalf("failure %d: HTTP status %d, want 401", i+1, w.Code)
		}
	}
	servertest.WantError(t, send(wrong), 429, httpapi.CodeRateLimited)
	send(wrong)
	send(wrong)
	servertest.WantError(t, send(wrong), 429, httpapi.CodeTemporarilyBanned)
	if w := send(wrong); w.Header().Get("Retry-After") == "" {
		t.Error("a banned address is not told when to come back")
	}
	// The same address on /v1 is a caller of its own there.
	if w := s.From("198.51.100.7:4000", "/v1/pets", key); w.Code != 200 {
		t.Errorf("/v1 from the address banned on the admin API: HTTP status %d, want 200", w.Code)
	}
	if w := s.From("198.51.100.7:4000", "/v1/pets", wrong); w.Code != 401 {
		t.Errorf("/v1 without a valid key from that address: HTTP status %d, want 401 (its own allowance)", w.Code)
	}
	got := testkit.CounterValues(t, testkit.Scrape(t, m.Handler()), "petstore_admin_auth_failures_total", "reason")
	if got["invalid"] != float64(domain.AnonymousLimits.PerMinute+5) {
		t.Errorf("petstore_admin_auth_failures_total{reason=invalid} = %v, want %d", got["invalid"], domain.AnonymousLimits.PerMinute+5)
	}
	if v1 := testkit.CounterValues(t, testkit.Scrape(t, m.Handler()), "petstore_auth_failures_total", "reason"); v1["invalid"] != 0 {
		t.Errorf("the admin failures are counted as /v1's too: %v", v1)
	}
}

// adminFrom sends GET /admin/v1/keys to the admin listener's handler from
// the TCP peer addr, with token and the header's name, value pairs.
func adminFrom(s *servertest.Server, addr, token string, header ...string) *httptest.ResponseRecorder {
	return testkit.FromPeer(servertest.OnAdminHost(s.AdminHandler()), addr, "/admin/v1/keys", token, header...)
}

// The admin listener is reached directly, never through the public
// listener's proxy: its failures are counted against the TCP peer even with
// --trust-proxy, and X-Forwarded-For neither spreads them nor bans another.
func TestAdminFailuresAreCountedAgainstTheTCPPeerEvenWithTrustProxy(t *testing.T) {
	t.Parallel()
	t.Run("a new X-Forwarded-For on each failure still meets 429", func(t *testing.T) {
		s := servertest.Start(t, servertest.Options{TrustProxy: true, BanAfter: 2})
		for i := range 300 {
			forged := fmt.Sprintf("203.0.113.%d, 10.0.0.1", i%250+1)
			w := adminFrom(s, "198.51.100.7:4000", domain.NewSecret(domain.AdminPrefixes["production"]), "X-Forwarded-For", forged)
			if i < int(domain.AnonymousLimits.PerMinute) {
				servertest.WantError(t, w, http.StatusUnauthorized, httpapi.CodeUnauthorized)
				continue
			}
			servertest.WantError(t, w, http.StatusTooManyRequests, "rate_limited|temporarily_banned")
		}
	})
	t.Run("a forged X-Forwarded-For bans nobody else", func(t *testing.T) {
		s := servertest.Start(t, servertest.Options{TrustProxy: true, BanAfter: 2})
		admin := s.MustCreateAdmin("portal", domain.AllAdminScopes)
		wrong := domain.NewSecret(domain.AdminPrefixes["production"])
		for range domain.AnonymousLimits.PerMinute + 5 {
			adminFrom(s, "198.51.100.7:4000", wrong, "X-Forwarded-For", "192.0.2.50")
		}
		servertest.WantError(t, adminFrom(s, "198.51.100.7:4000", wrong), http.StatusTooManyRequests, httpapi.CodeTemporarilyBanned)
		if w := adminFrom(s, "192.0.2.50:5000", admin); w.Code != http.StatusOK {
			t.Errorf("the address named in the forged header: HTTP status %d, want 200; body: %s", w.Code, w.Body)
		}
	})
}

func TestAdminKeyLifecycle(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts)
		admin := s.MustCreateAdmin("portal", domain.AllAdminScopes)

		w := s.Admin("POST", "/admin/v1/keys", admin, `{"plan":"free","name":"acme","externalId":"acct_1029","scopes":["pets:read"]}`)
		if w.Code != 201 {
			t.Fatalf("create: HTTP status %d; body: %s", w.Code, w.Body)
		}
		var created adminapi.CreatedKey
		testkit.DecodeJSON(t, w, &created)
		if loc := w.Header().Get("Location"); loc != "/admin/v1/keys/"+strconv.FormatInt(created.ID, 10) {
			t.Errorf("Location %q", loc)
		}
		if !strings.HasPrefix(created.Key, "psk_live_") || created.ExternalID == nil || *created.ExternalID != "acct_1029" ||
			created.Plan != "free" || !slices.Equal(created.Scopes, []string{"pets:read"}) {
			t.Errorf("created %+v", created)
		}
		if w := s.Do("GET", "/v1/pets", created.Key, ""); w.Code != 200 {
			t.Errorf("the new key on /v1: HTTP status %d", w.Code)
		}

		// A retried signup makes no second key.
		w = s.Admin("POST", "/admin/v1/keys", admin, `{"plan":"pro","externalId":"acct_1029"}`)
		servertest.WantError(t, w, 409, httpapi.CodeConflict, "key "+strconv.FormatInt(created.ID, 10))

		// The same object from a get and from the CLI's list.
		var got manage.ListedKey
		testkit.DecodeJSON(t, s.Admin("GET", "/admin/v1/keys/"+strconv.FormatInt(created.ID, 10), admin, ""), &got)
		if got.ID != created.ID || got.Name != "acme" {
			t.Errorf("get: %+v", got)
		}
		servertest.WantError(t, s.Admin("GET", "/admin/v1/keys/999", admin, ""), 404, httpapi.CodeNotFound)
		servertest.WantError(t, s.Admin("GET", "/admin/v1/keys/x", admin, ""), 400, httpapi.CodeInvalidRequest, "id")

		// An upgrade in place: the same secret, the new limits.
		path := "/admin/v1/keys/" + strconv.FormatInt(created.ID, 10)
		w = s.Admin("PATCH", path, admin, `{"plan":"pro","scopes":["pets:read","pets:write"]}`)
		if w.Code != 200 {
			t.Fatalf("patch: HTTP status %d; body: %s", w.Code, w.Body)
		}
		testkit.DecodeJSON(t, w, &got)
		if got.Plan != "pro" || got.PerMinute != 300 || len(got.Scopes) != 2 {
			t.Errorf("patched: %+v", got)
		}
		if err := s.Keys().Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		if w := s.Do("POST", "/v1/pets", created.Key, `{"name":"Rex","categoryId":1}`); w.Code != 201 ||
			w.Header().Get("X-RateLimit-Limit") != "300" {
			t.Errorf("the upgraded key: HTTP status %d, limit %s", w.Code, w.Header().Get("X-RateLimit-Limit"))
		}
		events, err := s.Store().AuditEvents(context.Background(), domain.AuditFilter{Action: domain.AuditKeyUpdated})
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 1 || events[0].Actor != "admin:portal" || events[0].Details.Before.Plan != "free" ||
			events[0].Details.After.Plan != "pro" {
			t.Errorf("key.updated events: %+v", events)
		}

		// A roll over HTTP: the new key works, the old one stops.
		w = s.Admin("POST", path+"/roll", admin, `{"overlap":"0"}`)
		if w.Code != 201 {
			t.Fatalf("roll: HTTP status %d; body: %s", w.Code, w.Body)
		}
		var rolled adminapi.CreatedKey
		testkit.DecodeJSON(t, w, &rolled)
		if rolled.RolledFrom == nil || *rolled.RolledFrom != created.ID || rolled.Key == created.Key {
			t.Errorf("rolled: %+v", rolled)
		}
		if err := s.Keys().Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		if w := s.Do("GET", "/v1/pets", rolled.Key, ""); w.Code != 200 {
			t.Errorf("the rolled key: HTTP status %d", w.Code)
		}
		if w := s.Do("GET", "/v1/pets", created.Key, ""); w.Code != 401 {
			t.Errorf("the old key after a roll without overlap: HTTP status %d", w.Code)
		}
		servertest.WantError(t, s.Admin("POST", path+"/roll", admin, ""), 400, httpapi.CodeInvalidRequest, "cannot be rolled")

		// A revocation, twice: one event.
		rolledPath := "/admin/v1/keys/" + strconv.FormatInt(rolled.ID, 10)
		for range 2 {
			w = s.Admin("POST", rolledPath+"/revoke", admin, "")
			testkit.DecodeJSON(t, w, &got)
			if w.Code != 200 || got.State != manage.StateRevoked {
				t.Errorf("revoke: HTTP status %d, %+v", w.Code, got)
			}
		}
		if err := s.Keys().Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		if w := s.Do("GET", "/v1/pets", rolled.Key, ""); w.Code != 401 {
			t.Errorf("the revoked key: HTTP status %d", w.Code)
		}
		revoked, err := s.Store().AuditEvents(context.Background(), domain.AuditFilter{Action: domain.AuditKeyRevoked, KeyID: rolled.ID})
		if err != nil || len(revoked) != 1 || revoked[0].Actor != "admin:portal" {
			t.Errorf("key.revoked events %+v (%v), want one by admin:portal", revoked, err)
		}
		// The first key, rolled and stopped but not revoked, still holds
		// its externalId; revoked, it lets it go.
		if w := s.Admin("POST", "/admin/v1/keys", admin, `{"plan":"free","externalId":"acct_1029"}`); w.Code != 409 {
			t.Errorf("externalId of a rolled key: HTTP status %d, want 409", w.Code)
		}
		s.Admin("POST", path+"/revoke", admin, "")
		if w := s.Admin("POST", "/admin/v1/keys", admin, `{"plan":"free","externalId":"acct_1029"}`); w.Code != 201 {
			t.Errorf("externalId of a revoked key: HTTP status %d, want 201; body: %s", w.Code, w.Body)
		}
	})
}

func TestAdminBadInputIsRefusedNamingTheFieldAndWritesNothing(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{})
	admin := s.MustCreateAdmin("portal", domain.AllAdminScopes)
	k, _ := s.MustCreate(s.KeyTerms("free"))
	path := "/admin/v1/keys/" + strconv.FormatInt(k.ID, 10)
	tests := []struct {
		name, method, target, body string
		status                     int
		code, says                 string
	}{
		{"a plan that does not exist", "POST", "/admin/v1/keys", `{"plan":"gold"}`, 400, httpapi.CodeInvalidRequest, "gold"},
		{"no plan", "POST", "/admin/v1/keys", `{"name":"x"}`, 400, httpapi.CodeInvalidRequest, "plan"},
		{"rpm without enterprise", "POST", "/admin/v1/keys", `{"plan":"pro","perMinute":5}`, 400, httpapi.CodeInvalidRequest, "perMinute"},
		{"enterprise without figures", "POST", "/admin/v1/keys", `{"plan":"enterprise"}`, 400, httpapi.CodeInvalidRequest, "perMinute"},
		{"an unknown scope", "POST", "/admin/v1/keys", `{"plan":"free","scopes":["keys:write"]}`, 400, httpapi.CodeInvalidRequest, "keys:write"},
		{"an expiry in the past", "POST", "/admin/v1/keys", `{"plan":"free","expires":"2020-01-01T00:00:00Z"}`, 400, httpapi.CodeInvalidRequest, "expires"},
		{"a name with a control character", "POST", "/admin/v1/keys", `{"plan":"free","name":"a\u0007b"}`, 400, httpapi.CodeInvalidRequest, "name"},
		{"an empty externalId", "POST", "/admin/v1/keys", `{"plan":"free","externalId":""}`, 400, httpapi.CodeInvalidRequest, "externalId"},
		{"an unknown field", "POST", "/admin/v1/keys", `{"plan":"free","color":"red"}`, 400, httpapi.CodeInvalidRequest, "color"},
		{"not JSON", "POST", "/admin/v1/keys", `{`, 400, httpapi.CodeInvalidJSON, ""},
		{"a patch of nothing", "PATCH", path, `{}`, 400, httpapi.CodeInvalidRequest, "changes nothing"},
		{"a patch to an unknown plan", "PATCH", path, `{"plan":"gold"}`, 400, httpapi.CodeInvalidRequest, "gold"},
		{"a patch of rpm on free", "PATCH", path, `{"perMinute":100}`, 400, httpapi.CodeInvalidRequest, "perMinute"},
		{"a patch of a negative perDay", "PATCH", path, `{"plan":"enterprise","perMinute":1,"perDay":-1}`, 400, httpapi.CodeInvalidRequest, "perDay"},
		{"a roll with a bad overlap", "POST", path + "/roll", `{"overlap":"soon"}`, 400, httpapi.CodeInvalidRequest, "overlap"},
		{"days=0", "GET", path + "/usage?days=0", "", 400, httpapi.CodeInvalidRequest, "days"},
		{"days=401", "GET", path + "/usage?days=401", "", 400, httpapi.CodeInvalidRequest, "days"},
		{"days given twice", "GET", path + "/usage?days=400&days=500", "", 400, httpapi.CodeInvalidRequest, "days must be given at most once"},
		{"days given twice alike", "GET", path + "/usage?days=7&days=7", "", 400, httpapi.CodeInvalidRequest, "days must be given at most once"},
		{"idle=yesterday", "GET", "/admin/v1/keys?idle=yesterday", "", 400, httpapi.CodeInvalidRequest, "idle"},
		{"expiring=0", "GET", "/admin/v1/keys?expiring=0", "", 400, httpapi.CodeInvalidRequest, "expiring"},
		{"revoked=maybe", "GET", "/admin/v1/keys?revoked=maybe", "", 400, httpapi.CodeInvalidRequest, "revoked"},
		{"a list plan that does not exist", "GET", "/admin/v1/keys?plan=gold", "", 400, httpapi.CodeInvalidRequest, "plan"},
		{"a bad cursor", "GET", "/admin/v1/keys?cursor=zzz", "", 400, httpapi.CodeInvalidRequest, "cursor"},
		{"limit=0", "GET", "/admin/v1/audit?limit=0", "", 400, httpapi.CodeInvalidRequest, "limit"},
		{"an unknown action", "GET", "/admin/v1/audit?action=key.eaten", "", 400, httpapi.CodeInvalidRequest, "key.eaten"},
		{"a bad since", "GET", "/admin/v1/audit?since=yesterday", "", 400, httpapi.CodeInvalidRequest, "since"},
		{"a bad key", "GET", "/admin/v1/audit?key=-1", "", 400, httpapi.CodeInvalidRequest, "key"},
	}
	before, err := s.Store().AuditCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := s.Store().Keys(context.Background())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			servertest.WantError(t, s.Admin(tt.method, tt.target, admin, tt.body), tt.status, tt.code, tt.says)
		})
	}
	t.Run("a body of another type", func(t *testing.T) {
		servertest.WantError(t, s.Admin("POST", "/admin/v1/keys", admin, `{"plan":"free"}`, "Content-Type", "text/plain"), 415, httpapi.CodeUnsupportedMediaType)
	})
	t.Run("a body too large", func(t *testing.T) {
		servertest.WantError(t, s.Admin("POST", "/admin/v1/keys", admin, `{"name":"`+strings.Repeat("x", httpapi.MaxBodyBytes)+`"}`), 413, httpapi.CodePayloadTooLarge)
	})
	after, err := s.Store().AuditCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	keysAfter, _ := s.Store().Keys(context.Background())
	if fmt.Sprint(before) != fmt.Sprint(after) || len(keys) != len(keysAfter) {
		t.Errorf("bad input wrote something: events %v then %v, keys %d then %d", before, after, len(keys), len(keysAfter))
	}
}

func TestAdminListsPagesAndFilters(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{})
	admin := s.MustCreateAdmin("portal", domain.AllAdminScopes)
	ctx := context.Background()
	var ids []int64
	for i := range 5 {
		terms := s.KeyTerms("free")
		if i%2 == 1 {
			terms = s.KeyTerms("pro")
		}
		k, _ := s.MustCreate(terms)
		ids = append(ids, k.ID)
	}
	var all []int64
	next := "/admin/v1/keys?limit=2&plan=free"
	for next != "" {
		w := s.Admin("GET", next, admin, "")
		var page []manage.ListedKey
		testkit.DecodeJSON(t, w, &page)
		for _, k := range page {
			if k.Plan != "free" {
				t.Errorf("plan=free listed a %s key", k.Plan)
			}
			all = append(all, k.ID)
		}
		next = ""
		if link := w.Header().Get("Link"); link != "" {
			next = strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
			if !strings.Contains(next, "plan=free") {
				t.Errorf("the next page %q forgets the filter", next)
			}
		}
	}
	if want := []int64{ids[0], ids[2], ids[4]}; !slices.Equal(all, want) {
		t.Errorf("pages of free keys: %v, want %v", all, want)
	}

	if _, err := s.Store().RevokeKey(ctx, ids[1], servertest.Actor); err != nil {
		t.Fatal(err)
	}
	var revoked []manage.ListedKey
	testkit.DecodeJSON(t, s.Admin("GET", "/admin/v1/keys?revoked=true", admin, ""), &revoked)
	if len(revoked) != 1 || revoked[0].ID != ids[1] {
		t.Errorf("revoked=true: %+v", revoked)
	}

	// The audit trail, a page at a time, oldest first or newest first.
	newest := slices.Clone(ids)
	slices.Reverse(newest)
	for _, tt := range []struct {
		first string
		want  []int64
	}{
		{"/admin/v1/audit?action=key.created&limit=2", ids},
		{"/admin/v1/audit?action=key.created&limit=2&order=oldest", ids},
		{"/admin/v1/audit?action=key.created&limit=2&order=newest", newest},
	} {
		var got []int64
		for _, e := range auditPages(t, s, admin, tt.first) {
			if e.Action != domain.AuditKeyCreated {
				t.Errorf("%s: event %+v", tt.first, e)
			}
			got = append(got, *e.KeyID)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: the pages hold the key.created events of keys %v, want %v", tt.first, got, tt.want)
		}
	}
}

// auditPages are the events of the pages from first on, each page's Link
// followed to the next.
func auditPages(t *testing.T, s *servertest.Server, admin, first string) []manage.AuditJSON {
	t.Helper()
	var events []manage.AuditJSON
	for next := first; next != ""; {
		w := s.Admin("GET", next, admin, "")
		var page []manage.AuditJSON
		testkit.DecodeJSON(t, w, &page)
		events = append(events, page...)
		next = ""
		if link := w.Header().Get("Link"); link != "" {
			next = strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
		}
	}
	return events
}

func TestIdleAndExpiringKeysUnderAFakeClock(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts)
		admin := s.MustCreateAdmin("portal", domain.AllAdminScopes)
		ctx := context.Background()
		start := s.Clock.Now()
		unused, _ := s.MustCreate(s.KeyTerms("free"))
		used, _ := s.MustCreate(s.KeyTerms("free"))
		soon, _ := s.MustCreateKeyExpiring(start.Add(40 * 24 * time.Hour))
		later, _ := s.MustCreateKeyExpiring(start.Add(90 * 24 * time.Hour))
		s.Clock.Advance(35 * 24 * time.Hour)
		if err := s.Store().SetLastUsed(ctx, []domain.LastUse{{KeyID: used.ID, Minute: s.Clock.Now().Add(-24 * time.Hour).Truncate(time.Minute)}}); err != nil {
			t.Fatal(err)
		}
		s.Clock.Advance(time.Hour) // expired keys are not expiring
		list := func(query string) []int64 {
			t.Helper()
			w := s.Admin("GET", "/admin/v1/keys?"+query, admin, "")
			if w.Code != 200 {
				t.Fatalf("%s: HTTP status %d; body: %s", query, w.Code, w.Body)
			}
			var rows []manage.ListedKey
			testkit.DecodeJSON(t, w, &rows)
			var ids []int64
			for _, r := range rows {
				ids = append(ids, r.ID)
			}
			return ids
		}
		for _, tt := range []struct {
			query string
			want  []int64
		}{
			{"idle=30d", []int64{unused.ID, soon.ID, later.ID}},
			{"idle=2d", []int64{unused.ID, soon.ID, later.ID}},
			{"idle=1d", []int64{unused.ID, used.ID, soon.ID, later.ID}},
			{"expiring=7d", []int64{soon.ID}},
			{"expiring=60d", []int64{soon.ID, later.ID}},
			{"idle=30d&expiring=7d", []int64{soon.ID}},
		} {
			if got := list(tt.query); !slices.Equal(got, tt.want) {
				t.Errorf("%s: %v, want %v", tt.query, got, tt.want)
			}
		}
		s.Clock.Advance(5 * 24 * time.Hour) // soon has expired
		if got := list("expiring=7d"); len(got) != 0 {
			t.Errorf("expiring=7d after the expiry: %v, want none", got)
		}
	})
}

// usageOf is key id's usage history over days through the admin API.
func usageOf(t *testing.T, s *servertest.Server, admin string, id int64, days int) []domain.UsageDay {
	t.Helper()
	w := s.Admin("GET", fmt.Sprintf("/admin/v1/keys/%d/usage?days=%d", id, days), admin, "")
	if w.Code != 200 {
		t.Fatalf("usage: HTTP status %d; body: %s", w.Code, w.Body)
	}
	var rows []domain.UsageDay
	testkit.DecodeJSON(t, w, &rows)
	return rows
}

func TestUsageHistoryCountsEachRequestOnceInItsColumn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts servertest.Options
	}{
		{"sqlite, one server", servertest.Options{BanAfter: 2}},
		{"postgres and redis, two servers", servertest.Options{Postgres: true, Redis: true, BanAfter: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := servertest.Start(t, tc.opts)
			b := a
			if tc.opts.Redis {
				b = a.AnotherServer()
			}
			admin := a.MustCreateAdmin("portal", domain.AllAdminScopes)
			terms := a.KeyTerms("enterprise", domain.Limits{PerMinute: 3, PerDay: 5})
			terms.Scopes = domain.ScopePetsRead
			k, key := a.MustCreate(terms)
			servers := []*servertest.Server{a, b}
			var want domain.UsageDay
			send := func(i int, method string, status int, outcome domain.UsageOutcome) {
				t.Helper()
				body := ""
				if method == "POST" {
					body = `{"name":"Rex","categoryId":1}`
				}
				w := servers[i%2].Do(method, "/v1/pets", key, body)
				if w.Code != status {
					t.Fatalf("request %d (%s): HTTP status %d, want %d; body: %s", i, method, w.Code, status, w.Body)
				}
				want.Add(outcome, 1)
			}
			send(0, "GET", 200, domain.UsageAllowed)
			send(1, "POST", 403, domain.UsageForbidden) // spends the minute like any request
			send(2, "GET", 200, domain.UsageAllowed)
			send(3, "GET", 429, domain.UsageRateLimited)
			send(4, "GET", 429, domain.UsageRateLimited)
			send(5, "GET", 429, domain.UsageRateLimited)
			send(6, "GET", 429, domain.UsageBanned)
			send(7, "GET", 429, domain.UsageBanned)
			a.Clock.Advance(16 * time.Minute) // the ban is over, the minute full again
			send(8, "GET", 200, domain.UsageAllowed)
			send(9, "GET", 200, domain.UsageAllowed)
			send(10, "GET", 429, domain.UsageQuotaExceeded) // 5 a day: 4 allowed and the 403
			a.FlushUsage()
			if b != a {
				b.FlushUsage()
			}
			want.Day = a.Clock.Now().UTC().Format(time.DateOnly)
			rows := usageOf(t, a, admin, k.ID, 3)
			if len(rows) != 3 || rows[2] != want || rows[0].Allowed != 0 || rows[1].Day >= want.Day {
				t.Errorf("usage: %+v, want two days of zeros, then %+v", rows, want)
			}
			// A roll's keys share the budget: the new key names the same history.
			_, rolled, _ := a.Roll(k.ID, time.Hour)
			if got := usageOf(t, a, admin, rolled.ID, 1); len(got) != 1 || got[0] != want {
				t.Errorf("the rolled key's usage: %+v, want %+v", got, want)
			}
		})
	}
}

func TestUsageHistoryIsPrunedAfter400Days(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts)
		ctx := context.Background()
		now := s.Clock.Now()
		rows := []domain.UsageDay{
			{BudgetID: 1, Day: limits.DayString(limits.UnixDay(now) - manage.UsageHistoryDays), Allowed: 1},
			{BudgetID: 1, Day: limits.DayString(limits.UnixDay(now) - manage.UsageHistoryDays + 1), Allowed: 2},
		}
		for i := range rows {
			rows[i].Batch = domain.Batch{Stream: "test", N: 1}
		}
		if err := s.Store().AddUsageHistory(ctx, rows); err != nil {
			t.Fatal(err)
		}
		n, err := s.Store().PruneUsageHistory(ctx, manage.UsageHistoryCutoff(now))
		if err != nil || n != 1 {
			t.Errorf("pruned %d (%v), want the one day older than 400", n, err)
		}
		kept, err := s.Store().UsageHistory(ctx, 1, rows[0].Day)
		if err != nil || len(kept) != 1 || kept[0].Day != rows[1].Day {
			t.Errorf("kept %+v (%v), want the 400th day back", kept, err)
		}
	})
}

func TestAKeyMadeOverHTTPWorksOnAnotherServerAndItsRevocationReachesItWithinASecond(t *testing.T) {
	t.Parallel()
	a := servertest.Start(t, servertest.Options{Postgres: true, Redis: true})
	b := a.AnotherServer()
	stop := b.StartBackground()
	defer stop()
	admin := a.MustCreateAdmin("portal", domain.AllAdminScopes)
	w := a.Admin("POST", "/admin/v1/keys", admin, `{"plan":"pro"}`)
	if w.Code != 201 {
		t.Fatalf("create: HTTP status %d; body: %s", w.Code, w.Body)
	}
	var created adminapi.CreatedKey
	testkit.DecodeJSON(t, w, &created)
	if w := b.Do("GET", "/v1/pets", created.Key, ""); w.Code != 200 {
		t.Fatalf("the key made on server a, on server b: HTTP status %d; body: %s", w.Code, w.Body)
	}
	if w := a.Admin("POST", fmt.Sprintf("/admin/v1/keys/%d/revoke", created.ID), admin, ""); w.Code != 200 {
		t.Fatalf("revoke: HTTP status %d", w.Code)
	}
	revoked := time.Now()
	testkit.Eventually(t, time.Second, "server b refuses the key revoked through server a's admin API", func() bool {
		return b.Do("GET", "/v1/pets", created.Key, "").Code == 401
	})
	t.Logf("refused %v after the revocation", time.Since(revoked).Round(time.Millisecond))
	// An upgrade reaches it too.
	if w := a.Admin("POST", "/admin/v1/keys", admin, `{"plan":"free"}`); w.Code != 201 {
		t.Fatal(w.Body)
	} else {
		testkit.DecodeJSON(t, w, &created)
	}
	b.Do("GET", "/v1/pets", created.Key, "")
	a.Admin("PATCH", fmt.Sprintf("/admin/v1/keys/%d", created.ID), admin, `{"plan":"business"}`)
	testkit.Eventually(t, time.Second, "server b applies the upgrade made through server a", func() bool {
		return b.Do("GET", "/v1/pets", created.Key, "").Header().Get("X-RateLimit-Limit") == "1000"
	})
}

func TestAdminTokenRevokedIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts)
		token := s.MustCreateAdmin("portal", domain.AllAdminScopes)
		tokens, err := s.Store().AdminTokens(context.Background())
		if err != nil || len(tokens) != 1 {
			t.Fatalf("%+v %v", tokens, err)
		}
		if revoked, err := s.Store().RevokeAdminToken(context.Background(), tokens[0].ID, servertest.Actor); !revoked || err != nil {
			t.Fatalf("revoke: %v %v", revoked, err)
		}
		servertest.WantError(t, s.Admin("GET", "/admin/v1/keys", token, ""), 401, httpapi.CodeUnauthorized, "revoked")
		if revoked, err := s.Store().RevokeAdminToken(context.Background(), tokens[0].ID, servertest.Actor); revoked || err != nil {
			t.Errorf("a second revocation: %v %v, want nothing changed", revoked, err)
		}
		events, _ := s.Store().AuditEvents(context.Background(), domain.AuditFilter{})
		var actions []string
		for _, e := range events {
			actions = append(actions, e.Action)
			if e.Details.AdminID != tokens[0].ID {
				t.Errorf("%s has adminId %d, want %d", e.Action, e.Details.AdminID, tokens[0].ID)
			}
		}
		if want := []string{domain.AuditAdminCreated, domain.AuditAdminRevoked}; !slices.Equal(actions, want) {
			t.Errorf("events %v, want %v", actions, want)
		}
	})
}

// TestAdminListenerServesItsDocumentWithoutAToken: the document is the
// embedded one, and the metrics are still there beside the API.
func TestAdminListenerServesItsDocumentWithoutAToken(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{Metrics: servertest.NewMetrics()})
	w := s.Admin("GET", "/admin/v1/openapi.yaml", "", "")
	if w.Code != 200 || w.Body.String() != string(servertest.ReadRootFile(t, "admin-openapi.yaml")) || w.Header().Get("Content-Type") != "application/yaml" {
		t.Errorf("GET /admin/v1/openapi.yaml: HTTP status %d, %d bytes, %s", w.Code, w.Body.Len(), w.Header().Get("Content-Type"))
	}
	if w := s.Admin("GET", "/metrics", "", ""); w.Code != http.StatusOK {
		t.Errorf("GET /metrics on the admin listener: HTTP status %d", w.Code)
	}
}

// The README's table writes "Pro": the admin API takes a plan in any case,
// as keys create does, and keeps it as its name.
func TestAdminTakesThePlanInAnyCase(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{})
	admin := s.MustCreateAdmin("portal", domain.AllAdminScopes)
	w := s.Admin("POST", "/admin/v1/keys", admin, `{"plan":"Pro","name":"acme"}`)
	if w.Code != 201 {
		t.Fatalf("create with plan Pro: HTTP status %d; body: %s", w.Code, w.Body)
	}
	var created adminapi.CreatedKey
	testkit.DecodeJSON(t, w, &created)
	if created.Plan != "pro" || created.PerMinute != 300 {
		t.Errorf("created %+v, want a pro key (300 a minute)", created)
	}
	var listed []manage.ListedKey
	testkit.DecodeJSON(t, s.Admin("GET", "/admin/v1/keys?plan=PRO", admin, ""), &listed)
	if len(listed) != 1 || listed[0].ID != created.ID {
		t.Errorf("plan=PRO listed %+v, want the pro key", listed)
	}
	w = s.Admin("PATCH", "/admin/v1/keys/"+strconv.FormatInt(created.ID, 10), admin, `{"plan":"Business"}`)
	var got manage.ListedKey
	testkit.DecodeJSON(t, w, &got)
	if w.Code != 200 || got.Plan != "business" {
		t.Errorf("patch to Business: HTTP status %d, %+v", w.Code, got)
	}
}
