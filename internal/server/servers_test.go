package server

import (
	"net"
	"slices"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/store"
	"petstore/internal/testkit"
)

// serversAnswer is GET /admin/v1/servers's body.
type serversAnswer struct {
	Schema  struct{ Version, Level int }
	Servers []struct {
		Address, Version, Revision string
		Migrations                 int
		UpToDate                   bool
		LastSeen                   time.Time
	}
}

// TestEachServerChecksInAndTheAdminAPIListsThemWithTheSchema: on
// PostgreSQL both servers of a fleet are listed, with their version and
// the migrations they know, beside the schema's version and level; on
// SQLite, which one server uses, only the last to check in. A server not
// seen for ten minutes is pruned.
func TestEachServerChecksInAndTheAdminAPIListsThemWithTheSchema(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, opts testOptions) {
		a := newTestServerWith(t, opts)
		b := a.anotherServer()
		a.self = selfServer(&net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 8080}, a.clock.now())
		b.self = selfServer(&net.TCPAddr{IP: net.IPv4(192, 0, 2, 2), Port: 8080}, a.clock.now())
		for _, s := range []*testServer{a, b} {
			a.clock.advance(time.Second) // b is seen last
			stop := s.StartBackground()
			testkit.Eventually(t, 5*time.Second, s.self.Address+" checks in", func() bool {
				list, err := s.store.Servers(t.Context())
				return err == nil && slices.ContainsFunc(list, func(sv domain.Server) bool { return sv.Address == s.self.Address })
			})
			stop()
		}
		token := a.mustCreateAdmin("ops", domain.ScopeKeysRead)
		w := a.admin("GET", "/admin/v1/servers", token, "")
		if w.Code != 200 {
			t.Fatalf("GET /admin/v1/servers: %d %s", w.Code, w.Body)
		}
		var got serversAnswer
		testkit.DecodeJSON(t, w, &got)
		k := len(store.Migrations)
		if got.Schema.Version != k || got.Schema.Level > k || got.Schema.Level == 0 {
			t.Errorf("schema %+v, want version %d and a level at most that", got.Schema, k)
		}
		want := []string{"192.0.2.2:8080", "192.0.2.1:8080"}
		if !opts.postgres {
			want = want[:1] // one server uses a SQLite file
		}
		if len(got.Servers) != len(want) {
			t.Fatalf("servers %+v, want %v", got.Servers, want)
		}
		for i, s := range got.Servers {
			b := ReadBuildInfo()
			if s.Address != want[i] || s.Version != b.Version || s.Revision != b.Revision+b.Modified || s.Migrations != k || !s.UpToDate {
				t.Errorf("server %d: %+v, want %s of version %s knowing %d migrations, up to date", i, s, want[i], b.Version, k)
			}
		}
		a.clock.advance(forgetServersAfter + time.Second)
		if n, err := a.store.PruneServers(t.Context(), a.clock.now().Add(-forgetServersAfter)); err != nil || n != int64(len(want)) {
			t.Errorf("pruned %d servers (%v), want %d not seen for ten minutes", n, err, len(want))
		}
	})
}
