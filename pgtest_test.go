package main

import (
	"context"
	"crypto/rand"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// testPostgresURL returns the URL of a new, empty schema of the database
// PETSTORE_TEST_POSTGRES names, dropped when the test ends, so that tests
// run in parallel each on their own. Without PETSTORE_TEST_POSTGRES the test
// is skipped.
func testPostgresURL(t testing.TB) string {
	t.Helper()
	base := testEnv(t, "PETSTORE_TEST_POSTGRES", "PostgreSQL tests need a database: set PETSTORE_TEST_POSTGRES=postgres://postgres@127.0.0.1:5432/test (.ci/run does)")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("PETSTORE_TEST_POSTGRES: %v", err)
	}
	defer conn.Close(ctx)
	schema := "petstore_test_" + strings.ToLower(rand.Text()[:12])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
