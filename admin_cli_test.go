package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"petstore/internal/adminapi"
	"petstore/internal/domain"
	"petstore/internal/keyring"
	"petstore/internal/limits"
	"petstore/internal/manage"
	"petstore/internal/servertest"
	"petstore/internal/store"
	"petstore/internal/testkit"
)

// cliJSON runs a command that prints JSON and decodes it into v.
func cliJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	res := viaRun(t, nil, args...)
	if res.Code != 0 {
		t.Fatalf("%s: exit status %d\n%s", strings.Join(args, " "), res.Code, res.Stderr)
	}
	if err := json.Unmarshal([]byte(res.Stdout), v); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, res.Stdout)
	}
}

func TestAdminCommands(t *testing.T) {
	t.Parallel()
	servertest.EachStoreInDir(t, func(t *testing.T, dir, db string) {
		res := viaRun(t, nil, "admin", "create", "--db", db, "--name", "portal", "--scope", "keys:read,audit:read")
		if res.Code != 0 {
			t.Fatalf("admin create: exit status %d\n%s", res.Code, res.Stderr)
		}
		token := strings.TrimSpace(res.Stdout)
		if strings.Count(res.Stdout, "\n") != 1 || len(token) != len("psa_live_")+domain.KeyRandomLen+domain.KeyChecksumLen ||
			keyring.SecretProblem(token, "production", domain.AdminPrefixes).Reason != 0 {
			t.Errorf("admin create printed %q, want one psa_live_ token alone", res.Stdout)
		}
		if strings.Contains(res.Stderr, token) {
			t.Error("admin create printed the token on standard error too")
		}

		var tokens []domain.ListedAdminToken
		cliJSON(t, &tokens, "admin", "list", "--db", db, "--json")
		if len(tokens) != 1 || tokens[0].Name != "portal" || strings.Join(tokens[0].Scopes, ",") != "keys:read,audit:read" || tokens[0].Revoked != nil {
			t.Errorf("admin list: %+v", tokens)
		}
		if list := viaRun(t, nil, "admin", "list", "--db", db); !strings.Contains(list.Stdout, "portal") || strings.Contains(list.Stdout, "psa_") {
			t.Errorf("admin list:\n%s", list.Stdout)
		}

		id := strconv.FormatInt(tokens[0].ID, 10)
		if res := viaRun(t, nil, "admin", "revoke", "--db", db, id); res.Code != 0 || !strings.Contains(res.Stdout, "revoked admin token "+id) {
			t.Errorf("admin revoke: exit status %d, %q", res.Code, res.Stdout+res.Stderr)
		}
		if res := viaRun(t, nil, "admin", "revoke", "--db", db, id); res.Code != 0 || !strings.Contains(res.Stdout, "revoked already") {
			t.Errorf("admin revoke again: %q", res.Stdout)
		}
		var events []manage.AuditJSON
		cliJSON(t, &events, "audit", "--db", db, "--json")
		if len(events) != 2 || events[0].Action != domain.AuditAdminCreated || events[1].Action != domain.AuditAdminRevoked ||
			events[1].Details.AdminID != tokens[0].ID {
			t.Errorf("audit: %+v", events)
		}
		if audit := viaRun(t, nil, "audit", "--db", db); strings.Contains(audit.Stdout, token[len("psa_live_"):]) {
			t.Errorf("the audit trail holds the token:\n%s", audit.Stdout)
		}

		for _, bad := range [][]string{
			{"admin", "create", "--db", db},
			{"admin", "create", "--db", db, "--name", "x", "--scope", "pets:read"},
			{"admin", "create", "--db", db, "--name", "a\tb"},
			{"admin", "revoke", "--db", db, "abc"},
			{"admin", "frobnicate"},
		} {
			wantFailure(t, viaRun(t, nil, bad...), 2)
		}
		wantFailure(t, viaRun(t, nil, "admin", "revoke", "--db", db, "99"), 1)
	})
}

func TestKeysUpdateChangesAKeyInPlace(t *testing.T) {
	t.Parallel()
	servertest.EachStoreInDir(t, func(t *testing.T, dir, db string) {
		mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", "free", "--name", "acme")
		id := keyIDByNameVia(t, viaRun, db, "acme")
		res := viaRun(t, nil, "keys", "update", "--db", db, strconv.FormatInt(id, 10), "--plan", "enterprise", "--rpm", "500", "--rpd", "9000", "--name", "acme-ent", "--expires", "30d")
		if res.Code != 0 {
			t.Fatalf("keys update: exit status %d\n%s", res.Code, res.Stderr)
		}
		k := listKeysJSON(t, viaRun, db)[0]
		if k.Plan != "enterprise" || k.PerMinute != 500 || k.PerDay != 9000 || k.Name != "acme-ent" || k.Expires == nil {
			t.Errorf("after keys update: %+v", k)
		}
		if res := viaRun(t, nil, "keys", "update", "--db", db, strconv.FormatInt(id, 10), "--expires", "never"); res.Code != 0 {
			t.Fatalf("keys update --expires never: %s", res.Stderr)
		}
		if k := listKeysJSON(t, viaRun, db)[0]; k.Expires != nil {
			t.Errorf("expires %v after --expires never", k.Expires)
		}
		var events []manage.AuditJSON
		cliJSON(t, &events, "audit", "--db", db, "--action", domain.AuditKeyUpdated, "--json")
		if len(events) != 2 || events[0].Details.Before.Plan != "free" || events[0].Details.After.PerMinute != 500 {
			t.Errorf("key.updated events: %+v", events)
		}
		for _, bad := range [][]string{
			{"keys", "update", "--db", db, strconv.FormatInt(id, 10)},
			{"keys", "update", "--db", db, strconv.FormatInt(id, 10), "--plan", "gold"},
			{"keys", "update", "--db", db, strconv.FormatInt(id, 10), "--plan", "pro", "--rpm", "5"},
			{"keys", "update", "--db", db, "--plan", "pro"},
		} {
			wantFailure(t, viaRun(t, nil, bad...), 2)
		}
	})
}

func TestKeysListReportsIdleAndExpiringKeys(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "keys.db")
	mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", "free", "--name", "soon", "--expires", "3d")
	mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", "free", "--name", "later", "--expires", "30d")
	mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", "free", "--name", "never")
	names := func(args ...string) string {
		t.Helper()
		var keys []manage.ListedKey
		cliJSON(t, &keys, append([]string{"keys", "list", "--db", db, "--json"}, args...)...)
		var n []string
		for _, k := range keys {
			n = append(n, k.Name)
		}
		return strings.Join(n, ",")
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--expiring", "7d"}, "soon"},
		{[]string{"--expiring", "60d"}, "soon,later"},
		{[]string{"--idle", "30d"}, ""},                 // all made just now
		{[]string{"--idle", "1ns"}, "soon,later,never"}, // made a moment ago: idle since
		{[]string{"--idle", "1ns", "--expiring", "7d"}, "soon"},
	} {
		if got := names(tt.args...); got != tt.want {
			t.Errorf("keys list %v: %q, want %q", tt.args, got, tt.want)
		}
	}
	if table := viaRun(t, nil, "keys", "list", "--db", db, "--expiring", "7d"); strings.Count(table.Stdout, "\n") != 2 || !strings.Contains(table.Stdout, "soon") {
		t.Errorf("keys list --expiring 7d as a table:\n%s", table.Stdout)
	}
	for _, bad := range []string{"yesterday", "0", "-1d", ""} {
		wantFailure(t, viaRun(t, nil, "keys", "list", "--db", db, "--idle", bad), 2)
	}
}

// TestAnOperatorSession is what an operator does with the built binary: a
// token from the CLI, keys made, upgraded, rolled and revoked over HTTP on
// the admin listener, and the usage rows of what was sent.
func TestAnOperatorSession(t *testing.T) {
	t.Parallel()
	servertest.EachStoreInDir(t, func(t *testing.T, dir, db string) {
		res := viaBinary(t, nil, "admin", "create", "--db", db, "--name", "portal")
		if res.Code != 0 {
			t.Fatalf("admin create: %s", res.Stderr)
		}
		token := strings.TrimSpace(res.Stdout)
		p := startPetstore(t, dir, "--db", db, "--admin-addr", "127.0.0.1:0")
		p.KeysSent = append(p.KeysSent, token) // never in a log line either
		adminAt := testkit.AdminServing.FindStringSubmatch(p.Stderr.String())
		if adminAt == nil {
			t.Fatalf("no admin= address on the serving line:\n%s", p.Stderr)
		}
		adminAPI := "http://" + adminAt[1] + "/admin/v1"
		call := func(method, url, body string, want int) []byte {
			t.Helper()
			req, _ := http.NewRequest(method, url, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := p.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != want {
				t.Fatalf("%s %s: HTTP status %d, want %d; body: %s", method, url, resp.StatusCode, want, b)
			}
			return b
		}
		var k adminapi.CreatedKey
		if err := json.Unmarshal(call("POST", adminAPI+"/keys", `{"plan":"free","name":"acme"}`, 201), &k); err != nil {
			t.Fatal(err)
		}
		p.KeysSent = append(p.KeysSent, k.Key)
		for range 3 {
			p.WantStatus("GET", "/v1/pets", k.Key, "", 200)
		}
		p.WantStatus("POST", "/v1/pets", k.Key, `{"name":"Rex","categoryId":1}`, 201)
		keyPath := adminAPI + "/keys/" + strconv.FormatInt(k.ID, 10)
		call("PATCH", keyPath, `{"plan":"pro"}`, 200)
		// Within a second the server applies the upgrade. Polled every 50 ms,
		// not as fast as testkit.Eventually: the polls count in the usage
		// checked below.
		deadline := time.Now().Add(time.Second)
		for {
			resp, _ := p.WantStatus("GET", "/v1/pets", k.Key, "", 200)
			if resp.Header.Get("X-RateLimit-Limit") == "300" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the upgrade did not reach the server within a second")
			}
			time.Sleep(50 * time.Millisecond)
		}
		var rolled adminapi.CreatedKey
		if err := json.Unmarshal(call("POST", keyPath+"/roll", `{"overlap":"0"}`, 201), &rolled); err != nil {
			t.Fatal(err)
		}
		p.KeysSent = append(p.KeysSent, rolled.Key)
		call("POST", adminAPI+"/keys/"+strconv.FormatInt(rolled.ID, 10)+"/revoke", "", 200)
		deadline = time.Now().Add(time.Second)
		for {
			resp, _ := p.Request("GET", "/v1/pets", rolled.Key, "")
			if resp.StatusCode == 401 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the revocation did not reach the server within a second")
			}
			time.Sleep(50 * time.Millisecond)
		}
		// The usage rows: every request the key sent, once the server has
		// written them (every 2 seconds).
		var sent int64
		testkit.Eventually(t, 5*time.Second, "the usage rows count the requests sent", func() bool {
			var rows []domain.UsageDay
			if err := json.Unmarshal(call("GET", keyPath+"/usage?days=1", "", 200), &rows); err != nil {
				t.Fatal(err)
			}
			if len(rows) == 1 && rows[0].Allowed >= 4 {
				sent = rows[0].Allowed
			}
			return sent != 0
		})
		if sent < 5 || sent > 25 { // 3 GETs, a create, and the polls of the upgrade
			t.Errorf("allowed %d", sent)
		}
	})
}

func TestUsageCommandShowsEachDayOldestFirst(t *testing.T) {
	t.Parallel()
	servertest.EachStoreInDir(t, func(t *testing.T, dir, db string) {
		mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", "free", "--name", "acme")
		id := keyIDByNameVia(t, viaRun, db, "acme")
		store, err := store.Open(context.Background(), db, false, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		today := time.Now().UTC()
		yesterday := limits.DayString(limits.UnixDay(today) - 1)
		if err := store.AddUsageHistory(context.Background(), []domain.UsageDay{
			{BudgetID: id, Day: yesterday, Allowed: 7, RateLimited: 2, QuotaExceeded: 1, Banned: 3, Forbidden: 4, Batch: domain.Batch{Stream: "test", N: 1}},
		}); err != nil {
			t.Fatal(err)
		}
		store.Close()

		var rows []domain.UsageDay
		cliJSON(t, &rows, "usage", "--db", db, "--key", strconv.FormatInt(id, 10), "--days", "3", "--json")
		want := []domain.UsageDay{
			{Day: limits.DayString(limits.UnixDay(today) - 2)},
			{Day: yesterday, Allowed: 7, RateLimited: 2, QuotaExceeded: 1, Banned: 3, Forbidden: 4},
			{Day: today.Format(time.DateOnly)},
		}
		if !slices.Equal(rows, want) {
			t.Errorf("usage --json: %+v, want %+v", rows, want)
		}
		table := viaRun(t, nil, "usage", "--db", db, "--key", strconv.FormatInt(id, 10), "--days", "2")
		if lines := strings.Split(strings.TrimSpace(table.Stdout), "\n"); len(lines) != 3 ||
			!strings.HasPrefix(lines[0], "DAY") || strings.Join(strings.Fields(lines[1]), " ") != yesterday+" 7 2 1 3 4" {
			t.Errorf("usage as a table:\n%s", table.Stdout)
		}
		wantFailure(t, viaRun(t, nil, "usage", "--db", db), 2)
		wantFailure(t, viaRun(t, nil, "usage", "--db", db, "--key", "1", "--days", "0"), 2)
		wantFailure(t, viaRun(t, nil, "usage", "--db", db, "--key", "99"), 1)
	})
}
