package main

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/store"
	"petstore/internal/testkit"

	"github.com/jackc/pgx/v5"
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
	eachStore(t, func(t *testing.T, opts testOptions) {
		a := newTestServerWith(t, opts)
		b := a.anotherServer()
		a.self = selfServer(&net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 8080}, a.clock.now())
		b.self = selfServer(&net.TCPAddr{IP: net.IPv4(192, 0, 2, 2), Port: 8080}, a.clock.now())
		for _, s := range []*testServer{a, b} {
			a.clock.advance(time.Second) // b is seen last
			stop := s.startBackground()
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
		decodeJSON(t, w, &got)
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
			b := readBuildInfo()
			if s.Address != want[i] || s.Version != b.version || s.Revision != b.revision+b.modified || s.Migrations != k || !s.UpToDate {
				t.Errorf("server %d: %+v, want %s of version %s knowing %d migrations, up to date", i, s, want[i], b.version, k)
			}
		}
		a.clock.advance(forgetServersAfter + time.Second)
		if n, err := a.store.PruneServers(t.Context(), a.clock.now().Add(-forgetServersAfter)); err != nil || n != int64(len(want)) {
			t.Errorf("pruned %d servers (%v), want %d not seen for ten minutes", n, err, len(want))
		}
	})
}

// TestMigrateAndServeSayWhereTheSchemaStands: petstore migrate says the
// schema's version and level, --force alone is a usage mistake, and a
// server on a schema that a newer petstore contracted stops with one line
// naming both counts and petstore migrate, exit status 1, as petstore
// migrate does.
func TestMigrateAndServeSayWhereTheSchemaStands(t *testing.T) {
	eachStore(t, func(t *testing.T, opts testOptions) {
		db := opts.dbAt(t, filepath.Join(t.TempDir(), "petstore.db"))
		k := len(store.Migrations)
		res := viaRun(t, nil, "migrate", "--db", db)
		if want := fmt.Sprintf("up to date (version %d, level ", k); res.code != 0 || !strings.Contains(res.stdout, want) {
			t.Fatalf("migrate: exit %d, %q %q; want %q", res.code, res.stdout, res.stderr, want)
		}
		if res := viaRun(t, nil, "migrate", "--db", db, "--force"); res.code != 2 || !strings.Contains(res.stderr, "--force goes with --contract") {
			t.Errorf("migrate --force: exit %d, %q; want 2 saying it goes with --contract", res.code, res.stderr)
		}
		contractSchema(t, db, k+3, k+1)
		for _, args := range [][]string{{"serve", "--addr", "127.0.0.1:0", "--db", db}, {"migrate", "--db", db}} {
			res := viaRun(t, nil, args...)
			msg := strings.TrimSpace(res.stderr)
			if res.code != 1 || strings.Contains(msg, "\n") || !strings.Contains(msg, fmt.Sprintf("level %d", k+1)) ||
				!strings.Contains(msg, fmt.Sprintf("%d migrations", k)) || !strings.Contains(msg, "petstore migrate") {
				t.Errorf("%s on a contracted schema: exit %d, %q; want exit 1 and one line naming level %d, %d migrations and petstore migrate", args[0], res.code, msg, k+1, k)
			}
		}
	})
}

// contractSchema makes the schema of db look as a newer petstore would
// leave it: version migrations done, at level.
func contractSchema(t *testing.T, db string, version, level int) {
	t.Helper()
	ctx := context.Background()
	if strings.HasPrefix(db, "postgres") {
		conn, err := pgx.Connect(ctx, db)
		if err == nil {
			defer conn.Close(ctx)
			_, err = conn.Exec(ctx, `UPDATE petstore_schema SET version = $1, level = $2`, version, level)
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	conn, err := sql.Open("sqlite", db)
	if err == nil {
		defer conn.Close()
		if _, err = conn.Exec(fmt.Sprintf("PRAGMA user_version = %d", version)); err == nil {
			_, err = conn.Exec(`UPDATE petstore_schema SET level = ?`, level)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}
