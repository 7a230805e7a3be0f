package adminapi_test

import (
	"fmt"
	"net/http"
	"petstore/internal/servertest"
	"slices"
	"strings"
	"testing"
	"time"

	"petstore/internal/adminapi"
	"petstore/internal/domain"
	"petstore/internal/manage"
	"petstore/internal/testkit"
)

// The admin API's additions for the owner's console: whoami, the keys'
// search q, a key's limits now, and no-store on every answer.

func TestWhoamiNamesTheTokenAndItsScopes(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{})
	tests := []struct {
		name   string
		scopes domain.ScopeSet
		want   []string
	}{
		{"portal", domain.AllAdminScopes, []string{"keys:read", "keys:write", "audit:read", "webhooks"}},
		{"support", domain.ScopeKeysRead, []string{"keys:read"}},
		{"hooks", domain.ScopeWebhooks | domain.ScopeAuditRead, []string{"audit:read", "webhooks"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := s.Admin("GET", "/admin/v1/whoami", s.MustCreateAdmin(tt.name, tt.scopes), "")
			if w.Code != http.StatusOK {
				t.Fatalf("HTTP status %d: %s", w.Code, w.Body)
			}
			var got adminapi.Identity
			testkit.DecodeJSON(t, w, &got)
			if got.Name != tt.name || !slices.Equal(got.Scopes, tt.want) || got.ID < 1 {
				t.Errorf("whoami = %+v, want name %s and scopes %v", got, tt.name, tt.want)
			}
		})
	}
}

func TestKeysSearchFindsANameOrAnExternalIdInAnyCase(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{})
	admin := s.MustCreateAdmin("portal", domain.AllAdminScopes)
	for _, body := range []string{
		`{"plan":"free","name":"Acme Corp"}`,
		`{"plan":"free","name":"other","externalId":"ext-ACME-7"}`,
		`{"plan":"pro","name":"Globex"}`,
		`{"plan":"free","name":"acme staging"}`,
	} {
		if w := s.Admin("POST", "/admin/v1/keys", admin, body); w.Code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", body, w.Code, w.Body)
		}
	}
	tests := []struct {
		query string
		want  []string
	}{
		{"q=acme", []string{"Acme Corp", "other", "acme staging"}},
		{"q=ACME&plan=free", []string{"Acme Corp", "other", "acme staging"}},
		{"q=glob", []string{"Globex"}},
		{"q=ext-acme", []string{"other"}},
		{"q=nobody", nil},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			w := s.Admin("GET", "/admin/v1/keys?"+tt.query, admin, "")
			if w.Code != http.StatusOK {
				t.Fatalf("HTTP status %d: %s", w.Code, w.Body)
			}
			var rows []manage.ListedKey
			testkit.DecodeJSON(t, w, &rows)
			var names []string
			for _, k := range rows {
				names = append(names, k.Name)
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("found %q, want %q", names, tt.want)
			}
		})
	}
	t.Run("the next page keeps the search", func(t *testing.T) {
		w := s.Admin("GET", "/admin/v1/keys?q=acme&limit=1", admin, "")
		if link := w.Header().Get("Link"); !strings.Contains(link, "q=acme") {
			t.Fatalf("Link %q, want the next page with q=acme", link)
		}
	})
	for _, bad := range []string{"q=", "q=a&q=b", "q=" + strings.Repeat("x", 256), "q=%07"} {
		if w := s.Admin("GET", "/admin/v1/keys?"+bad, admin, ""); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "q ") {
			t.Errorf("GET /admin/v1/keys?%.20s: %d %s, want 400 naming q", bad, w.Code, w.Body)
		}
	}
}

func TestKeyLimitsShowWhatTheKeyHasLeftAndSpendNothing(t *testing.T) {
	t.Parallel()
	servertest.ForEachLimiter(t, servertest.Options{}, func(t *testing.T, s *servertest.Server) {
		reader := s.MustCreateAdmin("support", domain.ScopeKeysRead)
		k, key := s.MustCreate(s.KeyTerms("enterprise", domain.Limits{PerMinute: 10, PerDay: 100}))
		for range 3 {
			if w := s.Do("GET", "/v1/pets", key, ""); w.Code != http.StatusOK {
				t.Fatalf("GET /v1/pets: %d %s", w.Code, w.Body)
			}
		}
		target := fmt.Sprintf("/admin/v1/keys/%d/limits", k.ID)
		var status struct {
			Plan   string   `json:"plan"`
			Scopes []string `json:"scopes"`
			Minute struct{ Limit, Remaining, Reset int64 }
			Day    struct{ Limit, Remaining, Reset int64 }
		}
		for range 3 { // asked three times, the same: nothing spent
			w := s.Admin("GET", target, reader, "")
			if w.Code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", target, w.Code, w.Body)
			}
			testkit.DecodeJSON(t, w, &status)
			if status.Plan != "enterprise" || status.Minute.Limit != 10 || status.Minute.Remaining != 7 ||
				status.Day.Limit != 100 || status.Day.Remaining != 97 || len(status.Scopes) != 2 {
				t.Fatalf("limits = %+v, want enterprise, 7 of 10 this minute and 97 of 100 today", status)
			}
		}
		// The key's own view agrees, and the admin's reads were not counted.
		w := s.Do("GET", "/v1/rate_limit", key, "")
		if !strings.Contains(w.Body.String(), `"remaining":7,`) || !strings.Contains(w.Body.String(), `"remaining":97,`) {
			t.Errorf("GET /v1/rate_limit: %s, want 7 and 97 remaining as the admin saw", w.Body)
		}
		s.FlushUsage()
		rows, err := manage.KeyUsage(t.Context(), s.Store(), s.Env, k.ID, 1, s.Clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if rows[0].Allowed != 4 { // 3 pets and 1 rate_limit, none of the admin's
			t.Errorf("usage today counts %d allowed, want 4: the admin's reads are not the key's", rows[0].Allowed)
		}
	})
}

func TestABannedKeyShowsItsBanOnItsLimitsItsObjectAndTheList(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{})
	admin := s.MustCreateAdmin("portal", domain.AllAdminScopes)
	other, _ := s.MustCreate(s.KeyTerms("free"))
	k, key := s.MustCreate(s.KeyTerms("enterprise", domain.Limits{PerMinute: 1, PerDay: 100}))
	_, r, _ := s.Roll(k.ID, time.Hour)
	rolled := r.ID
	s.BanOf(key, 20) // not stored yet: the admin API stores it before it answers
	type ban struct {
		Subject      string
		Since, Until time.Time
	}
	var limits struct{ Ban *ban }
	var listed []struct {
		ID  int64
		Ban *ban
	}
	check := func(when string, banned bool) {
		t.Helper()
		for _, id := range []int64{k.ID, rolled} { // a roll's keys share their ban
			testkit.DecodeJSON(t, s.Admin("GET", fmt.Sprintf("/admin/v1/keys/%d/limits", id), admin, ""), &limits)
			if got := limits.Ban != nil; got != banned {
				t.Errorf("%s: key %d's limits say ban %+v, want banned %v", when, id, limits.Ban, banned)
			} else if banned && (limits.Ban.Subject != fmt.Sprintf("key:%d", k.ID) || !limits.Ban.Until.After(s.Clock.Now())) {
				t.Errorf("%s: key %d's ban is %+v, want key:%d until a time to come", when, id, *limits.Ban, k.ID)
			}
		}
		testkit.DecodeJSON(t, s.Admin("GET", "/admin/v1/keys", admin, ""), &listed)
		for _, row := range listed {
			want := banned && row.ID != other.ID
			if got := row.Ban != nil; got != want {
				t.Errorf("%s: the list shows key %d with ban %+v, want banned %v", when, row.ID, row.Ban, want)
			}
		}
	}
	check("banned", true)
	if w := s.Admin("DELETE", fmt.Sprintf("/admin/v1/bans/key:%d", k.ID), admin, ""); w.Code != http.StatusNoContent {
		t.Fatalf("lifting the ban: %d %s", w.Code, w.Body)
	}
	check("lifted", false)
}

func TestEveryAdminAnswerIsNeverStoredNorSharedWithAnotherOrigin(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{})
	admin := s.MustCreateAdmin("portal", domain.AllAdminScopes)
	for _, tt := range []struct{ method, target, token string }{
		{"GET", "/admin/v1/keys", admin},
		{"POST", "/admin/v1/keys", admin},
		{"GET", "/admin/v1/keys/999", admin},
		{"GET", "/admin/v1/whoami", ""},
		{"GET", "/admin/v1/openapi.yaml", ""},
		{"OPTIONS", "/admin/v1/keys", admin},
		{"GET", "/admin/v1/nothing", admin},
	} {
		w := s.Admin(tt.method, tt.target, tt.token, `{"plan":"free"}`, "Origin", "https://evil.example")
		if got := w.Header().Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s %s (%d): Cache-Control %q, want no-store", tt.method, tt.target, w.Code, got)
		}
		if got := w.Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s (%d): X-Content-Type-Options %q, want nosniff", tt.method, tt.target, w.Code, got)
		}
		for name := range w.Header() {
			if strings.HasPrefix(name, "Access-Control-") {
				t.Errorf("%s %s: %s sent", tt.method, tt.target, name)
			}
		}
	}
}
