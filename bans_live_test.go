package main

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"petstore/internal/servertest"
	"petstore/internal/testkit"
)

// A ban a running server made itself, lifted while it runs: through the
// admin API, then through bans lift from another process, on every set-up.

// servedWithinASecond runs lift, then waits for s to serve key again, which
// it must within a second of the lift. The burst that banned the key
// emptied its bucket, so it first waits for one token (500 ms at 120 a
// minute): then only the ban stands between the key and a 200, and the
// polling below never asks while told to wait, which --ban-after 2 would
// punish with a new ban before a lift that takes a few hundred
// milliseconds to reach a server on PostgreSQL.
func servedWithinASecond(t *testing.T, s *testkit.Petstore, key, how string, lift func()) {
	t.Helper()
	time.Sleep(600 * time.Millisecond)
	lift()
	testkit.Eventually(t, time.Second, "key served again after the lift "+how, func() bool {
		resp, _ := s.Request("GET", "/v1/pets", key, "")
		return resp.StatusCode == http.StatusOK
	})
}

func TestALiveBanIsLiftedWithinASecondWithoutARestart(t *testing.T) {
	t.Parallel()
	redisServer, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("needs redis-server on the PATH")
	}
	for _, setup := range []struct {
		name            string
		postgres, redis bool
	}{
		{"sqlite, limits in process", false, false},
		{"sqlite and redis", false, true},
		{"postgres and redis", true, true},
	} {
		t.Run(setup.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db := servertest.Options{Postgres: setup.postgres}.DBAt(t, filepath.Join(dir, "petstore.db"))
			// 120 a minute: banned after a burst, and served again within
			// half a second of a lift, as the bucket refills.
			key := mustCreateKeyCLI(t, viaBinary, "--db", db, "--plan", "enterprise", "--rpm", "120", "--rpd", "100000", "--name", "banned")
			subject := "key:" + strconv.FormatInt(keyIDByName(t, db, "banned"), 10)
			token := strings.TrimSpace(petstoreCmd(t, "admin", "create", "--db", db, "--name", "portal").Stdout)
			args := []string{"serve", "--db", db, "--admin-addr", "127.0.0.1:0", "--ban-after", "2"}
			if setup.redis {
				args = append(args, "--redis", startRedisProcess(t, redisServer).url) // its own: key ids repeat across SQLite files
			}
			server := startPetstore(t, dir, args...)
			server.KeysSent = append(server.KeysSent, token)
			adminAt := testkit.AdminServing.FindStringSubmatch(server.Stderr.String())
			if adminAt == nil {
				t.Fatalf("no admin= address on the serving line:\n%s", server.Stderr)
			}

			// At once: the ban is listed and lifted as soon as it is refused.
			bans := "http://" + adminAt[1] + "/admin/v1/bans"
			banKey(t, server, key)
			if resp, body := testkit.Fetch(t, server.Client, "GET", bans, token, ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"`+subject+`"`) {
				t.Fatalf("GET /admin/v1/bans just after the ban: %d %s, want %s listed", resp.StatusCode, body, subject)
			}
			servedWithinASecond(t, server, key, "over the admin API", func() {
				if resp, body := testkit.Fetch(t, server.Client, "DELETE", bans+"/"+subject, token, ""); resp.StatusCode != http.StatusNoContent {
					t.Fatalf("DELETE /admin/v1/bans/%s just after the ban: %d %s, want 204", subject, resp.StatusCode, body)
				}
			})

			// Another process sees it stored within a second, not only with
			// the usage every 2 seconds.
			banKey(t, server, key)
			testkit.Eventually(t, time.Second, "bans list shows "+subject, func() bool {
				return slices.ContainsFunc(listBans(t, db), func(b map[string]any) bool { return b["subject"] == subject })
			})
			servedWithinASecond(t, server, key, "by bans lift", func() {
				if res := petstoreCmd(t, "bans", "lift", "--db", db, subject); res.Code != 0 {
					t.Fatalf("bans lift %s: exit status %d: %s", subject, res.Code, res.Stderr)
				}
			})
		})
	}
}

// A ban the server answered from Redis holds on that server while Redis is
// away just after, before the ban is stored: 40 of the key's requests in
// the outage, none let through.
func TestAFreshBanHoldsWhenRedisGoesAwayAtOnce(t *testing.T) {
	t.Parallel()
	redisServer, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("needs redis-server on the PATH")
	}
	proxy, redisURL := testkit.FaultProxyTo(t, startRedisProcess(t, redisServer).url)
	dir := t.TempDir()
	db := filepath.Join(dir, "petstore.db")
	key := mustCreateKeyCLI(t, viaBinary, "--db", db, "--plan", "enterprise", "--rpm", "120", "--rpd", "100000", "--name", "banned")
	server := startPetstore(t, dir, "serve", "--db", db, "--redis", redisURL, "--ban-after", "2")
	banKey(t, server, key)
	time.Sleep(300 * time.Millisecond)
	proxy.Set("drop") // for a second: long before the ban is stored (2 s) and read back
	passed := 0
	for range 40 {
		if resp, body := server.Request("GET", "/v1/pets", key, ""); !banned(resp.StatusCode, body) {
			passed++
		}
		time.Sleep(25 * time.Millisecond)
	}
	proxy.Set("pass")
	if passed != 0 {
		t.Errorf("%d of the banned key's 40 requests were not refused for its ban while Redis was away", passed)
	}
	if !strings.Contains(server.Stderr.String(), "Redis does not answer") {
		t.Errorf("the server never limited on its own: the outage was not met\n%s", server.Stderr)
	}
}
