package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"petstore/internal/adminapi"
	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/manage"
)

// keyExternalID is the externalId the admin API shows for key id ("" for
// none, as null).
func (s *testServer) keyExternalID(t *testing.T, admin string, id int64) string {
	t.Helper()
	var k manage.ListedKey
	decodeJSON(t, s.admin("GET", "/admin/v1/keys/"+strconv.FormatInt(id, 10), admin, ""), &k)
	if k.ExternalID == nil {
		return ""
	}
	return *k.ExternalID
}

func TestPatchSetsChangesAndClearsAnExternalIDWithTheConflictOfCreate(t *testing.T) {
	eachStore(t, func(t *testing.T, opts testOptions) {
		s := newTestServerWith(t, opts)
		admin := s.mustCreateAdmin("portal", domain.AllAdminScopes)
		var a, b adminapi.CreatedKey
		decodeJSON(t, s.admin("POST", "/admin/v1/keys", admin, `{"plan":"free","externalId":"acct_1"}`), &a)
		decodeJSON(t, s.admin("POST", "/admin/v1/keys", admin, `{"plan":"free"}`), &b)
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
		decodeJSON(t, s.admin("GET", fmt.Sprintf("/admin/v1/audit?action=key.updated&key=%d", a.ID), admin, ""), &events)
		found := false
		for _, e := range events {
			found = found || (e.Details.Before != nil && e.Details.Before.ExternalID == "acct_1" && e.Details.After.ExternalID == "")
		}
		if !found {
			t.Errorf("no key.updated event of key %d from externalId acct_1 to none: %+v", a.ID, events)
		}
	})
}

// An externalId is shown in lists, kept in the append-only trail and sent in
// key.* webhooks: one that holds a key or a token is refused, as a name is.
func TestAnExternalIDHoldingAKeyOrTokenIsRefused(t *testing.T) {
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
				res := viaRun(t, nil, args...)
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

func TestKeysCreateAndUpdateSetAndClearAnExternalID(t *testing.T) {
	eachStore(t, func(t *testing.T, opts testOptions) {
		db := opts.dbAt(t, filepath.Join(t.TempDir(), "keys.db"))
		mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", "free", "--external-id", "acct_1")
		mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", "free")
		externalIDs := func() string {
			var ids []string
			for _, k := range listKeysJSON(t, viaRun, db) {
				id := ""
				if k.ExternalID != nil {
					id = *k.ExternalID
				}
				ids = append(ids, fmt.Sprintf("%d=%s", k.ID, id))
			}
			return strings.Join(ids, " ")
		}
		if got := externalIDs(); got != "1=acct_1 2=" {
			t.Fatalf("keys list after keys create: %s, want 1=acct_1 2=", got)
		}
		res := viaRun(t, nil, "keys", "create", "--db", db, "--plan", "free", "--external-id", "acct_1")
		wantFailure(t, res, 1)
		if !strings.Contains(res.stderr, `externalId "acct_1" belongs to key 1 already`) {
			t.Errorf("keys create with a taken externalId: %q", res.stderr)
		}
		steps := []struct {
			args []string
			code int
			want string
		}{
			{[]string{"2", "--external-id", "acct_1"}, 1, "1=acct_1 2="},
			{[]string{"2", "--external-id", "acct_2"}, 0, "1=acct_1 2=acct_2"},
			{[]string{"1", "--external-id", ""}, 0, "1= 2=acct_2"},
			{[]string{"2", "--external-id", "acct_1", "--name", "moved"}, 0, "1= 2=acct_1"},
			{[]string{"2", "--external-id", "caf\xe9"}, 2, "1= 2=acct_1"},
		}
		for _, st := range steps {
			res := viaRun(t, nil, append([]string{"keys", "update", "--db", db}, st.args...)...)
			if res.code != st.code {
				t.Errorf("keys update %q: exit status %d, want %d\n%s", st.args, res.code, st.code, res.stderr)
			}
			if got := externalIDs(); got != st.want {
				t.Errorf("after keys update %q: %s, want %s", st.args, got, st.want)
			}
		}
	})
}

// encoding/json turns bytes that are not UTF-8, and lone surrogates, into
// U+FFFD without a word: a key's name and externalId refuse it, as a pet's
// name does on /v1, rather than keep a character nobody sent.
func TestNamesAndExternalIDsThatAreNotUTF8AreRefused(t *testing.T) {
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
	decodeJSON(t, s.admin("GET", path, admin, ""), &got)
	if got.Name != "test" || got.ExternalID != nil {
		t.Errorf("the key after the refusals: name %q, externalId %v", got.Name, got.ExternalID)
	}
	if keys, _ := s.store.Keys(context.Background()); len(keys) != 1 {
		t.Errorf("%d keys after the refused creates, want 1", len(keys))
	}
}
