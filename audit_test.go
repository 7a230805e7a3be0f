package main

// The audit trail (DESIGN.md "Restricted keys and the audit trail"): each
// change to a key leaves one event, with who made it, when, and what it was;
// the table is append only; copy carries it over.

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// storedEvents are the events of the database at db (a file or a URL),
// oldest first, read as the audit command reads them.
func storedEvents(t *testing.T, db string, filter auditFilter) []auditEvent {
	t.Helper()
	store, err := openStorage(context.Background(), db, false, time.Now)
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
func wantNewEvents(t *testing.T, db string, before []auditEvent, want ...auditEvent) []auditEvent {
	t.Helper()
	events := storedEvents(t, db, auditFilter{})
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

func sameEvent(a, b auditEvent) bool { return eventString(a) == eventString(b) }

// eventString is e with its details as the table holds them.
func eventString(e auditEvent) string {
	row, err := auditRow(e)
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

func TestEachKeyCommandLeavesOneEvent(t *testing.T) {
	t.Parallel()
	actor := commandActor()
	eachStore(t, func(t *testing.T, opts testOptions) {
		bothWays(t, func(t *testing.T, petstore cliRunner) {
			db := opts.dbAt(t, filepath.Join(t.TempDir(), "keys.db"))
			run := func(want int, args ...string) {
				t.Helper()
				if res := petstore(t, nil, args...); res.code != want {
					t.Fatalf("%s: exit status %d, want %d\n%s", strings.Join(args, " "), res.code, want, res.stderr)
				}
			}

			mustCreateKeyCLI(t, petstore, "--db", db, "--plan", "enterprise", "--rpm", "7", "--rpd", "70", "--name", "billing",
				"--scope", "pets:read", "--expires", "2099-01-31T00:00:00Z")
			expires := time.Date(2099, 1, 31, 0, 0, 0, 0, time.UTC)
			events := wantNewEvents(t, db, nil, auditEvent{
				Action: auditKeyCreated, Actor: actor, KeyID: 1, Env: "production",
				Details: auditDetails{Name: "billing", Plan: "enterprise", PerMinute: 7, PerDay: 70, Scopes: []string{"pets:read"}, Expires: &expires},
			})

			mustCreateKeyCLI(t, petstore, "--db", db, "--env", "staging", "--plan", "free")
			events = wantNewEvents(t, db, events, auditEvent{
				Action: auditKeyCreated, Actor: actor, KeyID: 2, Env: "staging",
				Details: auditDetails{Plan: "free", PerMinute: 60, PerDay: 1000, Scopes: []string{"pets:read", "pets:write"}},
			})

			run(0, "keys", "roll", "--db", db, "--overlap", "1h", "1")
			stops := listKeysJSON(t, petstore, db)[0].Expires
			events = wantNewEvents(t, db, events, auditEvent{
				Action: auditKeyRolled, Actor: actor, KeyID: 1, NewKeyID: 3, Env: "production",
				Details: auditDetails{Name: "billing", Plan: "enterprise", PerMinute: 7, PerDay: 70, Scopes: []string{"pets:read"},
					Expires: &expires, Overlap: "1h0m0s", OldKeyStops: stops},
			})

			run(0, "keys", "revoke", "--db", db, "2")
			events = wantNewEvents(t, db, events, auditEvent{
				Action: auditKeyRevoked, Actor: actor, KeyID: 2, Env: "staging",
				Details: auditDetails{Plan: "free", PerMinute: 60, PerDay: 1000, Scopes: []string{"pets:read", "pets:write"}},
			})

			// What changes nothing, or fails, leaves nothing.
			run(0, "keys", "revoke", "--db", db, "2")
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
	eachStore(t, func(t *testing.T, opts testOptions) {
		db := opts.dbAt(t, filepath.Join(t.TempDir(), "petstore.db"))
		for range 2 {
			p := runServing(t, nil, withTestRedis(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db})...)
			p.stop(t)
		}
		wantNewEvents(t, db, nil, auditEvent{
			Action: auditKeyCreated, Actor: serverActor, KeyID: 1, Env: "production",
			Details: auditDetails{Name: "bootstrap", Plan: "free", PerMinute: 60, PerDay: 1000, Scopes: []string{"pets:read", "pets:write"}},
		})
	})
}

func TestAuditEventsAreAppendOnly(t *testing.T) {
	eachStore(t, func(t *testing.T, opts testOptions) {
		s := newTestServerWith(t, opts)
		s.mustCreateKey("free")
		ctx := context.Background()
		var exec func(query string) error
		if opts.postgres {
			conn, err := pgx.Connect(ctx, s.dbPath)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			exec = func(query string) error { _, err := conn.Exec(ctx, query); return err }
		} else {
			db, err := sql.Open("sqlite", "file:"+s.dbPath)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			exec = func(query string) error { _, err := db.Exec(query); return err }
		}
		for _, query := range []string{
			`UPDATE audit_events SET actor = 'someone else'`,
			`UPDATE audit_events SET details = '{}' WHERE id = 1`,
			`DELETE FROM audit_events`,
			`DELETE FROM audit_events WHERE id = 1`,
		} {
			if err := exec(query); err == nil || !strings.Contains(err.Error(), "append only") {
				t.Errorf("%s: %v, want it refused as append only", query, err)
			}
		}
		if opts.postgres {
			if err := exec(`TRUNCATE audit_events`); err == nil || !strings.Contains(err.Error(), "append only") {
				t.Errorf("TRUNCATE: %v, want it refused as append only", err)
			}
		}
		events, err := s.store.AuditEvents(ctx, auditFilter{})
		if err != nil || len(events) != 1 || events[0].Actor != testActor {
			t.Errorf("after the refused changes: %+v %v, want the one event as it was", events, err)
		}
		if err := exec(`INSERT INTO audit_events (at, action, actor, env, details) VALUES (1, 'key.banned', 'server', 'production', '{}')`); err != nil {
			t.Errorf("an insert: %v, want it taken", err)
		}
	})
}
