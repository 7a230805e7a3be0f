package store

import (
	"context"
	"testing"
	"time"

	"petstore/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// The tests that start servers share their binary's migrated schemas
// (testkit.ServerPostgresURL): one a test gave back must be as its
// migrations leave a new one, or a test would inherit another's rows,
// counters, ids or name. It runs alone, so that the schema it gives back
// is the one it takes next.
func TestAServerSchemaComesBackAsItsMigrationsLeaveIt(t *testing.T) {
	ctx := context.Background()
	var used schemaID
	t.Run("a test writes", func(t *testing.T) {
		s := openPostgresFor(t, testkit.ServerPostgresURL(t))
		used = schemaIDOf(t, s)
		for _, stmt := range []string{
			`INSERT INTO pets (name, category_id) VALUES ('Rex', 1)`,
			`UPDATE meta SET value = value + 7`,
			`INSERT INTO audit_events (at, action, actor, env, details) VALUES (1, 'key.create', 'cli', 'production', '{}')`,
		} {
			if _, err := s.pool.Exec(ctx, stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
	})
	again := openPostgresFor(t, testkit.ServerPostgresURL(t))
	switch id := schemaIDOf(t, again); {
	case id.oid != used.oid:
		t.Fatalf("the schema given back (%+v) was not the next one taken (%+v)", used, id)
	case id.name == used.name:
		t.Errorf("the schema given back kept its name %s: its servers' Redis keys and locks would be the last test's", id.name)
	}
	if got, want := schemaContents(t, again), schemaContents(t, openPostgresFor(t, testkit.PostgresURL(t))); got != want {
		t.Errorf("a schema given back holds\n%s\nwhere a new one holds\n%s", got, want)
	}
}

// schemaID is a schema's name and PostgreSQL's number for it, which a new
// name keeps.
type schemaID struct {
	name string
	oid  uint32
}

func schemaIDOf(t *testing.T, s *Postgres) schemaID {
	t.Helper()
	var id schemaID
	if err := s.pool.QueryRow(context.Background(), `SELECT current_schema(), current_schema()::regnamespace::oid`).Scan(&id.name, &id.oid); err != nil {
		t.Fatal(err)
	}
	return id
}

// openPostgresFor opens url, migrating it, until the test ends.
func openPostgresFor(t *testing.T, url string) *Postgres {
	t.Helper()
	s, err := OpenPostgres(context.Background(), url, func() time.Time { return time.Unix(1, 0) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// schemaContents is every row of every table of the schema s opened, and
// each sequence's state, as text.
func schemaContents(t *testing.T, s *Postgres) string {
	t.Helper()
	var contents string
	err := s.pool.QueryRow(context.Background(), `
SELECT string_agg(c.relname || ': ' || coalesce(
  CASE WHEN c.relkind = 'S'
    THEN (xpath('/row/s/text()', query_to_xml(format('SELECT last_value || %L || is_called AS s FROM %I', ' ', c.relname), false, true, '')))[1]::text
    ELSE (xpath('/row/s/text()', query_to_xml(format('SELECT json_agg(t ORDER BY t::text)::text AS s FROM %I t', c.relname), false, true, '')))[1]::text
  END, 'none'), E'\n' ORDER BY c.relname)
FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'S')`).Scan(&contents)
	if err != nil {
		t.Fatal(err)
	}
	return contents
}
