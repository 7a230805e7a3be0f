package main

// The command line of keys over their lifetime: keys create --expires, keys
// roll, and what keys list shows of them, run as a user runs them.

import (
	"io"
	"net/http"
	"path/filepath"
	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/servertest"
	"petstore/internal/testkit"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestKeysCreateExpires(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expires string
		want    func(now time.Time) time.Time
	}{
		{"2099-01-31T00:00:00Z", func(time.Time) time.Time { return time.Date(2099, 1, 31, 0, 0, 0, 0, time.UTC) }},
		{"2099-01-31T02:00:00+02:00", func(time.Time) time.Time { return time.Date(2099, 1, 31, 0, 0, 0, 0, time.UTC) }},
		{"90d", func(now time.Time) time.Time { return now.Add(90 * 24 * time.Hour) }},
		{"1d12h", func(now time.Time) time.Time { return now.Add(36 * time.Hour) }},
		{"12h", func(now time.Time) time.Time { return now.Add(12 * time.Hour) }},
		{"30m", func(now time.Time) time.Time { return now.Add(30 * time.Minute) }},
	}
	viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
		for _, tt := range tests {
			t.Run(tt.expires, func(t *testing.T) {
				db := filepath.Join(t.TempDir(), "keys.db")
				now := time.Now()
				mustCreateKeyCLI(t, petstore, "--db", db, "--plan", "free", "--expires", tt.expires)
				keys := listKeysJSON(t, petstore, db)
				if len(keys) != 1 || keys[0].Expires == nil {
					t.Fatalf("keys list: %+v, want one key with an expiry", keys)
				}
				if got, want := *keys[0].Expires, tt.want(now); got.Before(want.Add(-time.Second)) || got.After(want.Add(5*time.Second)) {
					t.Errorf("expires %v, want %v", got, want)
				}
				if keys[0].State != "active" {
					t.Errorf("state %q, want active", keys[0].State)
				}
			})
		}
		t.Run("PETSTORE_EXPIRES", func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "keys.db")
			res := petstore(t, map[string]string{"PETSTORE_EXPIRES": "2099-01-31T00:00:00Z"}, "keys", "create", "--db", db, "--plan", "free")
			if res.Code != 0 {
				t.Fatalf("exit status %d\n%s", res.Code, res.Stderr)
			}
			if keys := listKeysJSON(t, petstore, db); keys[0].Expires == nil || keys[0].Expires.Year() != 2099 {
				t.Errorf("keys list: %+v, want the expiry from PETSTORE_EXPIRES", keys[0])
			}
		})
		t.Run("without --expires", func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "keys.db")
			mustCreateKeyCLI(t, petstore, "--db", db, "--plan", "free")
			if keys := listKeysJSON(t, petstore, db); keys[0].Expires != nil {
				t.Errorf("expires %v, want never", keys[0].Expires)
			}
		})
	})
}

func TestKeysCreateRefusesABadExpires(t *testing.T) {
	t.Parallel()
	for _, expires := range []string{
		"2020-01-01T00:00:00Z", // the past
		"0", "0s", "0d",
		"-1h", "-5d",
		"soon", "90", "1.5d", "d", "90dd", "1d-1h", "2027-01-31", "",
		"40000d", // beyond a century
	} {
		t.Run(strconv.Quote(expires), func(t *testing.T) {
			t.Parallel()
			viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
				db := filepath.Join(t.TempDir(), "keys.db")
				res := petstore(t, nil, "keys", "create", "--db", db, "--plan", "free", "--expires", expires)
				wantFailure(t, res, 2)
				if !strings.Contains(res.Stderr, "--expires") {
					t.Errorf("standard error %q does not name --expires", res.Stderr)
				}
				testkit.WantNoFile(t, db)
			})
		})
	}
}

var rolledNote = regexp.MustCompile(`^rolled key (\d+) to key (\d+) .* key \d+ stops at (\S+)\.\n`)

func TestKeysRoll(t *testing.T) {
	t.Parallel()
	viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
		db := filepath.Join(t.TempDir(), "keys.db")
		mustCreateKeyCLI(t, petstore, "--db", db, "--plan", "enterprise", "--rpm", "7", "--rpd", "70", "--name", "billing")
		id := listKeysJSON(t, petstore, db)[0].ID

		t.Run("with the default overlap", func(t *testing.T) {
			res := petstore(t, nil, "keys", "roll", "--db", db, strconv.FormatInt(id, 10))
			if res.Code != 0 {
				t.Fatalf("exit status %d\n%s", res.Code, res.Stderr)
			}
			if key := strings.TrimSuffix(res.Stdout, "\n"); !cliKeyPattern["production"].MatchString(key) {
				t.Errorf("standard output %q, want the new key alone", res.Stdout)
			}
			m := rolledNote.FindStringSubmatch(res.Stderr)
			if m == nil {
				t.Fatalf("standard error %q, want a note of the roll", res.Stderr)
			}
			keys := listKeysJSON(t, petstore, db)
			if len(keys) != 2 {
				t.Fatalf("%d keys after the roll, want 2", len(keys))
			}
			old, rolled := keys[0], keys[1]
			if old.State != "rolled" || old.RolledTo == nil || *old.RolledTo != rolled.ID || old.Expires == nil {
				t.Errorf("old key %+v, want rolled to key %d, with an expiry", old, rolled.ID)
			} else if until := time.Until(*old.Expires); until < 23*time.Hour || until > 24*time.Hour+time.Minute {
				t.Errorf("old key expires in %v, want 24h", until)
			} else if m[3] != old.Expires.Format(time.RFC3339) {
				t.Errorf("the note says the old key stops at %s, keys list %v", m[3], old.Expires)
			}
			if rolled.State != "active" || rolled.Name != "billing" || rolled.Plan != "enterprise" || rolled.PerMinute != 7 ||
				rolled.PerDay != 70 || rolled.Expires != nil || rolled.RolledFrom == nil || *rolled.RolledFrom != old.ID {
				t.Errorf("new key %+v, want billing, enterprise 7/70, active, no expiry, rolled from %d", rolled, old.ID)
			}
		})
		t.Run("the key rolled already", func(t *testing.T) {
			wantFailure(t, petstore(t, nil, "keys", "roll", "--db", db, strconv.FormatInt(id, 10)), 1)
		})
		t.Run("with no overlap", func(t *testing.T) {
			next := listKeysJSON(t, petstore, db)[1].ID
			res := petstore(t, map[string]string{"PETSTORE_OVERLAP": "5h"}, "keys", "roll", "--db", db, "--overlap", "0", strconv.FormatInt(next, 10))
			if res.Code != 0 {
				t.Fatalf("exit status %d\n%s", res.Code, res.Stderr)
			}
			keys := listKeysJSON(t, petstore, db)
			if keys[1].State != "expired" || keys[2].State != "active" {
				t.Errorf("states %q and %q, want the old key expired at once and the new one active", keys[1].State, keys[2].State)
			}
			t.Run("then the expired key", func(t *testing.T) {
				wantFailure(t, petstore(t, nil, "keys", "roll", "--db", db, strconv.FormatInt(next, 10)), 1)
			})
		})
		t.Run("a revoked key", func(t *testing.T) {
			last := listKeysJSON(t, petstore, db)[2].ID
			if res := petstore(t, nil, "keys", "revoke", "--db", db, strconv.FormatInt(last, 10)); res.Code != 0 {
				t.Fatalf("keys revoke: %d\n%s", res.Code, res.Stderr)
			}
			wantFailure(t, petstore(t, nil, "keys", "roll", "--db", db, strconv.FormatInt(last, 10)), 1)
			if keys := listKeysJSON(t, petstore, db); len(keys) != 3 || keys[2].State != "revoked" {
				t.Errorf("keys %+v, want no new key and the last one revoked", keys)
			}
		})
		t.Run("an unknown id", func(t *testing.T) {
			wantFailure(t, petstore(t, nil, "keys", "roll", "--db", db, "999"), 1)
		})
		t.Run("a staging key with --env staging", func(t *testing.T) {
			staging := filepath.Join(t.TempDir(), "staging.db")
			mustCreateKeyCLI(t, petstore, "--db", staging, "--plan", "free", "--env", "staging")
			res := petstore(t, nil, "keys", "roll", "--db", staging, "--env", "staging", "--overlap", "1h", "1")
			if key := strings.TrimSpace(res.Stdout); res.Code != 0 || !cliKeyPattern["staging"].MatchString(key) {
				t.Errorf("exit status %d, standard output %q, want a psk_test_ key\n%s", res.Code, res.Stdout, res.Stderr)
			}
		})
	})
}

func TestKeysRollRefusesBadCommandLines(t *testing.T) {
	t.Parallel()
	viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
		db := filepath.Join(t.TempDir(), "keys.db")
		mustCreateKeyCLI(t, petstore, "--db", db, "--plan", "free")
		for _, args := range [][]string{
			{},
			{"1", "2"},
			{"one"},
			{"0"},
			{"1", "--overlap", "-1h"},
			{"1", "--overlap", "soon"},
			{"1", "--overlap", "1.5d"},
			{"1", "--overlap", ""},
			{"1", "--overlap"},
			{"1", "--expires", "1h"},
		} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				wantFailure(t, petstore(t, nil, append([]string{"keys", "roll", "--db", db}, args...)...), 2)
			})
		}
		if keys := listKeysJSON(t, petstore, db); len(keys) != 1 || keys[0].State != "active" {
			t.Errorf("keys %+v after the refused rolls, want the one key, active", keys)
		}
	})
}

func TestKeysRollOnAMissingDatabaseFails(t *testing.T) {
	t.Parallel()
	viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
		db := filepath.Join(t.TempDir(), "missing.db")
		wantFailure(t, petstore(t, nil, "keys", "roll", "--db", db, "1"), 1)
		testkit.WantNoFile(t, db)
	})
}

// TestRollWhileServing rolls a key under traffic, as a client switching keys
// sees it: no request with the old key fails before the overlap ends, and
// none succeeds after it.
func TestRollWhileServing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "petstore.db")
	s := startPetstore(t, dir, "serve", "--db", db)
	old := mustCreateKeyCLI(t, viaBinary, "--db", db, "--plan", "pro", "--name", "rolling")
	s.WantStatus("GET", "/v1/pets", old, "", http.StatusOK)
	id := keyIDByName(t, db, "rolling")

	res := petstoreCmd(t, "keys", "roll", "--db", db, "--overlap", "2s", strconv.FormatInt(id, 10))
	if res.Code != 0 {
		t.Fatalf("keys roll: exit status %d\n%s", res.Code, res.Stderr)
	}
	m := rolledNote.FindStringSubmatch(res.Stderr)
	if m == nil {
		t.Fatalf("keys roll said %q, want a note of when the old key stops", res.Stderr)
	}
	end, err := time.Parse(time.RFC3339, m[3])
	if err != nil {
		t.Fatal(err)
	}
	fresh := strings.TrimSpace(res.Stdout)
	s.WantStatus("GET", "/v1/pets", fresh, "", http.StatusOK) // at once

	// Past the end, a few more: each 401 spends the address's limit.
	deadline := end.Add(1500 * time.Millisecond)
	refused := 0
	for time.Now().Before(deadline) && refused < 5 {
		sent := time.Now()
		resp, body := s.Request("GET", "/v1/pets", old, "")
		done := time.Now()
		switch resp.StatusCode {
		case http.StatusOK:
			if sent.After(end) {
				t.Fatalf("the old key was accepted %v after the overlap ended", sent.Sub(end))
			}
			if refused > 0 {
				t.Fatal("the old key was accepted again after a refusal")
			}
		case http.StatusUnauthorized:
			if done.Before(end) {
				t.Fatalf("the old key was refused %v before the overlap ended: %s", end.Sub(done), body)
			}
			if expired := "the API key has expired"; !strings.Contains(body, expired) {
				t.Errorf("the old key after the overlap: %s, want %q", body, expired)
			}
			refused++
		default:
			t.Fatalf("the old key: %d %s", resp.StatusCode, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if refused == 0 {
		t.Error("the old key was never refused")
	}
	s.WantStatus("GET", "/v1/pets", fresh, "", http.StatusOK)
}

func TestKeysListShowsLastUseAndTodaysUsageWrittenByTheServer(t *testing.T) {
	t.Parallel()
	if now := time.Now().UTC(); now.Add(30*time.Second).Day() != now.Day() {
		t.Skip("too close to UTC midnight: today's usage is about to start afresh")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "petstore.db")
	key := mustCreateKeyCLI(t, viaBinary, "--db", db, "--plan", "pro", "--name", "busy")
	mustCreateKeyCLI(t, viaBinary, "--db", db, "--plan", "pro", "--name", "idle")
	s := startPetstore(t, dir, "serve", "--db", db)
	start := time.Now().UTC().Truncate(time.Minute)
	for range 3 {
		s.WantStatus("GET", "/v1/pets", key, "", http.StatusOK)
	}
	if code := s.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d after SIGTERM, want 0", code)
	}
	end := time.Now().UTC()
	for _, k := range listKeysJSON(t, viaBinary, db) {
		switch k.Name {
		case "busy":
			if k.LastUsed == nil || k.LastUsed.Before(start) || k.LastUsed.After(end) || k.LastUsed.Second() != 0 {
				t.Errorf("busy key last used %v, want the minute of its use, from %v to %v", k.LastUsed, start, end)
			}
			if k.Today != 3 {
				t.Errorf("busy key's usage today %d, want 3", k.Today)
			}
		case "idle":
			if k.LastUsed != nil || k.Today != 0 {
				t.Errorf("idle key last used %v, %d today; want never, 0", k.LastUsed, k.Today)
			}
		}
	}
	table := petstoreCmd(t, "keys", "list", "--db", db)
	if !strings.Contains(table.Stdout, start.Format("2006-01-02T15:04")) && !strings.Contains(table.Stdout, end.Truncate(time.Minute).Format("2006-01-02T15:04")) {
		t.Errorf("keys list does not show the last use:\n%s", table.Stdout)
	}
}

// TestRollAcrossServersSharesOneBudget rolls a key of three servers behind a
// balancer, on PostgreSQL with limits in Redis: requests with the old and
// the new key, spread over every server, spend one day's quota; each
// GET /v1/rate_limit, whichever server answers, shows what the request
// before it left. (After the overlap every server refuses the old key:
// TestEveryServerRefusesARolledKeyAfterTheOverlap, on a fake clock.)
func TestRollAcrossServersSharesOneBudget(t *testing.T) {
	t.Parallel()
	b := startBalancedSet(t, 3)
	// The day binds (31), and the minute never refills into view. 31 is
	// too few for a lease (a 16th of what is left, the request's own
	// included), so whichever server answers knows the exact count.
	old := mustCreateKeyCLI(t, viaBinary, "--db", b.db, "--plan", "enterprise", "--name", "shared",
		"--rpm", "100000", "--rpd", "31")
	id := keyIDByName(t, b.db, "shared")
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path, key string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("GET", b.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		var body strings.Builder
		if _, err := io.Copy(&body, resp.Body); err != nil {
			t.Fatal(err)
		}
		return resp, body.String()
	}
	for range 10 {
		if resp, body := get("/v1/pets", old); resp.StatusCode != http.StatusOK {
			t.Fatalf("the key before the roll: %d %s", resp.StatusCode, body)
		}
	}

	res := petstoreCmd(t, "keys", "roll", "--db", b.db, "--overlap", "3s", strconv.FormatInt(id, 10))
	if res.Code != 0 {
		t.Fatalf("keys roll: exit status %d\n%s", res.Code, res.Stderr)
	}
	fresh := strings.TrimSpace(res.Stdout)
	m := rolledNote.FindStringSubmatch(res.Stderr)
	if m == nil {
		t.Fatalf("keys roll said %q", res.Stderr)
	}
	end, err := time.Parse(time.RFC3339, m[3])
	if err != nil {
		t.Fatal(err)
	}

	want := int64(21)
	for i := range 21 {
		key := []string{old, fresh}[i%2]
		resp, body := get("/v1/pets", key)
		if time.Now().After(end) {
			break // the overlap ran out on a slow machine: the rest is checked below
		}
		want--
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-RateLimit-Remaining") != strconv.FormatInt(want, 10) {
			t.Fatalf("request %d of the roll's keys: %d, Remaining %s, want 200 with %d left of the one budget; %s",
				i+1, resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), want, body)
		}
		if i%5 == 0 {
			peek, body := get("/v1/rate_limit", []string{fresh, old}[i%2])
			var got struct {
				Day struct{ Remaining int64 } `json:"day"`
			}
			testkit.DecodeJSON(t, body, &got)
			if peek.StatusCode != http.StatusOK || got.Day.Remaining != want ||
				peek.Header.Get("X-RateLimit-Remaining") != resp.Header.Get("X-RateLimit-Remaining") ||
				peek.Header.Get("X-RateLimit-Reset") != resp.Header.Get("X-RateLimit-Reset") {
				t.Fatalf("GET /v1/rate_limit after a request that left %d: %d %s, headers %v", want, peek.StatusCode, body, peek.Header)
			}
		}
	}
	if want > 15 {
		t.Errorf("only %d requests made during the overlap, want most of 21: the machine is too slow to tell", 21-want)
	}
	if want == 0 {
		for _, key := range []string{old, fresh} {
			if resp, body := get("/v1/pets", key); resp.StatusCode != http.StatusTooManyRequests {
				t.Errorf("the day's 31 spent by both keys: %d %s, want 429", resp.StatusCode, body)
			}
		}
	}
}

func TestKeysCreateTakesThePlanInAnyCase(t *testing.T) {
	t.Parallel()
	for _, plan := range []string{"Pro", "PRO", "pro"} {
		t.Run(plan, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "keys.db")
			mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", plan)
			if keys := listKeysJSON(t, viaRun, db); len(keys) != 1 || keys[0].Plan != "pro" || keys[0].PerMinute != 300 {
				t.Errorf("--plan %s made %+v, want one pro key (300 a minute)", plan, keys)
			}
		})
	}
}

func TestKeysUpdateExpiresListsNeverAmongTheForms(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "keys.db")
	mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", "free", "--name", "acme")
	id := strconv.FormatInt(keyIDByNameVia(t, viaRun, db, "acme"), 10)
	res := viaRun(t, nil, "keys", "update", "--db", db, id, "--expires", "nevr")
	wantFailure(t, res, 2)
	for _, form := range []string{"RFC 3339", "duration", "never"} {
		if !strings.Contains(res.Stderr, form) {
			t.Errorf("keys update --expires nevr: standard error %q does not list %s", res.Stderr, form)
		}
	}
	// keys create has no never to give: a key without --expires never expires.
	res = viaRun(t, nil, "keys", "create", "--db", db, "--plan", "free", "--expires", "nevr")
	wantFailure(t, res, 2)
	if strings.Contains(res.Stderr, "or never") {
		t.Errorf("keys create --expires nevr offers never: %q", res.Stderr)
	}
}

func TestEnterpriseFiguresAboveTheMaximumAreRefusedNamingTheField(t *testing.T) {
	over := strconv.Itoa(domain.MaxLimit + 1)
	s := servertest.Start(t, servertest.Options{})
	admin := s.MustCreateAdmin("portal", domain.AllAdminScopes)
	k, _ := s.MustCreate(s.KeyTerms("enterprise", domain.Limits{PerMinute: 100, PerDay: 1000}))
	path := "/admin/v1/keys/" + strconv.FormatInt(k.ID, 10)
	for _, c := range []struct{ method, target, body, field string }{
		{"POST", "/admin/v1/keys", `{"plan":"enterprise","perMinute":` + over + `,"perDay":5}`, "perMinute"},
		{"POST", "/admin/v1/keys", `{"plan":"enterprise","perMinute":5,"perDay":` + over + `}`, "perDay"},
		{"POST", "/admin/v1/keys", `{"plan":"enterprise","perMinute":9223372036854775807,"perDay":9223372036854775807}`, "perMinute"},
		{"PATCH", path, `{"perMinute":` + over + `}`, "perMinute"},
		{"PATCH", path, `{"perDay":` + over + `}`, "perDay"},
	} {
		servertest.WantError(t, s.Admin(c.method, c.target, admin, c.body), 400, httpapi.CodeInvalidRequest, c.field+" must be at most 1000000000")
	}
	at := strconv.Itoa(domain.MaxLimit)
	if w := s.Admin("POST", "/admin/v1/keys", admin, `{"plan":"enterprise","perMinute":`+at+`,"perDay":`+at+`}`); w.Code != 201 {
		t.Errorf("the maximum itself: HTTP status %d, want 201; body: %s", w.Code, w.Body)
	}

	db := filepath.Join(t.TempDir(), "keys.db")
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"keys", "create", "--db", db, "--plan", "enterprise", "--rpm", over, "--rpd", "5"}, 2, "--rpm must be at most 1000000000"},
		{[]string{"keys", "create", "--db", db, "--plan", "enterprise", "--rpm", "5", "--rpd", over}, 2, "--rpd must be at most 1000000000"},
		{[]string{"keys", "create", "--db", db, "--plan", "enterprise", "--rpm", at, "--rpd", at}, 0, ""},
		{[]string{"keys", "update", "--db", db, "1", "--rpm", over}, 2, "--rpm must be at most 1000000000"},
		{[]string{"keys", "update", "--db", db, "1", "--rpd", over}, 2, "--rpd must be at most 1000000000"},
	} {
		res := viaRun(t, nil, c.args...)
		if res.Code != c.code || !strings.Contains(res.Stderr, c.says) {
			t.Errorf("%s: exit status %d, %q; want %d saying %q", c.args[:2], res.Code, res.Stderr, c.code, c.says)
		}
	}
}
