package server

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"petstore/internal/adminapi"
	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/manage"
	"petstore/internal/testkit"
	"petstore/internal/webhook"
)

// keyExternalID is the externalId the admin API shows for key id ("" for
// none, as null).
func (s *testServer) keyExternalID(t *testing.T, admin string, id int64) string {
	t.Helper()
	var k manage.ListedKey
	testkit.DecodeJSON(t, s.admin("GET", "/admin/v1/keys/"+strconv.FormatInt(id, 10), admin, ""), &k)
	if k.ExternalID == nil {
		return ""
	}
	return *k.ExternalID
}

func TestPatchSetsChangesAndClearsAnExternalIDWithTheConflictOfCreate(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, opts testOptions) {
		s := newTestServerWith(t, opts)
		admin := s.mustCreateAdmin("portal", domain.AllAdminScopes)
		var a, b adminapi.CreatedKey
		testkit.DecodeJSON(t, s.admin("POST", "/admin/v1/keys", admin, `{"plan":"free","externalId":"acct_1"}`), &a)
		testkit.DecodeJSON(t, s.admin("POST", "/admin/v1/keys", admin, `{"plan":"free"}`), &b)
		pathA, pathB := fmt.Sprintf("/admin/v1/keys/%d", a.ID), fmt.Sprintf("/admin/v1/keys/%d", b.ID)

		wantError(t, s.admin("PATCH", pathB, admin, `{"externalId":"acct_1"}`), 409, httpapi.CodeConflict, "acct_1", strconv.FormatInt(a.ID, 10))
		if got := s.keyExternalID(t, admin, b.ID); got != "" {
			t.Errorf("a refused PATCH left externalId %q", got)
		}
		steps := []struct {
			path, body string
			key        int64
			want       string
		}{
			{pathB, `{"externalId":"acct_2"}`, b.ID, "acct_2"},
			{pathB, `{"externalId":"acct_2","name":"same id again"}`, b.ID, "acct_2"}, // its own: no conflict
			{pathA, `{"externalId":null}`, a.ID, ""},
			{pathB, `{"externalId":"acct_1"}`, b.ID, "acct_1"}, // let go by a: free
			{pathB, `{"externalId":""}`, b.ID, ""},
			{pathA, `{"plan":"pro"}`, a.ID, ""}, // not given: kept
		}
		for _, st := range steps {
			w := s.admin("PATCH", st.path, admin, st.body)
			if w.Code != 200 {
				t.Fatalf("PATCH %s %s: HTTP status %d; body: %s", st.path, st.body, w.Code, w.Body)
			}
			if got := s.keyExternalID(t, admin, st.key); got != st.want {
				t.Errorf("after PATCH %s %s: externalId %q, want %q", st.path, st.body, got, st.want)
			}
		}
		var events []manage.AuditJSON
		testkit.DecodeJSON(t, s.admin("GET", fmt.Sprintf("/admin/v1/audit?action=key.updated&key=%d", a.ID), admin, ""), &events)
		found := false
		for _, e := range events {
			found = found || (e.Details.Before != nil && e.Details.Before.ExternalID == "acct_1" && e.Details.After.ExternalID == "")
		}
		if !found {
			t.Errorf("no key.updated event of key %d from externalId acct_1 to none: %+v", a.ID, events)
		}
	})
}

// encoding/json turns bytes that are not UTF-8, and lone surrogates, into
// U+FFFD without a word: a key's name and externalId refuse it, as a pet's
// name does on /v1, rather than keep a character nobody sent.
func TestNamesAndExternalIDsThatAreNotUTF8AreRefused(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	admin := s.mustCreateAdmin("portal", domain.AllAdminScopes)
	k, _ := s.mustCreate(s.keyTerms("free"))
	path := "/admin/v1/keys/" + strconv.FormatInt(k.ID, 10)
	for _, c := range []struct{ name, text string }{
		{"an invalid byte", `"caf` + "\xe9" + `"`},
		{"a lone surrogate", `"caf\ud800"`},
		{"U+FFFD", `"caf\ufffd"`},
	} {
		for _, field := range []string{"name", "externalId"} {
			t.Run(c.name+" in "+field, func(t *testing.T) {
				body := `{"` + field + `":` + c.text + `}`
				wantError(t, s.admin("POST", "/admin/v1/keys", admin, `{"plan":"free",`+body[1:]), 400, httpapi.CodeInvalidRequest, field, "UTF-8")
				wantError(t, s.admin("PATCH", path, admin, body), 400, httpapi.CodeInvalidRequest, field, "UTF-8")
			})
		}
	}
	var got manage.ListedKey
	testkit.DecodeJSON(t, s.admin("GET", path, admin, ""), &got)
	if got.Name != "test" || got.ExternalID != nil {
		t.Errorf("the key after the refusals: name %q, externalId %v", got.Name, got.ExternalID)
	}
	if keys, _ := s.store.Keys(context.Background()); len(keys) != 1 {
		t.Errorf("%d keys after the refused creates, want 1", len(keys))
	}
}

// An externalId is shown in lists, kept in the append-only trail and sent in
// key.* webhooks: one that holds a key or a token is refused, as a name is.
func TestAnExternalIDHoldingAKeyOrTokenIsRefused(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	admin := s.mustCreateAdmin("portal", domain.AllAdminScopes)
	k, _ := s.mustCreate(s.keyTerms("free"))
	path := "/admin/v1/keys/" + strconv.FormatInt(k.ID, 10)
	before, err := s.store.AuditCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{
		"a live key":          domain.NewKeyToken("production"),
		"a staging key":       domain.NewKeyToken("staging"),
		"an admin token":      domain.NewSecret(domain.AdminPrefixes["production"]),
		"a key inside a text": "customer " + domain.NewKeyToken("production") + " (pasted)",
		"a key's prefix":      "psk_live_",
	}
	for name, v := range values {
		body := `{"externalId":` + strconv.Quote(v) + `}`
		t.Run(name+" on create", func(t *testing.T) {
			wantError(t, s.admin("POST", "/admin/v1/keys", admin, `{"plan":"free",`+body[1:]), 400, httpapi.CodeInvalidRequest,
				"externalId must not hold an API key or admin token")
		})
		t.Run(name+" on PATCH", func(t *testing.T) {
			wantError(t, s.admin("PATCH", path, admin, body), 400, httpapi.CodeInvalidRequest, "externalId must not hold an API key or admin token")
		})
		t.Run(name+" on the command line", func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "keys.db")
			for _, args := range [][]string{
				{"keys", "create", "--db", db, "--plan", "free", "--external-id", v},
				{"keys", "update", "--db", db, "1", "--external-id", v},
			} {
				res := viaCLI(t, nil, args...)
				wantFailure(t, res, 2)
				if !strings.Contains(res.stderr, "--external-id must not hold an API key or admin token") {
					t.Errorf("%s: %q does not name the rule", args[:2], res.stderr)
				}
			}
		})
	}
	after, err := s.store.AuditCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(before) != fmt.Sprint(after) || s.keyExternalID(t, admin, k.ID) != "" {
		t.Errorf("a refused externalId wrote something: events %v then %v", before, after)
	}
}

// TestNamesAndExternalIDsRefuseEveryLookAlikeOfASecretOfThisDatabase: a
// key's or admin token's body and a webhook secret of this database are
// refused in a key's name and externalId (admin API and commands) and in
// an admin token's name, however they are written: with the prefix in
// another case or with other separators, bare, fullwidth, split, inside a
// text. The refusal names the field and never the secret; a name that only
// resembles one is taken.
func TestNamesAndExternalIDsRefuseEveryLookAlikeOfASecretOfThisDatabase(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, opts testOptions) {
		s := newTestServerWith(t, opts)
		admin := s.mustCreateAdmin("portal", domain.AllAdminScopes)
		k, key := s.mustCreate(s.keyTerms("free"))
		body := strings.TrimPrefix(key, "psk_live_")
		adminBody := strings.TrimPrefix(admin, "psa_live_")
		terms, err := manage.NewEndpointTerms("https://hooks.example.com/in", nil)
		if err != nil {
			t.Fatal(err)
		}
		e, err := s.store.AddWebhookEndpoint(t.Context(), terms, testActor, "production")
		if err != nil {
			t.Fatal(err)
		}
		previous := e.Secret
		rotated, err := s.store.RotateWebhookSecret(t.Context(), e.ID, webhook.NewSecret(), time.Hour, testActor, "production")
		if err != nil {
			t.Fatal(err)
		}
		secret := rotated.Secret
		b64 := strings.TrimPrefix(secret, "whsec_")
		lookAlikes := map[string]string{
			"the key":                           key,
			"PSK_LIVE_ and the body":            "PSK_LIVE_" + body,
			"Psk_live_ and the body":            "Psk_live_" + body,
			"the bare body":                     body,
			"live_ and the body":                "live_" + body,
			"psk-live- and the body":            "psk-live-" + body,
			"a fullwidth underscore":            "psk\uff3flive\uff3f" + body,
			"the body in fullwidth letters":     testkit.Fullwidth(body),
			"the body glued to the prefix":      "psklive" + body,
			"the body split by dashes":          body[:10] + "-" + body[10:20] + "-" + body[20:],
			"the body inside a text":            "acct " + body + " (pasted)",
			"the admin token's body":            adminBody,
			"PSA.LIVE. and the admin body":      "PSA.LIVE." + adminBody,
			"the webhook secret":                secret,
			"the webhook secret without whsec_": b64,
			"WHSEC_ and the webhook secret":     "WHSEC_" + b64,
			"the webhook secret in base64url":   strings.NewReplacer("+", "-", "/", "_").Replace(b64),
			"the previous webhook secret":       strings.TrimPrefix(previous, "whsec_"),
		}
		other := func(c byte) string { // another base62 character than c
			if c == '0' {
				return "1"
			}
			return "0"
		}
		changed := body[:len(body)-1] + other(body[len(body)-1]) // the checksum's last character
		resembling := map[string]string{
			"a key's body with one character changed":     changed,
			"live_ and that body":                         "live_" + changed,
			"a webhook secret with one character changed": b64[:20] + other(b64[20]) + b64[21:],
			"PSK rotation notes":                          "PSK rotation notes",
			"a pre-shared key's owner":                    "pre-shared key (PSK) owner",
			"whsec on its own":                            "whsec",
			"live and test":                               "live_test_bot",
		}
		path := "/admin/v1/keys/" + strconv.FormatInt(k.ID, 10)
		before, err := s.store.AuditCounts(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range lookAlikes {
			t.Run(name, func(t *testing.T) {
				for _, w := range []*httptest.ResponseRecorder{
					s.admin("POST", "/admin/v1/keys", admin, `{"plan":"free","name":`+strconv.Quote(v)+`}`),
					s.admin("POST", "/admin/v1/keys", admin, `{"plan":"free","externalId":`+strconv.Quote(v)+`}`),
					s.admin("PATCH", path, admin, `{"name":`+strconv.Quote(v)+`}`),
					s.admin("PATCH", path, admin, `{"externalId":`+strconv.Quote(v)+`}`),
				} {
					wantError(t, w, 400, httpapi.CodeInvalidRequest, "must not hold an API key or admin token")
					if strings.Contains(w.Body.String(), body[10:30]) || strings.Contains(w.Body.String(), b64[10:30]) {
						t.Fatalf("the refusal echoes the secret: %s", w.Body)
					}
				}
				for _, args := range [][]string{
					{"keys", "create", "--db", s.dbPath, "--plan", "free", "--name", v},
					{"keys", "update", "--db", s.dbPath, strconv.FormatInt(k.ID, 10), "--external-id", v},
					{"admin", "create", "--db", s.dbPath, "--name", v},
				} {
					res := viaCLI(t, nil, args...)
					wantFailure(t, res, 2)
					if !strings.Contains(res.stderr, "must not hold an API key or admin token") || strings.Contains(res.stderr, body[10:30]) {
						t.Errorf("%s: %q", args[:2], res.stderr)
					}
				}
			})
		}
		if after, err := s.store.AuditCounts(t.Context()); err != nil || fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("refused look-alikes wrote something: events %v then %v (%v)", before, after, err)
		}
		for name, v := range resembling {
			t.Run("taken: "+name, func(t *testing.T) {
				if w := s.admin("PATCH", path, admin, `{"name":`+strconv.Quote(v)+`,"externalId":`+strconv.Quote(v)+`}`); w.Code != 200 {
					t.Fatalf("PATCH: %d %s", w.Code, w.Body)
				}
			})
		}
	})
}
