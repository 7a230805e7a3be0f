package server

// The audit trail (docs/production.md, "The audit trail"): each
// change to a key leaves one event, with who made it, when, and what it was;
// the table is append only; copy carries it over.

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/quick"
	"time"

	"petstore/internal/cli"
	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/store"
	"petstore/internal/testkit"

	"github.com/jackc/pgx/v5"
)

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

func TestAuditEventsAreAppendOnly(t *testing.T) {
	t.Parallel()
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
		events, err := s.store.AuditEvents(ctx, domain.AuditFilter{})
		if err != nil || len(events) != 1 || events[0].Actor != testActor {
			t.Errorf("after the refused changes: %+v %v, want the one event as it was", events, err)
		}
		if err := exec(`INSERT INTO audit_events (at, action, actor, env, details) VALUES (1, 'key.banned', 'server', 'production', '{}')`); err != nil {
			t.Errorf("an insert: %v, want it taken", err)
		}
	})
}

// auditWrites is a store that counts the server's writes of bans and
// their audit events, and fails them when told to.
type auditWrites struct {
	store.Storage
	calls atomic.Int32
	fail  atomic.Bool
}

func (w *auditWrites) AddBans(ctx context.Context, started []domain.StartedBan) error {
	w.calls.Add(1)
	if w.fail.Load() {
		return errors.New("disk full")
	}
	return w.Storage.AddBans(ctx, started)
}

// withAuditWrites is opts with a store that counts the audit writes; the
// server's wrapped store is then the *auditWrites.
func withAuditWrites(opts testOptions) testOptions {
	opts.wrapStore = func(st store.Storage) store.Storage { return &auditWrites{Storage: st} }
	return opts
}

// banOf sends requests with key ("" for none, counted by client address)
// until one is answered temporarily_banned, and fails when more than limit
// were needed.
func (s *testServer) banOf(key string, limit int) {
	s.t.Helper()
	for range limit {
		w := s.do("GET", "/v1/pets", key, "")
		if strings.Contains(w.Body.String(), httpapi.CodeTemporarilyBanned) {
			return
		}
	}
	s.t.Fatalf("no ban after %d requests", limit)
}

// banEvents are the key.banned events of the server's database.
func (s *testServer) banEvents() []domain.AuditEvent {
	s.t.Helper()
	events, err := s.store.AuditEvents(context.Background(), domain.AuditFilter{Action: domain.AuditKeyBanned})
	if err != nil {
		s.t.Fatal(err)
	}
	return events
}

func TestEachBanLeavesOneEventWrittenInABatch(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, opts testOptions) {
		forEachLimiter(t, withAuditWrites(opts), func(t *testing.T, s *testServer) {
			writes := s.wrapped.(*auditWrites)
			k, key := s.mustCreate(s.keyTerms("enterprise", domain.Limits{PerMinute: 1, PerDay: 100}))
			s.banOf(key, 20)
			start := s.clock.now()
			for range 5 { // the ban goes on; it started once
				wantError(t, s.do("GET", "/v1/pets", key, ""), 429, httpapi.CodeTemporarilyBanned)
			}
			if n := writes.calls.Load(); n != 0 {
				t.Errorf("%d writes of audit events while answering requests, want none before the flush", n)
			}
			s.flushAudit()
			until := start.Add(15 * time.Minute)
			wantBan := domain.AuditEvent{Action: domain.AuditKeyBanned, Actor: domain.ServerActor, KeyID: k.ID, Env: "production",
				Details: domain.AuditDetails{Plan: "enterprise", PerMinute: 1, PerDay: 100, BannedUntil: &until, BanFor: "15m0s"}}
			wantBan.At = domain.AuditTime(start)
			if bans := s.banEvents(); len(bans) != 1 || !sameEvent(bans[0], withID(wantBan, bans[0].ID)) {
				t.Fatalf("bans %+v, want one: %s", bans, eventString(wantBan))
			}

			s.clock.advance(16 * time.Minute) // the ban is over; the next one is a second event
			s.banOf(key, 20)
			s.flushAudit()
			if bans := s.banEvents(); len(bans) != 2 || bans[1].KeyID != k.ID || !bans[1].At.Equal(domain.AuditTime(s.clock.now())) {
				t.Errorf("bans %+v, want a second one now", bans)
			}
			if n := writes.calls.Load(); n != 2 {
				t.Errorf("%d writes of audit events, want one a flush", n)
			}
		})
	})
}

func withID(e domain.AuditEvent, id int64) domain.AuditEvent {
	e.ID = id
	return e
}

func TestTheBanOfAnAddressOrARolledKeyNamesIt(t *testing.T) {
	t.Parallel()
	forEachLimiter(t, testOptions{}, func(t *testing.T, s *testServer) {
		s.banOf("", 100) // no key: the client address 192.0.2.1 of httptest
		old, _ := s.mustCreate(s.keyTerms("enterprise", domain.Limits{PerMinute: 1, PerDay: 100}))
		_, _, rolled := s.roll(old.ID, time.Hour)
		s.banOf(rolled, 20)
		s.flushAudit()
		bans := s.banEvents()
		if len(bans) != 2 {
			t.Fatalf("bans %+v, want the address's and the key's", bans)
		}
		if b := bans[0]; b.Address != "192.0.2.1" || b.KeyID != 0 || b.Details.Plan != "" || b.Details.PerMinute != 60 {
			t.Errorf("the address's ban: %s, want 192.0.2.1 with no key, at the Free plan's figures", eventString(b))
		}
		if b := bans[1]; b.KeyID != old.ID+1 || b.Details.Budget != old.ID || b.Address != "" {
			t.Errorf("the rolled key's ban: %s, want key %d, budget %d", eventString(b), old.ID+1, old.ID)
		}
	})
}

// TestABanThroughTwoServersLeavesOneEvent: of the servers sharing a Redis,
// only the one whose request started the ban writes it.
func TestABanThroughTwoServersLeavesOneEvent(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, opts testOptions) {
		opts.redis = true
		a := newTestServerWith(t, opts)
		b := a.otherServer()
		key := a.mustCreateKey("enterprise", domain.Limits{PerMinute: 1, PerDay: 100})
		servers := []*testServer{a, b}
		banned := 0
		for i := 0; banned < 6 && i < 40; i++ {
			if w := servers[i%2].do("GET", "/v1/pets", key, ""); strings.Contains(w.Body.String(), httpapi.CodeTemporarilyBanned) {
				banned++ // through both servers
			}
		}
		a.flushAudit()
		b.flushAudit()
		if bans := a.banEvents(); len(bans) != 1 || banned != 6 {
			t.Errorf("%d banned answers, and bans %+v; want one ban event", banned, bans)
		}
	})
}

func TestAFailedWriteOfBansIsRetried(t *testing.T) {
	t.Parallel()
	s := newTestServerWith(t, withAuditWrites(testOptions{}))
	writes := s.wrapped.(*auditWrites)
	writes.fail.Store(true)
	s.banOf(s.mustCreateKey("enterprise", domain.Limits{PerMinute: 1, PerDay: 100}), 20)
	if err := s.startedBans.Flush(context.Background(), s.store.AddBans); err == nil {
		t.Fatal("a flush into a store that fails: no error")
	}
	writes.fail.Store(false)
	s.flushAudit()
	if bans := s.banEvents(); len(bans) != 1 {
		t.Errorf("bans %+v after the retry, want the one", bans)
	}
}

// secretForms are the ways a key could leak: its text, and its hash in hex
// and base64.
func secretForms(token string) []string {
	hash := domain.HashKey(token)
	return []string{token, hex.EncodeToString(hash[:]), base64.StdEncoding.EncodeToString(hash[:]),
		base64.RawURLEncoding.EncodeToString(hash[:]), string(hash[:])}
}

// auditViews are the views of the trail of s: its rows as the database
// holds them, and audit's lines and JSON.
func auditViews(t *testing.T, s *testServer) []string {
	t.Helper()
	events, err := s.store.AuditEvents(context.Background(), domain.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var rows strings.Builder
	for _, e := range events {
		rows.WriteString(eventString(e) + "\n")
	}
	var lines, jsonOut strings.Builder
	if err := cli.WriteAuditLines(&lines, events); err != nil {
		t.Fatal(err)
	}
	if err := cli.WriteAuditJSON(&jsonOut, events); err != nil {
		t.Fatal(err)
	}
	return []string{rows.String(), lines.String(), jsonOut.String()}
}

func noSecretIn(t *testing.T, views, secrets []string) bool {
	t.Helper()
	for _, view := range views {
		view = strings.ToLower(view)
		for _, secret := range secrets {
			if strings.Contains(view, strings.ToLower(secret)) {
				t.Errorf("%q, a key or its hash, is in:\n%.2000s", secret, view)
				return false
			}
		}
	}
	return true
}

func TestAuditEventsAreCountedByAction(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, opts testOptions) {
		m := newMetrics()
		opts.metrics = m
		s := newTestServerWith(t, opts)
		counts := func() map[string]float64 {
			t.Helper()
			return testkit.CounterValues(t, testkit.Scrape(t, m.Handler()), "petstore_audit_events_total", "action")
		}
		want := make(map[string]float64)
		for _, action := range domain.AuditActions {
			want[action] = 0
		}
		if got := counts(); !maps.Equal(got, want) {
			t.Errorf("an empty trail: %v, want %v", got, want)
		}
		k, _ := s.mustCreate(s.keyTerms("free"))
		_, key := s.mustCreate(s.keyTerms("enterprise", domain.Limits{PerMinute: 1, PerDay: 100}))
		s.roll(k.ID, time.Hour)
		if _, err := s.store.RevokeKey(context.Background(), k.ID, testActor); err != nil {
			t.Fatal(err)
		}
		s.banOf(key, 20)
		want[domain.AuditKeyCreated], want[domain.AuditKeyRolled], want[domain.AuditKeyRevoked] = 2, 1, 1
		if got := counts(); !maps.Equal(got, want) {
			t.Errorf("before the flush of the ban: %v, want %v", got, want)
		}
		s.flushAudit()
		want[domain.AuditKeyBanned] = 1
		if got := counts(); !maps.Equal(got, want) {
			t.Errorf("after: %v, want %v", got, want)
		}
	})
}

func TestTheAuditTrailPagesBackFromTheNewestOnEitherDatabase(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, opts testOptions) {
		s := newTestServerWith(t, opts)
		admin := s.mustCreateAdmin("portal", domain.ScopeAuditRead)
		var want []int64
		for range 5 {
			k, _ := s.mustCreate(s.keyTerms("free"))
			want = append([]int64{k.ID}, want...)
		}
		var got []int64
		for _, e := range auditPages(t, s, admin, "/admin/v1/audit?action=key.created&order=newest&limit=2") {
			got = append(got, *e.KeyID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("newest first, two a page: keys %v, want %v", got, want)
		}
	})
}

// TestNoEventHoldsAKeyOrItsHash: whatever is done to keys (made with any
// plan, scopes and name, rolled, revoked, banned), no event of the trail,
// as stored or as audit prints it, holds the text of a key or its hash; and
// no key's text is anywhere in a SQLite database's files.
func TestNoEventHoldsAKeyOrItsHash(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, opts testOptions) {
		s := newTestServerWith(t, opts)
		var tokens, secrets []string
		step := func(plan, scopes uint8, name string, roll, revoke, ban bool) bool {
			terms := s.keyTerms([]string{"free", "pro", "business", "enterprise"}[plan%4], domain.Limits{PerMinute: 1, PerDay: 50})
			if terms.Plan != "enterprise" {
				terms = s.keyTerms(terms.Plan)
			}
			terms.Scopes, terms.Name = domain.ScopeSet(scopes%3+1), name
			k, token := s.mustCreate(terms)
			tokens = append(tokens, token)
			if roll {
				_, _, rolled := s.roll(k.ID, time.Hour)
				tokens = append(tokens, rolled)
				token = rolled
			}
			secrets = secrets[:0]
			for _, token := range tokens {
				secrets = append(secrets, secretForms(token)...)
			}
			if ban && terms.Plan == "enterprise" {
				s.banOf(token, 20)
				s.flushAudit()
			}
			if revoke {
				if _, err := s.store.RevokeKey(context.Background(), k.ID, testActor); err != nil {
					t.Fatal(err)
				}
			}
			return noSecretIn(t, auditViews(t, s), secrets)
		}
		if err := quick.Check(step, &quick.Config{MaxCount: 30}); err != nil {
			t.Error(err)
		}
		if len(tokens) < 30 {
			t.Errorf("only %d keys were tried", len(tokens))
		}
		noSecretIn(t, []string{viaCLI(t, nil, "audit", "--db", s.dbPath).stdout, viaCLI(t, nil, "audit", "--db", s.dbPath, "--json").stdout}, secrets)
		if !opts.postgres {
			for _, file := range []string{s.dbPath, s.dbPath + "-wal"} {
				b, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				noSecretIn(t, []string{string(b)}, tokens)
			}
		}
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
