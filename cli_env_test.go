package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/manage"
	"petstore/internal/store"
)

// Environments on one database, from the command line: every command
// that takes --env sees only that environment's keys, usage, key bans,
// audit events and webhook endpoints (docs/admin.md).

// cliEnvSide is what one environment owns on the shared file: a key under
// a ban, and a webhook endpoint with a delivery.
type cliEnvSide struct {
	env, key, endpoint string
}

// cliEnvDatabase makes a SQLite file holding a production side and a
// staging side.
func cliEnvDatabase(t *testing.T, petstore cliRunner) (db string, production, staging cliEnvSide) {
	t.Helper()
	db = filepath.Join(t.TempDir(), "shared.db")
	production, staging = cliEnvSide{env: "production", key: "1", endpoint: "1"}, cliEnvSide{env: "staging", key: "2", endpoint: "2"}
	for _, side := range []cliEnvSide{production, staging} {
		mustCreateKeyCLI(t, petstore, "--db", db, "--env", side.env, "--plan", "free")
		addWebhookCLI(t, petstore, db, "https://203.0.113.10/"+side.env, "--env", side.env)
		if res := petstore(t, nil, "webhooks", "test", "--db", db, "--env", side.env, side.endpoint); res.Code != 0 {
			t.Fatalf("webhooks test: %d %s", res.Code, res.Stderr)
		}
	}
	s, err := store.Open(context.Background(), db, false, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keys, err := s.Keys(context.Background())
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys %+v, %v", keys, err)
	}
	now := time.Now()
	var bans []domain.StartedBan
	for _, k := range keys {
		b := domain.StartedBan{Ban: domain.Ban{Subject: domain.CallerID{KeyID: k.ID}, Since: now, Until: now.Add(time.Hour)}}
		b.Event = domain.KeyEvent(domain.AuditKeyBanned, k, domain.ServerActor, now)
		bans = append(bans, b)
	}
	if err := s.AddBans(context.Background(), bans); err != nil {
		t.Fatal(err)
	}
	return db, production, staging
}

// cliEnvSeen is all that side's environment shows of its own things.
func cliEnvSeen(t *testing.T, petstore cliRunner, db string, side cliEnvSide) []string {
	t.Helper()
	var seen []string
	for _, args := range [][]string{
		{"keys", "list"}, {"bans", "list"}, {"webhooks", "list"}, {"audit"}, {"usage", "--key", side.key},
		{"webhooks", "deliveries", "--endpoint", side.endpoint},
	} {
		res := petstore(t, nil, append(args, "--db", db, "--env", side.env, "--json")...)
		if res.Code != 0 {
			t.Fatalf("%s --env %s: %d %s", strings.Join(args, " "), side.env, res.Code, res.Stderr)
		}
		seen = append(seen, res.Stdout)
	}
	return seen
}

// TestACommandOfOneEnvironmentCannotReachTheOthersThings: with --env
// staging, a command on a production key, its ban or a production
// endpoint finds nothing (exit status 1, as for an unknown id) and
// changes nothing: no key minted, changed or revoked, no ban lifted, no
// secret rotated, nothing queued; and the other way round.
func TestACommandOfOneEnvironmentCannotReachTheOthersThings(t *testing.T) {
	t.Parallel()
	viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
		db, production, staging := cliEnvDatabase(t, petstore)
		for _, dir := range []struct {
			name          string
			caller, owner cliEnvSide
		}{
			{"--env staging on production's", staging, production},
			{"--env production on staging's", production, staging},
		} {
			before := cliEnvSeen(t, petstore, db, dir.owner)
			key, endpoint := dir.owner.key, dir.owner.endpoint
			for _, tc := range []struct {
				args []string
				says string
			}{
				{[]string{"keys", "revoke", key}, "no API key has id"},
				{[]string{"keys", "roll", "--overlap", "0", key}, "no API key has id"},
				{[]string{"keys", "update", "--plan", "enterprise", "--rpm", "6000", "--rpd", "600000", key}, "no API key has id"},
				{[]string{"usage", "--key", key}, "no API key has id"},
				{[]string{"bans", "lift", "key:" + key}, "is not banned"},
				{[]string{"webhooks", "remove", endpoint}, "no webhook endpoint has id"},
				{[]string{"webhooks", "rotate", "--overlap", "0", endpoint}, "no webhook endpoint has id"},
				{[]string{"webhooks", "enable", endpoint}, "no webhook endpoint has id"},
				{[]string{"webhooks", "test", endpoint}, "no webhook endpoint has id"},
			} {
				t.Run(dir.name+": "+strings.Join(tc.args, " "), func(t *testing.T) {
					res := petstore(t, nil, append(tc.args, "--db", db, "--env", dir.caller.env)...)
					wantFailure(t, res, 1)
					if !strings.Contains(res.Stderr, tc.says) {
						t.Errorf("stderr %q, want it to say %q", res.Stderr, tc.says)
					}
				})
			}
			for _, args := range [][]string{
				{"audit", "--json", "--key", key},
				{"webhooks", "deliveries", "--json", "--endpoint", endpoint},
			} {
				res := petstore(t, nil, append(args, "--db", db, "--env", dir.caller.env)...)
				if res.Code != 0 || strings.TrimSpace(res.Stdout) != "[]" {
					t.Errorf("%s: %s, %d %s, want []", dir.name, strings.Join(args, " "), res.Code, res.Stdout)
				}
			}
			res := petstore(t, nil, "webhooks", "resend", "--db", db, "--env", dir.caller.env, "--failed", "--endpoint", endpoint)
			if res.Code != 0 || !strings.Contains(res.Stdout, "queued 0 deliveries") {
				t.Errorf("%s: webhooks resend --failed: %d %q", dir.name, res.Code, res.Stdout)
			}
			for i, after := range cliEnvSeen(t, petstore, db, dir.owner) {
				if after != before[i] {
					t.Errorf("%s: what %s shows changed:\nbefore %.400s\nafter  %.400s", dir.name, dir.owner.env, before[i], after)
				}
			}
		}
	})
}

// TestEachEnvironmentsCommandsListOnlyItsOwn: keys list, bans list,
// webhooks list, webhooks deliveries and audit with --env show only that
// environment's.
func TestEachEnvironmentsCommandsListOnlyItsOwn(t *testing.T) {
	t.Parallel()
	viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
		db, production, staging := cliEnvDatabase(t, petstore)
		for _, side := range []cliEnvSide{production, staging} {
			var keys []manage.ListedKey
			var bans []manage.ListedBan
			var endpoints, deliveries []listedID
			var events []manage.AuditJSON
			for _, read := range []struct {
				args []string
				into any
			}{
				{[]string{"keys", "list"}, &keys}, {[]string{"bans", "list"}, &bans}, {[]string{"webhooks", "list"}, &endpoints},
				{[]string{"webhooks", "deliveries"}, &deliveries}, {[]string{"audit"}, &events},
			} {
				res := petstore(t, nil, append(read.args, "--db", db, "--env", side.env, "--json")...)
				if err := json.Unmarshal([]byte(res.Stdout), read.into); res.Code != 0 || err != nil {
					t.Fatalf("%s --env %s: %d %v %s", strings.Join(read.args, " "), side.env, res.Code, err, res.Stderr)
				}
			}
			if len(keys) != 1 || keys[0].ID != mustAtoi(t, side.key) {
				t.Errorf("keys list --env %s: %+v, want key %s only", side.env, keys, side.key)
			}
			if len(bans) != 1 || bans[0].Subject != "key:"+side.key {
				t.Errorf("bans list --env %s: %+v, want key:%s only", side.env, bans, side.key)
			}
			if len(endpoints) != 1 || endpoints[0].ID.String() != side.endpoint {
				t.Errorf("webhooks list --env %s: %+v, want endpoint %s only", side.env, endpoints, side.endpoint)
			}
			if len(deliveries) == 0 || slices.ContainsFunc(deliveries, func(d listedID) bool { return d.EndpointID.String() != side.endpoint }) {
				t.Errorf("webhooks deliveries --env %s: %+v, want endpoint %s's only (its test and its key's ban)", side.env, deliveries, side.endpoint)
			}
			for _, e := range events {
				if e.Env != side.env {
					t.Errorf("audit --env %s shows %+v", side.env, e)
				}
			}
			if len(events) < 3 {
				t.Errorf("audit --env %s: %d events, want its key's, its ban's and its endpoint's", side.env, len(events))
			}
		}
	})
}

// listedID is the ids of a listed endpoint or delivery.
type listedID struct {
	ID         json.Number `json:"id"`
	EndpointID json.Number `json:"endpointId"`
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, ok := domain.ParseID(s)
	if !ok {
		t.Fatalf("%q is not an id", s)
	}
	return n
}
