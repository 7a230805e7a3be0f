package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/testkit"
)

// TestAServerStartsOnASchemaWhoseLevelItMeetsAndRefusesOneAbove, on both
// engines: a schema that a newer petstore expanded (two migrations this
// one does not know, its level still this one's) is run on as it is; one
// that a newer petstore contracted (level above what this one knows) is
// refused in one line naming both counts and petstore migrate.
func TestAServerStartsOnASchemaWhoseLevelItMeetsAndRefusesOneAbove(t *testing.T) {
	k := len(Migrations)
	for _, engine := range []struct {
		name string
		open func(t *testing.T) (reopen func() (Storage, error), set func(version, level int))
	}{
		{"SQLite", func(t *testing.T) (func() (Storage, error), func(int, int)) {
			s, path := openTestSQLite(t, time.Now)
			s.Close()
			set := func(version, level int) {
				s, err := OpenSQLite(t.Context(), path, false, time.Now)
				if err == nil {
					_, err = s.write.Exec(fmt.Sprintf("PRAGMA user_version = %d", version))
					s.write.Exec(`UPDATE petstore_schema SET level = ?`, level)
					s.Close()
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			return func() (Storage, error) { return OpenSQLite(t.Context(), path, false, time.Now) }, set
		}},
		{"PostgreSQL", func(t *testing.T) (func() (Storage, error), func(int, int)) {
			url := testkit.PostgresURL(t)
			s, err := OpenPostgres(t.Context(), url, time.Now)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			set := func(version, level int) {
				if _, err := s.pool.Exec(t.Context(), `UPDATE petstore_schema SET version = $1, level = $2`, version, level); err != nil {
					t.Fatal(err)
				}
			}
			return func() (Storage, error) { return OpenPostgres(t.Context(), url, time.Now) }, set
		}},
	} {
		t.Run(engine.name, func(t *testing.T) {
			reopen, set := engine.open(t)
			st := openSchema(t, reopen)
			if st != (domain.Schema{Version: k, Level: levelAt(k)}) {
				t.Errorf("a new database's schema is %+v, want version %d at level %d", st, k, levelAt(k))
			}
			set(k+2, levelAt(k))
			if st := openSchema(t, reopen); st != (domain.Schema{Version: k + 2, Level: levelAt(k)}) {
				t.Errorf("on a schema expanded past what it knows: %+v, want it left as it was", st)
			}
			set(k+2, k+1)
			_, err := reopen()
			if err == nil || strings.Contains(err.Error(), "\\n") || !strings.Contains(err.Error(), fmt.Sprintf("level %d", k+1)) ||
				!strings.Contains(err.Error(), fmt.Sprintf("the %d migrations", k)) || !strings.Contains(err.Error(), "petstore migrate") {
				t.Errorf("on a schema contracted past what it knows: %v, want one line naming level %d, %d migrations and petstore migrate", err, k+1, k)
			}
		})
	}
}

func openSchema(t *testing.T, reopen func() (Storage, error)) domain.Schema {
	t.Helper()
	s, err := reopen()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Schema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestAContractStepWaitsForMigrateContractAndTheOlderServers: with a
// contract step after the migrations of today (added here for the test),
// a server on PostgreSQL starts on the schema without it and leaves it
// undone; petstore migrate without --contract leaves it too; with
// --contract it is refused while a server that knows fewer migrations
// checked in during the last minute, naming it and its version, and --force
// applies it. Then a server without the step refuses the schema, naming
// petstore migrate. An empty database gets it at start, as does SQLite.
func TestAContractStepWaitsForMigrateContractAndTheOlderServers(t *testing.T) {
	today := Migrations
	contract := Migration{Name: "999_contract_probe.sql", SQLite: "-- contract\nCREATE TABLE contract_probe (x INTEGER)",
		Postgres: "-- contract\nCREATE TABLE contract_probe (x integer)", Marked: true}
	k := len(today)
	ctx := context.Background()
	url := testkit.PostgresURL(t)
	s, err := OpenPostgres(ctx, url, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old := domain.Server{Address: "old-1:8080", Version: "v1.0.0", Revision: "abc", Migrations: k, StartedAt: time.Now(), LastSeen: time.Now()}
	if err := s.CheckIn(ctx, old); err != nil {
		t.Fatal(err)
	}
	Migrations = append(today[:k:k], contract)
	defer func() { Migrations = today }()
	migrateTo := func(opts MigrateOptions) (domain.Schema, error) {
		s, err := OpenToMigrate(ctx, url, opts, time.Now)
		if err != nil {
			return domain.Schema{}, err
		}
		defer s.Close()
		return s.Schema(ctx)
	}
	for _, opts := range []MigrateOptions{{}, {Force: true}} {
		if st, err := migrateTo(opts); err != nil || st.Version != k {
			t.Errorf("a start or petstore migrate %+v: %+v, %v; want the contract step left undone (version %d)", opts, st, err, k)
		}
	}
	_, err = migrateTo(MigrateOptions{Contract: true})
	if err == nil || !strings.Contains(err.Error(), "old-1:8080") || !strings.Contains(err.Error(), "v1.0.0") || !strings.Contains(err.Error(), "--force") {
		t.Errorf("migrate --contract while an older server checked in: %v, want it refused naming old-1:8080 v1.0.0 and --force", err)
	}
	if st, err := migrateTo(MigrateOptions{Contract: true, Force: true}); err != nil || st != (domain.Schema{Version: k + 1, Level: k + 1}) {
		t.Errorf("migrate --contract --force: %+v, %v; want version and level %d", st, err, k+1)
	}
	if _, err := s.pool.Exec(ctx, `SELECT x FROM contract_probe`); err != nil {
		t.Errorf("the contract step did not run: %v", err)
	}
	Migrations = today
	if _, err := OpenPostgres(ctx, url, time.Now); err == nil || !strings.Contains(err.Error(), "petstore migrate") {
		t.Errorf("a server without the contract step on the contracted schema: %v, want it refused naming petstore migrate", err)
	}
	Migrations = append(today[:k:k], contract)
	fresh, err := OpenPostgres(ctx, testkit.PostgresURL(t), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if st, err := fresh.Schema(ctx); err != nil || st != (domain.Schema{Version: k + 1, Level: k + 1}) {
		t.Errorf("an empty database, which no server uses yet, gets the contract step at start: %+v, %v", st, err)
	}
	lite, _ := openTestSQLite(t, time.Now)
	if st, err := lite.Schema(ctx); err != nil || st != (domain.Schema{Version: k + 1, Level: k + 1}) {
		t.Errorf("on SQLite a start applies the contract step: %+v, %v", st, err)
	}
}
