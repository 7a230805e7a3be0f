package testkit

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
)

// HoldWriteLock takes SQLite's write lock on the database at path, on a
// connection of its own as another process would, until release is called.
func HoldWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	return ReleaseOnce(t, func() error {
		_, err := conn.ExecContext(ctx, "ROLLBACK")
		return errors.Join(err, conn.Close(), db.Close())
	})
}

// ReleaseOnce is release, run once: when called, or when the test ends.
func ReleaseOnce(t *testing.T, release func() error) func() {
	var once sync.Once
	r := func() {
		once.Do(func() {
			if err := release(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(r)
	return r
}
