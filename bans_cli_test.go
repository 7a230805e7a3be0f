package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"petstore/internal/httpapi"
	"petstore/internal/keyring"
	"petstore/internal/manage"
	"petstore/internal/testkit"

	"github.com/redis/go-redis/v9"
)

// Bans as an operator meets them: through the binary, real servers, real
// databases and a Redis that restarts.

// banned tells whether an answer is the 429 of a ban.
func banned(status int, body string) bool {
	return status == 429 && strings.Contains(body, httpapi.CodeTemporarilyBanned)
}

// banKey sends requests with key to s until one is refused for a ban: a
// ban the server decides live, held in its limiter (or its Redis). A key
// of many requests a minute takes a few hundred.
func banKey(t *testing.T, s *testkit.Petstore, key string) {
	t.Helper()
	for range 400 {
		if resp, body := s.Request("GET", "/v1/pets", key, ""); banned(resp.StatusCode, body) {
			return
		}
	}
	t.Fatal("no ban after 400 requests")
}

// banAddress sends requests without a key from addr (the servers trust
// X-Forwarded-For) to url until one is refused for a ban.
func banAddress(t *testing.T, url, addr string) {
	t.Helper()
	client := faultClient(1)
	defer client.CloseIdleConnections()
	for range 100 {
		if res := faultDo(client, "GET", url+"/v1/pets", "", "", "X-Forwarded-For", addr); banned(res.status, string(res.body)) {
			return
		}
	}
	t.Fatalf("no ban of %s after 100 requests", addr)
}

// listBans runs bans list --json.
func listBans(t *testing.T, db string) []map[string]any {
	t.Helper()
	res := petstoreCmd(t, "bans", "list", "--db", db, "--json")
	if res.Code != 0 {
		t.Fatalf("bans list --json: exit status %d: %s", res.Code, res.Stderr)
	}
	var bans []map[string]any
	if err := json.Unmarshal([]byte(res.Stdout), &bans); err != nil {
		t.Fatalf("bans list --json: %v\n%s", err, res.Stdout)
	}
	return bans
}

// waitStored waits until bans list shows each subject: the servers store
// bans within the usage batch's 2 s.
func waitStored(t *testing.T, db string, subjects ...string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, "bans list shows "+strings.Join(subjects, ", "), func() bool {
		bans := listBans(t, db)
		for _, subject := range subjects {
			if !slices.ContainsFunc(bans, func(b map[string]any) bool { return b["subject"] == subject }) {
				return false
			}
		}
		return true
	})
}

// liftedWithinASecond runs bans lift subject, and waits for check to hold
// on every server, which it must within a second.
func liftedWithinASecond(t *testing.T, db, subject string, check func() bool) {
	t.Helper()
	if res := petstoreCmd(t, "bans", "lift", "--db", db, subject); res.Code != 0 || !strings.Contains(res.Stdout, "lifted the ban of "+subject) {
		t.Fatalf("bans lift %s: exit status %d: %s%s", subject, res.Code, res.Stdout, res.Stderr)
	}
	testkit.Eventually(t, time.Second, "the lift of "+subject+" on every server", check)
}

func TestABanOnSQLiteSurvivesARestartAndALiftEndsItWithinASecond(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "petstore.db")
	key := mustCreateKeyCLI(t, viaBinary, "--db", db, "--plan", "enterprise", "--rpm", "1", "--rpd", "100", "--name", "banned")
	subject := "key:" + strconv.FormatInt(keyIDByName(t, db, "banned"), 10)
	server := startPetstore(t, dir, "serve", "--db", db)
	banKey(t, server, key)
	waitStored(t, db, subject)

	server.Kill9() // no shutdown: what holds the ban now is the database
	server = startPetstore(t, dir, "serve", "--db", db)
	resp, body := server.Request("GET", "/v1/pets", key, "")
	if retry, _ := strconv.Atoi(resp.Header.Get("Retry-After")); !banned(resp.StatusCode, body) || retry < 800 {
		t.Fatalf("after a restart: %d %s (Retry-After %d), want still banned, most of 15 minutes", resp.StatusCode, body, retry)
	}
	bans := listBans(t, db)
	if len(bans) != 1 || len(bans[0]) != 3 || bans[0]["subject"] != subject || bans[0]["since"] == nil || bans[0]["until"] == nil {
		t.Errorf("bans list --json: %v, want [{subject: %s, since, until}]", bans, subject)
	}
	if res := petstoreCmd(t, "bans", "list", "--db", db); !strings.HasPrefix(res.Stdout, "SUBJECT") || !strings.Contains(res.Stdout, subject) {
		t.Errorf("bans list:\n%s", res.Stdout)
	}

	liftedWithinASecond(t, db, subject, func() bool {
		resp, body := server.Request("GET", "/v1/pets", key, "")
		return !banned(resp.StatusCode, body)
	})
	wantFailure(t, petstoreCmd(t, "bans", "lift", "--db", db, subject), 1)
	if res := petstoreCmd(t, "bans", "lift", "--db", db, subject); !strings.Contains(res.Stderr, subject+" is not banned") {
		t.Errorf("a second lift said %q, want that %s is not banned", res.Stderr, subject)
	}
	for _, bad := range []string{"key:x", "13", "address:somewhere"} {
		res := petstoreCmd(t, "bans", "lift", "--db", db, bad)
		wantFailure(t, res, 2)
		if !strings.Contains(res.Stderr, strconv.Quote(bad)) {
			t.Errorf("bans lift %s said %q, want it to name the subject", bad, res.Stderr)
		}
	}
	res := petstoreCmd(t, "audit", "--db", db, "--action", "ban.lifted", "--json")
	var events []manage.AuditJSON
	if err := json.Unmarshal([]byte(res.Stdout), &events); err != nil || len(events) != 1 || events[0].KeyID == nil ||
		"key:"+strconv.FormatInt(*events[0].KeyID, 10) != subject {
		t.Errorf("audit --action ban.lifted: %v %s, want the one lift of %s", err, res.Stdout, subject)
	}
}

// Two servers on PostgreSQL and a Redis of the test's own: a key's ban and
// an IPv6 /64's outlive a restart of Redis, which has them again from the
// database, and a lift reaches both servers and Redis within a second.
func TestBansOnTwoServersSurviveARedisRestartAndALiftReachesBoth(t *testing.T) {
	t.Parallel()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("needs redis-server on the PATH")
	}
	rp := startRedisProcess(t, path)
	db, dir := testkit.ServerPostgresURL(t), t.TempDir()
	args := []string{"serve", "--db", db, "--redis", rp.url, "--trust-proxy", "--ban-after", "0"}
	servers := []*testkit.Petstore{startPetstore(t, dir, args...), startPetstore(t, dir, args...)}
	key := mustCreateKeyCLI(t, viaBinary, "--db", db, "--plan", "enterprise", "--rpm", "1", "--rpd", "100", "--name", "banned")
	keySubject := "key:" + strconv.FormatInt(keyIDByName(t, db, "banned"), 10)
	const addrSubject = "address:2001:db8:5:6::/64"
	banKey(t, servers[0], key)
	banAddress(t, servers[1].URL, "2001:db8:5:6::1")
	waitStored(t, db, keySubject, addrSubject)
	// Each server reads what changed in the bans table every
	// keyRefreshEvery: a Redis lost before then loses the ban.
	time.Sleep(2 * keyring.RefreshEvery)

	rp.stop()
	rp.start() // empty: it keeps nothing on disk
	client := faultClient(1)
	defer client.CloseIdleConnections()
	fromTheSlash64 := func(s *testkit.Petstore) faultResult {
		return faultDo(client, "GET", s.URL+"/v1/pets", "", "", "X-Forwarded-For", "2001:db8:5:6:ab::9")
	}
	redisBan := redisBanOf(t, rp.url, keySubject)
	// Each server comes back to Redis (within a probe interval) and
	// rebuilds the ban there from the database.
	testkit.Eventually(t, 5*time.Second, "the key's ban back in the restarted Redis", func() bool {
		for i, s := range servers {
			resp, body := s.Request("GET", "/v1/pets", key, "")
			if !banned(resp.StatusCode, body) {
				t.Fatalf("server %d after Redis restarted: %d %s, want the key still banned", i, resp.StatusCode, body)
			}
			if res := fromTheSlash64(s); !banned(res.status, string(res.body)) {
				t.Fatalf("server %d after Redis restarted: %d %s, want the /64 still banned", i, res.status, res.body)
			}
		}
		return redisBan() > time.Now().Add(10*time.Minute).UnixMilli()
	})

	liftedWithinASecond(t, db, keySubject, func() bool {
		for _, s := range servers {
			if resp, body := s.Request("GET", "/v1/pets", key, ""); banned(resp.StatusCode, body) {
				return false
			}
		}
		return redisBan() == 0
	})
	liftedWithinASecond(t, db, addrSubject, func() bool {
		for _, s := range servers {
			if res := fromTheSlash64(s); banned(res.status, string(res.body)) {
				return false
			}
		}
		return true
	})
	if bans := listBans(t, db); len(bans) != 0 {
		t.Errorf("bans list after both lifts: %v, want none", bans)
	}
}

// redisBanOf returns a look at the end (ms) of the ban of a key's subject
// in the Redis at url, which only this test uses: 0 for none.
func redisBanOf(t *testing.T, url, subject string) func() int64 {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opts)
	t.Cleanup(func() { client.Close() })
	pattern := "*:k:" + strings.TrimPrefix(subject, "key:") + "}:limit"
	return func() int64 {
		ctx := context.Background()
		keys, err := client.Keys(ctx, pattern).Result()
		if err != nil || len(keys) != 1 {
			return 0
		}
		bu, _ := client.HGet(ctx, keys[0], "bu").Int64()
		return bu
	}
}
