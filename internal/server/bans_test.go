package server

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/limits"
	"petstore/internal/store"
	"petstore/internal/testkit"
)

// sameBan tells whether two bans are the same ban, in the same state.
func sameBan(a, b domain.Ban) bool {
	return a.Subject == b.Subject && a.Since.Equal(b.Since) && a.Until.Equal(b.Until) && a.LiftedAt.Equal(b.LiftedAt)
}

func TestBanSubjects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string // want "" : refused
	}{
		{"key:13", "key:13"},
		{"address:203.0.113.7", "address:203.0.113.7"},
		{"address:::ffff:203.0.113.7", "address:203.0.113.7"},
		{"address:2001:db8:1:2:3:4:5:6", "address:2001:db8:1:2::/64"},
		{"address:2001:db8:1:2::/64", "address:2001:db8:1:2::/64"},
		{"address:2001:db8:1:2:ffff::/64", "address:2001:db8:1:2::/64"},
		{"address:fe80::1%eth0", "address:fe80::/64"},
		{"key:0", ""},
		{"key:-1", ""},
		{"key:x", ""},
		{"key:", ""},
		{"13", ""},
		{"address:", ""},
		{"address:203.0.113.0/24", ""},
		{"address:2001:db8::/48", ""},
		{"address:example.com", ""},
		{"user:1", ""},
		{"", ""},
	}
	for _, tc := range tests {
		id, err := domain.ParseBanSubject(tc.in)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%q: read as %s, want it refused", tc.in, id)
		case tc.want != "" && err != nil:
			t.Errorf("%q: %v, want %s", tc.in, err, tc.want)
		case tc.want != "" && id.String() != tc.want:
			t.Errorf("%q: read as %s, want %s", tc.in, id, tc.want)
		}
	}
}

// banTerms are the terms of a key banned after a few requests: one a minute.
var banTerms = domain.Limits{PerMinute: 1, PerDay: 100}

// stored are the bans in force the server's database holds.
func (s *testServer) stored() []domain.Ban {
	s.t.Helper()
	bans, err := s.store.Bans(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	return bans
}

// refreshBans reads what changed in the bans table, as every server does
// every keyRefreshEvery.
func (s *testServer) refreshBans() {
	s.t.Helper()
	if err := s.bans.Refresh(context.Background()); err != nil {
		s.t.Fatal(err)
	}
}

func TestABanIsStoredWithItsEventAndLiftedByAnyKeyOfItsBudget(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, opts testOptions) {
		ctx := context.Background()
		s := newTestServerWith(t, opts)
		old, token := s.mustCreate(s.keyTerms("enterprise", banTerms))
		s.banOf(token, 20)
		if got := s.stored(); len(got) != 0 {
			t.Fatalf("bans stored before the usage batch: %+v", got)
		}
		s.flushAudit()
		start := s.clock.now()
		want := domain.Ban{Subject: domain.CallerID{KeyID: old.ID}, Since: start, Until: start.Add(15 * time.Minute)}
		if got := s.stored(); len(got) != 1 || !sameBan(got[0], want) {
			t.Fatalf("stored bans %+v, want %+v", got, want)
		}
		if events := s.banEvents(); len(events) != 1 || events[0].KeyID != old.ID {
			t.Errorf("key.banned events %+v, want one of key %d", events, old.ID)
		}

		// The roll's new key names the same budget, and so the same ban.
		_, rolled, _ := s.roll(old.ID, time.Hour)
		s.clock.advance(time.Minute)
		lifted, err := s.store.LiftBan(ctx, domain.CallerID{KeyID: rolled.ID}, testActor, "production")
		want.LiftedAt = s.clock.now()
		if err != nil || !sameBan(lifted, want) {
			t.Fatalf("lift by the rolled key: %+v, %v; want %+v", lifted, err, want)
		}
		events, _ := s.store.AuditEvents(ctx, domain.AuditFilter{Action: domain.AuditBanLifted})
		if len(events) != 1 || events[0].KeyID != rolled.ID || events[0].Details.Budget != old.ID || events[0].Actor != testActor ||
			!events[0].At.Equal(s.clock.now()) || !events[0].Details.BannedUntil.Equal(want.Until) {
			t.Errorf("ban.lifted events %+v, want one of key %d, budget %d, by %s, now", events, rolled.ID, old.ID, testActor)
		}
		if got := s.stored(); len(got) != 0 {
			t.Errorf("bans in force after the lift: %+v", got)
		}
		for _, subject := range []domain.CallerID{{KeyID: old.ID}, {KeyID: 99}, {Addr: netip.MustParseAddr("192.0.2.1")}} {
			if _, err := s.store.LiftBan(ctx, subject, testActor, "production"); !isKind(err, domain.KindNotFound) {
				t.Errorf("lift of %s, not banned: %v, want not found", subject, err)
			}
		}
		if events, _ := s.store.AuditEvents(ctx, domain.AuditFilter{Action: domain.AuditBanLifted}); len(events) != 1 {
			t.Errorf("%d ban.lifted events after lifts that found no ban, want 1", len(events))
		}

		// A ban that began before the lift (stored late) stays lifted; one
		// that began after it is a new ban.
		late := domain.StartedBan{Ban: domain.Ban{Subject: want.Subject, Since: start.Add(time.Second), Until: want.Until.Add(time.Second)}}
		late.Event = domain.KeyEvent(domain.AuditKeyBanned, old, domain.ServerActor, late.Ban.Since)
		if err := s.store.AddBans(ctx, []domain.StartedBan{late}); err != nil {
			t.Fatal(err)
		}
		if got := s.stored(); len(got) != 0 {
			t.Errorf("a ban that began before the lift, stored after it: %+v in force, want none", got)
		}
		again := late
		again.Ban.Since, again.Ban.Until = s.clock.now().Add(time.Second), s.clock.now().Add(16*time.Minute)
		if err := s.store.AddBans(ctx, []domain.StartedBan{again}); err != nil {
			t.Fatal(err)
		}
		if got := s.stored(); len(got) != 1 || !sameBan(got[0], again.Ban) {
			t.Errorf("a ban after the lift: %+v in force, want %+v", got, again.Ban)
		}
		changes, err := s.store.BanChanges(ctx, 0)
		if err != nil || len(changes) != 1 || !sameBan(changes[0], again.Ban) {
			t.Errorf("every ban from version 0: %+v, %v; want the one", changes, err)
		}
		if after, _ := s.store.BanChanges(ctx, changes[0].Version); len(after) != 0 {
			t.Errorf("changes after the last version: %+v, want none", after)
		}
	})
}

// TestABanWrittenTwiceIsAuditedAndSentOnce: a ban written again (its first
// write committed although the caller heard it fail, and the next flush
// took it once more) leaves one key.banned event and, for a key, queues one
// webhook; a later ban of the same subject is a ban of its own.
func TestABanWrittenTwiceIsAuditedAndSentOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, opts testOptions) {
		ctx := context.Background()
		s := webhookServer(t, opts)
		endpoint := s.addEndpoint(testkit.NewReceiver(t), domain.AuditKeyBanned)
		key, _ := s.mustCreate(s.keyTerms("pro"))
		start := s.clock.now()
		byKey := domain.StartedBan{Ban: domain.Ban{Subject: domain.CallerID{KeyID: key.ID}, Since: start, Until: start.Add(15 * time.Minute)},
			Event: domain.KeyEvent(domain.AuditKeyBanned, key, domain.ServerActor, start)}
		addr := domain.CallerID{Addr: netip.MustParseAddr("192.0.2.7")}
		byAddress := domain.StartedBan{Ban: domain.Ban{Subject: addr, Since: start, Until: start.Add(15 * time.Minute)},
			Event: domain.AuditEvent{At: start, Action: domain.AuditKeyBanned, Actor: domain.ServerActor, Address: addr.AddressText(), Env: "production"}}
		later := byKey
		later.Ban.Since, later.Ban.Until = start.Add(time.Second), start.Add(16*time.Minute)
		later.Event = domain.KeyEvent(domain.AuditKeyBanned, key, domain.ServerActor, later.Ban.Since)
		for i, batch := range [][]domain.StartedBan{{byKey, byAddress}, {byKey, byAddress}, {byKey}, {later, later}} {
			if err := s.store.AddBans(ctx, batch); err != nil {
				t.Fatalf("write %d: %v", i+1, err)
			}
		}
		var got []string
		for _, e := range s.banEvents() {
			got = append(got, fmt.Sprintf("key %d %s at %s", e.KeyID, e.Address, e.At.Format(time.StampMilli)))
		}
		want := []string{
			fmt.Sprintf("key %d  at %s", key.ID, start.Format(time.StampMilli)),
			fmt.Sprintf("key 0 192.0.2.7 at %s", start.Format(time.StampMilli)),
			fmt.Sprintf("key %d  at %s", key.ID, later.Ban.Since.Format(time.StampMilli)),
		}
		if !slices.Equal(got, want) {
			t.Errorf("key.banned events:\n%s\nwant one a ban:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// An address's ban is no webhook: the key's two bans are.
		deliveries, err := s.store.WebhookDeliveries(ctx, domain.DeliveryFilter{EndpointID: endpoint.ID})
		if err != nil || len(deliveries) != 2 {
			t.Errorf("deliveries queued: %d (%v), want 2, one for each of the key's bans", len(deliveries), err)
		}
	})
}

// isKind tells whether err is a domainError of kind.
func isKind(err error, kind domain.Kind) bool {
	var d *domain.Error
	return errors.As(err, &d) && d.Kind == kind
}

func TestALiftReachesTheLimiterAndEndsTheWaitToo(t *testing.T) {
	t.Parallel()
	forEachLimiter(t, testOptions{}, func(t *testing.T, s *testServer) {
		k, token := s.mustCreate(s.keyTerms("enterprise", banTerms))
		s.clock.advance(123456 * time.Nanosecond) // between two milliseconds, as a real clock is: the table keeps milliseconds
		s.banOf(token, 20)
		s.flushAudit()
		s.refreshBans()
		wantError(t, s.do("GET", "/v1/pets", token, ""), 429, httpapi.CodeTemporarilyBanned)
		if _, err := s.store.LiftBan(context.Background(), domain.CallerID{KeyID: k.ID}, testActor, "production"); err != nil {
			t.Fatal(err)
		}
		s.refreshBans()
		// Told to wait, not banned at once: the lift ended the wait too.
		wantError(t, s.do("GET", "/v1/pets", token, ""), 429, httpapi.CodeRateLimited)
		for range 10 { // --ban-after 10
			wantError(t, s.do("GET", "/v1/pets", token, ""), 429, httpapi.CodeRateLimited)
		}
		wantError(t, s.do("GET", "/v1/pets", token, ""), 429, httpapi.CodeTemporarilyBanned)
	})
}

func TestAnIPv6SlashSixtyFourIsLimitedAndBannedAsOne(t *testing.T) {
	t.Parallel()
	forEachLimiter(t, testOptions{trustProxy: true}, func(t *testing.T, s *testServer) {
		from := func(addr string) *httptest.ResponseRecorder {
			return s.do("GET", "/v1/pets", "", "", "X-Forwarded-For", addr)
		}
		for i := 0; ; i++ {
			w := from(fmt.Sprintf("2001:db8:1:2::%x", i+1)) // a new address each time, in one /64
			if w.Code == 429 && strings.Contains(w.Body.String(), httpapi.CodeTemporarilyBanned) {
				break
			}
			if i > 100 {
				t.Fatalf("no ban after %d requests from one /64: %d %s", i, w.Code, w.Body)
			}
		}
		wantError(t, from("2001:db8:1:2:ffff:ffff:ffff:ffff"), 429, httpapi.CodeTemporarilyBanned)
		wantError(t, from("2001:db8:1:3::1"), 401, httpapi.CodeUnauthorized)
		wantError(t, from("192.0.2.7"), 401, httpapi.CodeUnauthorized)
		s.flushAudit()
		want := "address:2001:db8:1:2::/64"
		if got := s.stored(); len(got) != 1 || got[0].Subject.String() != want {
			t.Errorf("stored bans %+v, want %s", got, want)
		}
		if events := s.banEvents(); len(events) != 1 || events[0].Address != "2001:db8:1:2::/64" {
			t.Errorf("key.banned events %+v, want one of address 2001:db8:1:2::/64", events)
		}
	})
}

func TestAddressBansAreCappedAndPrunedWhenTheyEnd(t *testing.T) {
	if testkit.RaceDetector {
		// One goroutine writes 20,000 rows: nothing for the detector to find,
		// and a minute of SQLite under it (CI's race run timed it out).
		t.Skip("the cap's 10,001 bans in one write: checked by the plain run")
	}
	t.Parallel()
	eachStore(t, func(t *testing.T, opts testOptions) {
		t.Parallel() // each engine's 10,001 bans take seconds
		ctx := context.Background()
		opts.dbTimeout = time.Minute // the cap's 10,000 bans in one write, on a loaded machine
		s := newTestServerWith(t, opts)
		now := s.clock.now()
		k, _ := s.mustCreate(s.keyTerms("free"))
		banned := func(id domain.CallerID, since, until time.Time) domain.StartedBan {
			e := domain.AuditEvent{At: since, Action: domain.AuditKeyBanned, Actor: domain.ServerActor, Env: "production", KeyID: id.KeyID}
			if id.KeyID == 0 {
				e.Address = id.AddressText()
			}
			return domain.StartedBan{Ban: domain.Ban{Subject: id, Since: since, Until: until}, Event: e}
		}
		// One that ends in a minute, then more than the cap, each ending a
		// second after the one before, and a key's.
		early := banned(domain.CallerID{Addr: netip.MustParseAddr("198.51.100.1")}, now, now.Add(time.Minute))
		if err := s.store.AddBans(ctx, []domain.StartedBan{early, banned(domain.CallerID{KeyID: k.ID}, now, now.Add(time.Minute))}); err != nil {
			t.Fatal(err)
		}
		var many []domain.StartedBan
		for i := range store.MaxStoredAddressBans + 1 {
			addr := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
			many = append(many, banned(domain.CallerID{Addr: addr}, now, now.Add(15*time.Minute+time.Duration(i)*time.Second)))
		}
		if err := s.store.AddBans(ctx, many); err != nil {
			t.Fatal(err)
		}
		got := s.stored()
		addresses := slices.DeleteFunc(slices.Clone(got), func(b domain.Ban) bool { return b.Subject.KeyID != 0 })
		if len(addresses) != store.MaxStoredAddressBans || len(got) != store.MaxStoredAddressBans+1 {
			t.Fatalf("%d bans stored, %d of addresses; want the cap, %d, and the key's", len(got), len(addresses), store.MaxStoredAddressBans)
		}
		for _, dropped := range []domain.CallerID{early.Ban.Subject, many[0].Ban.Subject} {
			if slices.ContainsFunc(got, func(b domain.Ban) bool { return b.Subject == dropped }) {
				t.Errorf("%s, among the two that end soonest, is still stored", dropped)
			}
		}

		// Once they end, they go at the next write.
		s.clock.advance(4 * time.Hour)
		last := banned(domain.CallerID{Addr: domain.LimitedAddr(netip.MustParseAddr("2001:db8::1"))}, s.clock.now(), s.clock.now().Add(time.Minute))
		if err := s.store.AddBans(ctx, []domain.StartedBan{last}); err != nil {
			t.Fatal(err)
		}
		if changes, _ := s.store.BanChanges(ctx, 0); len(changes) != 1 || !sameBan(changes[0], last.Ban) {
			t.Errorf("%d rows after the others ended, want only the new one", len(changes))
		}
	})
}

// A server that knows a ban from the database keeps it whatever Redis does:
// emptied, or away.
func TestABanOutlivesAnEmptyRedisAndARedisAway(t *testing.T) {
	t.Parallel()
	proxy, redisURL := testkit.FaultProxyTo(t, testkit.RedisURL(t))
	a := newTestServerWith(t, testOptions{redis: true, redisURL: testkit.PatientRedisURL(t, redisURL)})
	b := a.otherServer()
	k, token := a.mustCreate(a.keyTerms("enterprise", banTerms))
	a.banOf(token, 20)
	a.flushAudit()
	for _, s := range []*testServer{a, b} {
		s.refreshBans()
	}
	testkit.DeleteRedisKeys(t, testkit.RedisURL(t), a.redisPrefix) // Redis restarted empty
	a.clock.advance(time.Minute)                                   // the minute bucket is full again
	for i, s := range []*testServer{b, a} {
		w := s.do("GET", "/v1/pets", token, "")
		wantError(t, w, 429, httpapi.CodeTemporarilyBanned)
		if got := testkit.IntHeader(t, w, "Retry-After"); got != 840 {
			t.Errorf("server %d after Redis lost the ban: Retry-After %d, want the rest of the ban, 840", i, got)
		}
	}
	testkit.DeleteRedisKeys(t, testkit.RedisURL(t), a.redisPrefix)
	proxy.Set("drop") // and now away: each server's fallback limits alone
	for i, s := range []*testServer{a, b} {
		wantError(t, s.do("GET", "/v1/pets", token, ""), 429, httpapi.CodeTemporarilyBanned)
		if limits.Outages(s.limiter.(*limits.Redis)) != 1 {
			t.Errorf("server %d: not on its fallback", i)
		}
	}
	// A lift reaches the fallback at once, and Redis once it answers.
	if _, err := a.store.LiftBan(context.Background(), domain.CallerID{KeyID: k.ID}, testActor, "production"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*testServer{a, b} {
		s.refreshBans()
		if w := s.do("GET", "/v1/pets", token, ""); w.Code != 200 {
			t.Errorf("after the lift, with Redis away: %d %s, want 200", w.Code, w.Body)
		}
	}
}

// The admin routes of bans, through the admin listener's router.
func TestAdminBansAreListedAndLifted(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, opts testOptions) {
		s := newTestServerWith(t, opts)
		token := s.mustCreateAdmin("portal", domain.AllAdminScopes)
		do := func(method, target string) *httptest.ResponseRecorder { return s.admin(method, target, token, "") }
		k, key := s.mustCreate(s.keyTerms("enterprise", banTerms))
		s.banOf(key, 20)
		s.flushAudit()
		if w := do("GET", "/admin/v1/bans"); w.Code != 200 || w.Body.String() != fmt.Sprintf(
			`[{"subject":"key:%d","since":"2026-03-10T12:00:00Z","until":"2026-03-10T12:15:00Z"}]`+"\n", k.ID) {
			t.Errorf("GET /admin/v1/bans: %d %s", w.Code, w.Body)
		}
		for _, tc := range []struct {
			subject string
			status  int
			code    string
		}{
			{"key:x", 400, httpapi.CodeInvalidRequest},
			{"address:2001:db8::%2F48", 400, httpapi.CodeInvalidRequest},
			{"address:2001:db8::1", 404, httpapi.CodeNotFound},
			{"address:2001:db8::%2F64", 404, httpapi.CodeNotFound},
			{fmt.Sprintf("key:%d", k.ID+1), 404, httpapi.CodeNotFound},
		} {
			w := do("DELETE", "/admin/v1/bans/"+tc.subject)
			wantError(t, w, tc.status, tc.code)
			if tc.status == 400 && !strings.Contains(w.Body.String(), "subject") {
				t.Errorf("DELETE %s: %s, want the message to name the subject", tc.subject, w.Body)
			}
		}
		if w := do("DELETE", fmt.Sprintf("/admin/v1/bans/key:%d", k.ID)); w.Code != 204 || w.Body.Len() != 0 {
			t.Errorf("DELETE of the ban: %d %s, want 204 and no body", w.Code, w.Body)
		}
		wantError(t, do("DELETE", fmt.Sprintf("/admin/v1/bans/key:%d", k.ID)), 404, httpapi.CodeNotFound)
		if w := do("GET", "/admin/v1/bans"); w.Code != 200 || w.Body.String() != "[]\n" {
			t.Errorf("GET /admin/v1/bans after the lift: %d %s, want []", w.Code, w.Body)
		}
		events, _ := s.store.AuditEvents(context.Background(), domain.AuditFilter{Action: domain.AuditBanLifted})
		if len(events) != 1 || events[0].Actor != "admin:portal" || events[0].KeyID != k.ID {
			t.Errorf("ban.lifted events %+v, want one by admin:portal of key %d", events, k.ID)
		}
		s.refreshBans()
		if w := s.do("GET", "/v1/pets", key, ""); strings.Contains(w.Body.String(), httpapi.CodeTemporarilyBanned) {
			t.Errorf("after the lift over the admin API: %d %s, want no ban", w.Code, w.Body)
		}
	})
}

func TestABanSeenInRedisIsHeldAtOnceUnlessLifted(t *testing.T) {
	t.Parallel()
	now := newFakeClock().now()
	id, other := domain.CallerID{KeyID: 7}, domain.CallerID{KeyID: 8}
	until := now.Add(15 * time.Minute)
	floor := limits.NewBanFloor()
	floor.Hold(id, until, now)
	floor.Hold(other, now, now) // ends now: nothing to hold
	if got := floor.At(id); !got.Equal(until) {
		t.Fatalf("a ban seen: floor %v, want %v", got, until)
	}
	if got := floor.At(other); !got.IsZero() {
		t.Errorf("a ban that ended: floor %v, want none", got)
	}
	floor.Hold(id, until.Add(-time.Minute), now)
	if got := floor.At(id); !got.Equal(until) {
		t.Errorf("after an earlier end was seen: floor %v, want %v", got, until)
	}

	floor.Apply([]domain.Ban{{Subject: id, Since: now, Until: until, LiftedAt: now}}, now)
	floor.Hold(id, until, now) // an answer that read the ban before its lift
	if got := floor.At(id); !got.IsZero() {
		t.Errorf("the lifted ban seen again: floor %v, want none", got)
	}
	later := until.Add(time.Minute) // a ban that began after the lift
	floor.Hold(id, later, now)
	if got := floor.At(id); !got.Equal(later) {
		t.Errorf("a new ban after the lift: floor %v, want %v", got, later)
	}
	floor.Apply(nil, later) // ended: it goes, and so does the lift
	if got := floor.At(id); !got.IsZero() || len(floor.Lifted) != 0 {
		t.Errorf("once ended: floor %v, lifts %v; want none", got, floor.Lifted)
	}
}
