package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"petstore/internal/servertest"
	"petstore/internal/store"
	"petstore/internal/testkit"

	"github.com/jackc/pgx/v5"
)

// TestMigrateAndServeSayWhereTheSchemaStands: petstore migrate says the
// schema's version and level, --force alone is a usage mistake, and a
// server on a schema that a newer petstore contracted stops with one line
// naming both counts and petstore migrate, exit status 1, as petstore
// migrate does.
func TestMigrateAndServeSayWhereTheSchemaStands(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		// contractSchema below makes the schema one no other test may
		// inherit: a new one, dropped when the test ends.
		db := filepath.Join(t.TempDir(), "petstore.db")
		if opts.Postgres {
			db = testkit.PostgresURL(t)
		}
		k := len(store.Migrations)
		res := viaRun(t, nil, "migrate", "--db", db)
		if want := fmt.Sprintf("up to date (version %d, level ", k); res.Code != 0 || !strings.Contains(res.Stdout, want) {
			t.Fatalf("migrate: exit %d, %q %q; want %q", res.Code, res.Stdout, res.Stderr, want)
		}
		if res := viaRun(t, nil, "migrate", "--db", db, "--force"); res.Code != 2 || !strings.Contains(res.Stderr, "--force goes with --contract") {
			t.Errorf("migrate --force: exit %d, %q; want 2 saying it goes with --contract", res.Code, res.Stderr)
		}
		contractSchema(t, db, k+3, k+1)
		for _, args := range [][]string{{"serve", "--addr", "127.0.0.1:0", "--db", db}, {"migrate", "--db", db}} {
			res := viaRun(t, nil, args...)
			msg := strings.TrimSpace(res.Stderr)
			if res.Code != 1 || strings.Contains(msg, "\n") || !strings.Contains(msg, fmt.Sprintf("level %d", k+1)) ||
				!strings.Contains(msg, fmt.Sprintf("%d migrations", k)) || !strings.Contains(msg, "petstore migrate") {
				t.Errorf("%s on a contracted schema: exit %d, %q; want exit 1 and one line naming level %d, %d migrations and petstore migrate", args[0], res.Code, msg, k+1, k)
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
