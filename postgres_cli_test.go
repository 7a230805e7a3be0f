package main

// The PostgreSQL store beyond what every test runs on both stores: the copy
// from SQLite, a database that goes away and comes back, and the command
// line's answers to a bad URL. Skipped without PETSTORE_TEST_POSTGRES.

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"

	"petstore/internal/servertest"
	"petstore/internal/testkit"
)

func TestCopyRefusesBadCommandLines(t *testing.T) {
	file := servertest.Start(t, servertest.Options{}).DBPath
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"no --to", []string{"copy", "--from", file}, 2},
		{"no --from", []string{"copy", "--to", "postgres://127.0.0.1/test"}, 2},
		{"--to a file", []string{"copy", "--from", file, "--to", file}, 2},
		{"--from a URL", []string{"copy", "--from", "postgres://127.0.0.1/a", "--to", "postgres://127.0.0.1/b"}, 2},
		{"an unknown --env", []string{"copy", "--from", file, "--to", "postgres://127.0.0.1/b", "--env", "dev"}, 2},
		{"--from a missing file", []string{"copy", "--from", file + ".missing", "--to", "postgres://127.0.0.1/test"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantFailure(t, viaRun(t, nil, tt.args...), tt.code)
		})
	}
}

// A URL that cannot be used is one line and exit status 1 (2 when it is not
// a URL at all), and its password is in no output.
func TestBadPostgresURLIsOneLineWithoutThePassword(t *testing.T) {
	t.Parallel()
	base := testkit.PostgresURL(t)
	u, _ := url.Parse(base)
	withUser := func(user string) string {
		v := *u
		v.User = url.UserPassword(user, "s3cret-pw")
		return v.String()
	}
	closed := testkit.FreeAddr(t)
	tests := []struct {
		name string
		db   string
		code int
	}{
		{"a role that does not exist", withUser("no_such_role"), 1},
		{"a database that does not exist", strings.Replace(withUser("postgres"), u.Path, "/no_such_database", 1), 1},
		{"nothing listening", "postgres://postgres:s3cret-pw@" + closed + "/test?connect_timeout=2", 1},
		{"not a URL pgx can read", "postgres://postgres:s3cret-pw@127.0.0.1:5432/test?sslmode=sometimes", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, args := range [][]string{
				{"keys", "list", "--db", tt.db},
				{"serve", "--addr", "127.0.0.1:0", "--db", tt.db},
			} {
				res := viaRun(t, nil, args...)
				wantFailure(t, res, tt.code)
				if strings.Contains(res.Stderr, "s3cret-pw") {
					t.Errorf("petstore %s printed the password: %s", args[0], res.Stderr)
				}
			}
		})
	}
}

// Servers sharing a database must share the limits: PostgreSQL without
// --redis is refused before anything starts.
func TestPostgresWithoutRedisIsRefused(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"petstore", "serve", "--addr", "127.0.0.1:0", "--db", "postgres://postgres@127.0.0.1:5432/test"},
		func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
	res := cliResult{Stdout: stdout.String(), Stderr: stderr.String(), Code: exitCode(err, &stderr)}
	res.Stderr = stderr.String()
	wantFailure(t, res, 2)
	if !strings.Contains(res.Stderr, "--redis") {
		t.Errorf("the refusal %q does not say that --redis is needed", res.Stderr)
	}
}
