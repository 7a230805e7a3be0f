package testkit

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresURL returns the URL of a new, empty schema of the tests'
// database, dropped when the test ends, so that tests run in parallel each on
// their own. The database is PETSTORE_TEST_POSTGRES's, or else that of a
// private cluster this test binary starts on first use; with neither the
// test is skipped.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := PostgresServer(t)
	pool := schemaPools.get(t, base)
	schema := newSchema(t, pool)
	t.Cleanup(func() { dropSchema(t, pool, schema) })
	return schemaURL(t, base, schema)
}

// newSchema creates a schema of a name no other test has.
func newSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	schema := schemaName()
	if _, err := pool.Exec(context.Background(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return schema
}

// schemaName is a schema name no other test has had.
func schemaName() string { return "petstore_test_" + strings.ToLower(rand.Text()[:12]) }

// schemaPools holds the connections that create and drop the tests'
// schemas, one pool per database for the whole test binary: a new
// PostgreSQL connection costs a process on the server, and a test binary
// makes hundreds of schemas.
var schemaPools = poolsByURL{pools: map[string]*pgxpool.Pool{}}

type poolsByURL struct {
	mu    sync.Mutex
	pools map[string]*pgxpool.Pool
}

func (p *poolsByURL) get(t testing.TB, base string) *pgxpool.Pool {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if pool, ok := p.pools[base]; ok {
		return pool
	}
	cfg, err := pgxpool.ParseConfig(base)
	if err != nil {
		t.Fatalf("the tests' PostgreSQL: %v", err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("the tests' PostgreSQL: %v", err)
	}
	p.pools[base] = pool
	return pool
}

// dropSchema drops schema and all in it. A server the test stopped may
// still hold a session that PostgreSQL has not ended yet, whose locks can
// make the drop a deadlock's victim: that drop is tried again.
func dropSchema(t testing.TB, pool *pgxpool.Pool, schema string) {
	t.Helper()
	var err error
	for range 5 {
		_, err = pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "40P01" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
	}
}

// PostgresServer is the URL of the tests' database, as a superuser:
// PETSTORE_TEST_POSTGRES's, or that of a private cluster this test binary
// starts on first use; with neither the test is skipped.
func PostgresServer(t testing.TB) string {
	t.Helper()
	base := os.Getenv("PETSTORE_TEST_POSTGRES")
	if base == "" {
		bin := postgresPrograms()
		if bin == "" {
			t.Skip("the PostgreSQL tests need PostgreSQL's server programs (Debian: apt-get install postgresql), " +
				"or PETSTORE_TEST_POSTGRES=postgres://USER@HOST:PORT/DATABASE naming a database")
		}
		base = privatePostgres.started(t, func() (string, error) { return startPrivatePostgres(bin) })
	}
	return base
}

// postgresPrograms is the directory of PostgreSQL's initdb and postgres:
// on the PATH, or where Debian keeps them (the newest version); "" when
// they are not installed.
func postgresPrograms() string {
	if initdb, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(initdb)
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(found, func(a, b string) int { return cmp.Compare(postgresVersion(a), postgresVersion(b)) })
	if len(found) == 0 {
		return ""
	}
	return filepath.Dir(found[len(found)-1])
}

// postgresVersion is N of /usr/lib/postgresql/N/bin/initdb.
func postgresVersion(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// privatePostgres is the cluster this test binary started, if any.
var privatePostgres = privateServer{what: "PostgreSQL"}

// startPrivatePostgres makes a cluster in a temporary directory (trust
// authentication, nothing synced to disk), starts it on a free loopback
// port with its unix socket in that directory, and waits until it answers.
// As root, the cluster runs as the postgres user: initdb and postgres refuse
// root.
func startPrivatePostgres(bin string) (string, error) {
	dir, err := os.MkdirTemp("", "petstore-test-postgres-")
	if err != nil {
		return "", err
	}
	var asUser *syscall.SysProcAttr
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return "", fmt.Errorf("as root, the cluster needs a postgres user to run as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return "", err
		}
		asUser = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = asUser
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("initdb: %v\n%s", err, out)
	}
	port, err := freeLoopbackPort()
	if err != nil {
		return "", err
	}
	err = privatePostgres.watch(`"$1/postgres" -D "$2/data" -p "$3" -k "$2" -c listen_addresses=127.0.0.1 \
  -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 >"$2/server.log" 2>&1 &
server=$!
read -r _
kill -INT "$server"
wait "$server"
rm -rf "$2"`, asUser, bin, dir, port)
	if err != nil {
		return "", err
	}
	// The cluster has no TLS: sslmode=disable spares each connection the
	// refused TLS request, after which pgx's default (prefer) connects a
	// second time, which is a second server process.
	url := "postgres://postgres@127.0.0.1:" + port + "/postgres?sslmode=disable"
	err = waitAnswering(30*time.Second, func() error {
		conn, err := pgx.Connect(context.Background(), url)
		if err == nil {
			conn.Close(context.Background())
		}
		return err
	})
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		return "", fmt.Errorf("PostgreSQL on port %s does not answer: %v\n%s", port, err, log)
	}
	return url, nil
}
