package testkit

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Migrating a new schema is most of what PostgreSQL does in a go test
// ./...: about 250 ms of a loaded core for each of some two hundred
// schemas. A server migrates whatever schema it is given, so the tests
// that start servers share the schemas their test binary has migrated:
// each, when its test ends, is emptied of its rows and taken by the next
// test that asks (docs/development.md, "Tests").

// ServerPostgresURL returns the URL of a schema of the tests' database for
// the test alone, as PostgresURL does; but the schema may be one an
// earlier test of this binary used, left as its migrations make it: every
// table empty but for petstore_schema, meta's counters at 0, each sequence
// at its start. It is for tests whose server or command migrates the
// schema it is given; tests of the migrations themselves take
// PostgresURL's new, empty schema.
func ServerPostgresURL(t testing.TB) string {
	t.Helper()
	base := PostgresServer(t)
	pool := schemaPools.get(t, base)
	schema, ok := usedSchemas.take(base)
	if !ok {
		schema = newSchema(t, pool)
	}
	t.Cleanup(func() { usedSchemas.giveBack(t, pool, base, schema) })
	return schemaURL(t, base, schema)
}

// schemaURL is base with schema as the search path.
func schemaURL(t testing.TB, base, schema string) string {
	t.Helper()
	return withQuery(t, base, map[string]string{"search_path": schema})
}

// usedSchemas are this test binary's emptied schemas, kept only while
// Main is there to drop them when the binary ends: the tests' database may
// be a shared one (PETSTORE_TEST_POSTGRES).
var usedSchemas = schemaShelf{free: map[string][]string{}}

type schemaShelf struct {
	mu      sync.Mutex
	keeping bool                // Main drops what is on the shelf at the end
	free    map[string][]string // emptied schemas, by database
	shape   string              // that of the first schema given back, and its petstore_schema row
}

func (s *schemaShelf) take(base string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	free := s.free[base]
	if len(free) == 0 {
		return "", false
	}
	schema := free[len(free)-1]
	s.free[base] = free[:len(free)-1]
	return schema, true
}

// giveBack empties schema and shelves it when it has the shape of the
// first schema given back, no privileges granted on it, and a
// petstore_schema table as that one's; any other it drops, as
// PostgresURL's cleanup does: a test of the migrations or of roles that
// took this schema leaves what no other test may inherit. Should the first
// schema given back be such a test's, every other is dropped, and the test
// that takes that one fails on what it finds, rather than passing on it.
func (s *schemaShelf) giveBack(t testing.TB, pool *pgxpool.Pool, base, schema string) {
	t.Helper()
	if renamed, ok := s.keep(pool, schema); ok {
		s.mu.Lock()
		s.free[base] = append(s.free[base], renamed)
		s.mu.Unlock()
		return
	}
	dropSchema(t, pool, schema)
}

// keep says whether schema may go back on the shelf, emptying it if so,
// and renaming it: a server derives its Redis keys, its advisory locks and
// its channel of notices from the schema's name, which must be new to the
// next test as a new schema's is.
func (s *schemaShelf) keep(pool *pgxpool.Pool, schema string) (string, bool) {
	s.mu.Lock()
	keeping := s.keeping
	s.mu.Unlock()
	if !keeping {
		return "", false
	}
	ctx := context.Background()
	var granted bool
	var shape, level string
	var tables, sequences []string
	if pool.QueryRow(ctx, schemaShapeSQL, schema).Scan(&granted, &shape, &tables, &sequences) != nil || granted {
		return "", false
	}
	quoted := pgx.Identifier{schema}.Sanitize()
	if pool.QueryRow(ctx, "SELECT row_to_json(p)::text FROM "+quoted+".petstore_schema p").Scan(&level) != nil {
		return "", false
	}
	shape += " " + level
	s.mu.Lock()
	if s.shape == "" {
		s.shape = shape
	}
	same := shape == s.shape
	s.mu.Unlock()
	if !same {
		return "", false
	}
	renamed := schemaName()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, emptySchemaSQL(quoted, tables, sequences)+
			" ALTER SCHEMA "+quoted+" RENAME TO "+pgx.Identifier{renamed}.Sanitize()+";")
		return err
	})
	return renamed, err == nil
}

// emptySchemaSQL empties the tables of the schema quoted but for
// petstore_schema, sets meta's counters back to 0 and restarts its
// sequences: the schema as its migrations leave it, which
// internal/store's tests hold. A server's session that PostgreSQL has not
// ended yet may hold a lock: rather than wait for it, the schema is
// dropped. Triggers do not fire (session_replication_role), so the
// append-only audit trail empties too.
func emptySchemaSQL(quoted string, tables, sequences []string) string {
	var b strings.Builder
	b.WriteString("SET LOCAL lock_timeout = '1s'; SET LOCAL session_replication_role = replica;")
	for _, table := range tables {
		switch table {
		case "petstore_schema":
		case "meta":
			b.WriteString(" UPDATE " + quoted + ".meta SET value = 0;")
		default:
			b.WriteString(" DELETE FROM " + quoted + "." + pgx.Identifier{table}.Sanitize() + ";")
		}
	}
	for _, seq := range sequences {
		b.WriteString(" ALTER SEQUENCE " + quoted + "." + pgx.Identifier{seq}.Sanitize() + " RESTART;")
	}
	return b.String()
}

// dropShelved drops every schema on the shelf and stops shelving; Main
// calls it when the binary's tests are done.
func (s *schemaShelf) dropShelved() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keeping = false
	schemaPools.mu.Lock()
	defer schemaPools.mu.Unlock()
	for base, schemas := range s.free {
		for _, schema := range schemas {
			schemaPools.pools[base].Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		}
	}
	s.free = map[string][]string{}
}

// schemaShapeSQL reads, of the schema $1: whether any privilege is granted
// on it or in it; a digest of its tables, columns, indexes, sequences,
// functions and triggers; its tables' and its sequences' names.
const schemaShapeSQL = `
WITH s AS (SELECT oid, nspacl FROM pg_namespace WHERE nspname = $1),
rel AS (SELECT c.* FROM pg_class c, s WHERE c.relnamespace = s.oid)
SELECT
  (SELECT nspacl IS NOT NULL FROM s) OR EXISTS (SELECT 1 FROM rel WHERE relacl IS NOT NULL),
  md5(concat_ws('|',
    (SELECT string_agg(rel.relname || ':' || rel.relkind::text || ':' || coalesce(a.cols, ''), ',' ORDER BY rel.relname)
       FROM rel LEFT JOIN LATERAL (
         SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod) || CASE WHEN attnotnull THEN '!' ELSE '' END, ' ' ORDER BY attnum) AS cols
         FROM pg_attribute WHERE attrelid = rel.oid AND attnum > 0 AND NOT attisdropped) a ON true),
    (SELECT string_agg(proname, ',' ORDER BY proname) FROM pg_proc, s WHERE pronamespace = s.oid),
    (SELECT string_agg(tgname, ',' ORDER BY tgname) FROM pg_trigger JOIN rel ON rel.oid = tgrelid))),
  coalesce((SELECT array_agg(relname::text ORDER BY relname) FROM rel WHERE relkind IN ('r', 'p')), '{}'),
  coalesce((SELECT array_agg(relname::text ORDER BY relname) FROM rel WHERE relkind = 'S'), '{}')`
