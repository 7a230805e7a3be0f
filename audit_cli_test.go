package main

// The audit trail (docs/production.md, "The audit trail"): each
// change to a key leaves one event, with who made it, when, and what it was;
// the table is append only; copy carries it over.

import (
	"context"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"petstore/internal/cli"
	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/manage"
	"petstore/internal/servertest"
	"petstore/internal/store"
	"petstore/internal/testkit"
)

func TestEachKeyCommandLeavesOneEvent(t *testing.T) {
	t.Parallel()
	actor := cli.CommandActor()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
			db := opts.DBAt(t, filepath.Join(t.TempDir(), "keys.db"))
			run := func(want int, args ...string) {
				t.Helper()
				if res := petstore(t, nil, args...); res.Code != want {
					t.Fatalf("%s: exit status %d, want %d\n%s", strings.Join(args, " "), res.Code, want, res.Stderr)
				}
			}

			mustCreateKeyCLI(t, petstore, "--db", db, "--plan", "enterprise", "--rpm", "7", "--rpd", "70", "--name", "billing",
				"--scope", "pets:read", "--expires", "2099-01-31T00:00:00Z")
			expires := time.Date(2099, 1, 31, 0, 0, 0, 0, time.UTC)
			events := wantNewEvents(t, db, nil, domain.AuditEvent{
				Action: domain.AuditKeyCreated, Actor: actor, KeyID: 1, Env: "production",
				Details: domain.AuditDetails{Name: "billing", Plan: "enterprise", PerMinute: 7, PerDay: 70, Scopes: []string{"pets:read"}, Expires: &expires},
			})

			mustCreateKeyCLI(t, petstore, "--db", db, "--env", "staging", "--plan", "free")
			events = wantNewEvents(t, db, events, domain.AuditEvent{
				Action: domain.AuditKeyCreated, Actor: actor, KeyID: 2, Env: "staging",
				Details: domain.AuditDetails{Plan: "free", PerMinute: 60, PerDay: 1000, Scopes: []string{"pets:read", "pets:write"}},
			})

			run(0, "keys", "roll", "--db", db, "--overlap", "1h", "1")
			stops := listKeysJSON(t, petstore, db)[0].Expires
			events = wantNewEvents(t, db, events, domain.AuditEvent{
				Action: domain.AuditKeyRolled, Actor: actor, KeyID: 1, NewKeyID: 3, Env: "production",
				Details: domain.AuditDetails{Name: "billing", Plan: "enterprise", PerMinute: 7, PerDay: 70, Scopes: []string{"pets:read"},
					Expires: &expires, Overlap: "1h0m0s", OldKeyStops: stops},
			})

			run(1, "keys", "revoke", "--db", db, "2") // a staging key: production's command finds none
			run(0, "keys", "revoke", "--db", db, "--env", "staging", "2")
			events = wantNewEvents(t, db, events, domain.AuditEvent{
				Action: domain.AuditKeyRevoked, Actor: actor, KeyID: 2, Env: "staging",
				Details: domain.AuditDetails{Plan: "free", PerMinute: 60, PerDay: 1000, Scopes: []string{"pets:read", "pets:write"}},
			})

			// What changes nothing, or fails, leaves nothing.
			run(0, "keys", "revoke", "--db", db, "--env", "staging", "2")
			run(1, "keys", "revoke", "--db", db, "999")
			run(1, "keys", "roll", "--db", db, "1")
			run(1, "keys", "roll", "--db", db, "2")
			run(2, "keys", "create", "--db", db, "--plan", "free", "--scope", "pets:admin")
			run(2, "keys", "create", "--db", db, "--plan", "gold")
			run(0, "keys", "list", "--db", db)
			wantNewEvents(t, db, events)
		})
	})
}

func TestTheBootstrapKeyLeavesOneEventByTheServer(t *testing.T) {
	t.Parallel()
	servertest.EachStoreInDir(t, func(t *testing.T, _, db string) {
		for range 2 {
			p := runServing(t, nil, withTestRedis(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db})...)
			p.stop(t)
		}
		wantNewEvents(t, db, nil, domain.AuditEvent{
			Action: domain.AuditKeyCreated, Actor: domain.ServerActor, KeyID: 1, Env: "production",
			Details: domain.AuditDetails{Name: "bootstrap", Plan: "free", PerMinute: 60, PerDay: 1000, Scopes: []string{"pets:read", "pets:write"}},
		})
	})
}

func TestBansAreWrittenAtShutdown(t *testing.T) {
	t.Parallel()
	servertest.EachStoreInDir(t, func(t *testing.T, _, db string) {
		p := runServing(t, nil, withTestRedis(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--ban-after", "0"})...)
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
		defer client.CloseIdleConnections()
		for i := 0; ; i++ {
			res := faultDo(client, "GET", p.url+"/v1/pets", "", "")
			if strings.Contains(string(res.body), httpapi.CodeTemporarilyBanned) {
				break
			}
			if i == 100 || res.status != http.StatusUnauthorized && res.status != http.StatusTooManyRequests {
				t.Fatalf("request %d: %d %s %v, want 401s, then 429s, then a ban", i+1, res.status, res.body, res.err)
			}
		}
		p.stop(t)
		if bans := storedEvents(t, db, domain.AuditFilter{Action: domain.AuditKeyBanned}); len(bans) != 1 || bans[0].Address != "127.0.0.1" {
			t.Errorf("bans after the server stopped: %+v, want the one of 127.0.0.1", bans)
		}
	})
}

func TestAuditCommandFiltersAndFormats(t *testing.T) {
	t.Parallel()
	servertest.EachStoreInDir(t, func(t *testing.T, _, db string) {
		mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", "free", "--name", "first")
		mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", "pro", "--scope", "pets:read")
		for _, args := range [][]string{{"keys", "roll", "--db", db, "1"}, {"keys", "revoke", "--db", db, "2"}} {
			if res := viaRun(t, nil, args...); res.Code != 0 {
				t.Fatalf("%v: %s", args, res.Stderr)
			}
		}
		// Two bans two days ago: an address's and key 2's.
		store, err := store.Open(context.Background(), db, false, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		old := domain.AuditTime(time.Now().Add(-48 * time.Hour))
		until := old.Add(15 * time.Minute).Truncate(time.Second)
		address := domain.CallerID{Addr: domain.LimitedAddr(netip.MustParseAddr("2001:db8::1"))}
		err = store.AddBans(context.Background(), []domain.StartedBan{
			{Ban: domain.Ban{Subject: address, Since: old, Until: until}, Event: domain.AuditEvent{
				At: old, Action: domain.AuditKeyBanned, Actor: domain.ServerActor, Address: "2001:db8::1", Env: "production",
				Details: domain.AuditDetails{PerMinute: 60, PerDay: 1000, BannedUntil: &until, BanFor: "15m0s"}}},
			{Ban: domain.Ban{Subject: domain.CallerID{KeyID: 2}, Since: old, Until: until}, Event: domain.AuditEvent{
				At: old, Action: domain.AuditKeyBanned, Actor: domain.ServerActor, KeyID: 2, Env: "production",
				Details: domain.AuditDetails{Plan: "pro", PerMinute: 300, PerDay: 10000, BannedUntil: &until, BanFor: "15m0s"}}},
		})
		store.Close()
		if err != nil {
			t.Fatal(err)
		}

		tests := []struct {
			name    string
			args    []string
			actions []string // of the events shown, in order
		}{
			{"all", nil, []string{"key.banned", "key.banned", "key.created", "key.created", "key.rolled", "key.revoked"}},
			{"--since 24h", []string{"--since", "24h"}, []string{"key.created", "key.created", "key.rolled", "key.revoked"}},
			{"--since 3d", []string{"--since", "3d"}, []string{"key.banned", "key.banned", "key.created", "key.created", "key.rolled", "key.revoked"}},
			{"--since a time", []string{"--since", old.Add(time.Millisecond).Format(time.RFC3339Nano)}, []string{"key.created", "key.created", "key.rolled", "key.revoked"}},
			{"--since the time of the bans", []string{"--since", old.Format(time.RFC3339Nano)}, []string{"key.banned", "key.banned", "key.created", "key.created", "key.rolled", "key.revoked"}},
			{"--key 1", []string{"--key", "1"}, []string{"key.created", "key.rolled"}},
			{"--key 3, the key a roll made", []string{"--key", "3"}, []string{"key.rolled"}},
			{"--key 2", []string{"--key", "2"}, []string{"key.banned", "key.created", "key.revoked"}},
			{"--action", []string{"--action", "key.banned"}, []string{"key.banned", "key.banned"}},
			{"--key and --action", []string{"--key", "2", "--action", "key.revoked"}, []string{"key.revoked"}},
			{"--key, --action and --since", []string{"--key", "2", "--action", "key.banned", "--since", "24h"}, nil},
			{"an unknown key", []string{"--key", "99"}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				lines := viaRun(t, nil, append([]string{"audit", "--db", db}, tt.args...)...)
				jsonOut := viaRun(t, nil, append([]string{"audit", "--db", db, "--json"}, tt.args...)...)
				if lines.Code != 0 || jsonOut.Code != 0 {
					t.Fatalf("exit status %d and %d with --json\n%s%s", lines.Code, jsonOut.Code, lines.Stderr, jsonOut.Stderr)
				}
				var got []string
				if lines.Stdout != "" {
					for _, line := range strings.Split(strings.TrimSuffix(lines.Stdout, "\n"), "\n") {
						f := strings.Fields(line)
						if _, err := time.Parse(manage.AuditTimeFormat, f[0]); err != nil || !strings.HasSuffix(f[0], "Z") || len(f) < 4 {
							t.Errorf("line %q does not start with a time in UTC to the millisecond, then the action and its fields", line)
						}
						got = append(got, f[1])
					}
				}
				if !slices.Equal(got, tt.actions) {
					t.Errorf("audit %v: actions %q, want %q\n%s", tt.args, got, tt.actions, lines.Stdout)
				}
				var events []auditJSONEvent
				testkit.DecodeJSON(t, jsonOut.Stdout, &events)
				if events == nil || len(events) != len(tt.actions) {
					t.Fatalf("audit --json %v: %s, want an array of %d", tt.args, jsonOut.Stdout, len(tt.actions))
				}
				for i, e := range events {
					if e.Action != tt.actions[i] {
						t.Errorf("--json event %d: %s, want %s", i, e.Action, tt.actions[i])
					}
				}
			})
		}

		t.Run("the fields of each line and each JSON object", func(t *testing.T) {
			lines := strings.Split(viaRun(t, nil, "audit", "--db", db).Stdout, "\n")
			actor := cli.CommandActor()
			for i, want := range []string{
				" key.banned address=2001:db8::1 actor=server env=production perMinute=60 perDay=1000 bannedUntil=" + until.Format(time.RFC3339) + " banFor=15m0s",
				" key.banned key=2 actor=server env=production plan=pro perMinute=300 perDay=10000 bannedUntil=",
				" key.created key=1 actor=" + actor + " env=production name=first plan=free perMinute=60 perDay=1000 scopes=pets:read,pets:write",
				" key.created key=2 actor=" + actor + " env=production plan=pro perMinute=300 perDay=10000 scopes=pets:read",
				" key.rolled key=1 newKey=3 actor=" + actor + " env=production name=first plan=free perMinute=60 perDay=1000 scopes=pets:read,pets:write overlap=24h0m0s oldKeyStops=",
				" key.revoked key=2 actor=" + actor + " env=production plan=pro perMinute=300 perDay=10000 scopes=pets:read",
			} {
				if !strings.Contains(lines[i], want) {
					t.Errorf("line %d: %q, want it to hold %q", i+1, lines[i], want)
				}
			}
			var events []auditJSONEvent
			testkit.DecodeJSON(t, viaRun(t, nil, "audit", "--db", db, "--json").Stdout, &events)
			ban, rolled := events[0], events[4]
			if ban.KeyID != nil || ban.Address == nil || *ban.Address != "2001:db8::1" || ban.Time != old.Format(manage.AuditTimeFormat) ||
				ban.Details["bannedUntil"] != until.Format(time.RFC3339) || ban.Actor != domain.ServerActor || ban.Env != "production" {
				t.Errorf("the address's ban: %+v", ban)
			}
			if rolled.KeyID == nil || *rolled.KeyID != 1 || rolled.NewKeyID == nil || *rolled.NewKeyID != 3 || rolled.Address != nil ||
				rolled.Details["overlap"] != "24h0m0s" || rolled.Actor != actor || rolled.ID != 3 {
				t.Errorf("the roll: %+v", rolled)
			}
		})
	})
}

func TestAuditCommandRefusesBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		flag string // named on the error line
	}{
		{"--since yesterday", []string{"--since", "yesterday"}, "--since"},
		{"--since a date without a time", []string{"--since", "2026-03-01"}, "--since"},
		{"--since a negative duration", []string{"--since", "-1h"}, "--since"},
		{"--since 0", []string{"--since", "0"}, "--since"},
		{"an empty --since", []string{"--since", ""}, "--since"},
		{"--action of no such action", []string{"--action", "key.deleted"}, "--action"},
		{"--key 0", []string{"--key", "0"}, "--key"},
		{"--key not a number", []string{"--key", "alpha"}, "-key"},
		{"an argument", []string{"1"}, "argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
				db := filepath.Join(t.TempDir(), "petstore.db")
				res := petstore(t, nil, append([]string{"audit", "--db", db}, tt.args...)...)
				wantFailure(t, res, 2)
				if !strings.Contains(res.Stderr, tt.flag) {
					t.Errorf("standard error %q does not name %s", res.Stderr, tt.flag)
				}
				testkit.WantNoFile(t, db)
			})
		})
	}
	t.Run("a missing database", func(t *testing.T) {
		t.Parallel()
		viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
			db := filepath.Join(t.TempDir(), "missing.db")
			wantFailure(t, petstore(t, nil, "audit", "--db", db), 1)
			testkit.WantNoFile(t, db)
		})
	})
}

// storedEvents are the events of the database at db (a file or a URL),
// oldest first, read as the audit command reads them.
func storedEvents(t *testing.T, db string, filter domain.AuditFilter) []domain.AuditEvent {
	t.Helper()
	store, err := store.Open(context.Background(), db, false, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	events, err := store.AuditEvents(context.Background(), filter)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// wantNewEvents checks that the events of db are before and then, after
// them, one event like want (its time about now, to the millisecond), and
// returns them all.
func wantNewEvents(t *testing.T, db string, before []domain.AuditEvent, want ...domain.AuditEvent) []domain.AuditEvent {
	t.Helper()
	events := storedEvents(t, db, domain.AuditFilter{})
	if len(events) != len(before)+len(want) {
		t.Fatalf("%d events after %d, want %d more: %+v", len(events), len(before), len(want), events[min(len(before), len(events)):])
	}
	if !slices.EqualFunc(events[:len(before)], before, sameEvent) {
		t.Errorf("the earlier events changed:\n%+v\nwant\n%+v", events[:len(before)], before)
	}
	for i, w := range want {
		got := events[len(before)+i]
		if since := time.Since(got.At); since < -time.Second || since > time.Minute || got.At.Location() != time.UTC ||
			got.At.Nanosecond()%int(time.Millisecond) != 0 {
			t.Errorf("event %s at %v, want about now, in UTC, to the millisecond", got.Action, got.At)
		}
		w.ID, w.At = got.ID, got.At
		if !sameEvent(got, w) {
			t.Errorf("event\n%s\nwant\n%s", eventString(got), eventString(w))
		}
	}
	return events
}

// auditJSONEvent is one element of audit --json.
type auditJSONEvent struct {
	ID       int64          `json:"id"`
	Time     string         `json:"time"`
	Action   string         `json:"action"`
	Actor    string         `json:"actor"`
	KeyID    *int64         `json:"keyId"`
	NewKeyID *int64         `json:"newKeyId"`
	Address  *string        `json:"address"`
	Env      string         `json:"env"`
	Details  map[string]any `json:"details"`
}

func sameEvent(a, b domain.AuditEvent) bool { return eventString(a) == eventString(b) }

// eventString is e with its details as the table holds them.
func eventString(e domain.AuditEvent) string {
	row, err := store.AuditRow(e)
	if err != nil {
		return err.Error()
	}
	parts := make([]string, len(row))
	for i, v := range row {
		switch v := v.(type) {
		case nil:
			parts[i] = "NULL"
		case string:
			parts[i] = v
		case int64:
			parts[i] = strconv.FormatInt(v, 10)
		default:
			parts[i] = "?"
		}
	}
	return strconv.FormatInt(e.ID, 10) + " | " + strings.Join(parts, " | ")
}
