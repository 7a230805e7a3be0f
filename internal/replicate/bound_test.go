package replicate

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"petstore/internal/testkit"

	_ "modernc.org/sqlite"
)

// lockedBuffer is a log the test reads while the replicator writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// While the replica's store is away, what waits to be uploaded grows past
// the bound: it is dropped (a WARN says so, naming the gap) and, once the
// store is back, a snapshot of the whole database follows, so that a
// restore holds every row.
func TestWhatWaitsPastTheBoundIsDroppedAndASnapshotFollows(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs versitygw")
	}
	s3 := testkit.StartS3(t) // its credentials are in this process's environment (TestMain)
	target, err := ParseTarget(s3.URL(s3.Bucket(t, "petstore"), "bound"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rows.db")
	db, insert := rowsDB(t, path, 2000)
	db.SetMaxOpenConns(1)
	log := &lockedBuffer{}
	r, err := Start(context.Background(), Config{Target: target, Interval: 50 * time.Millisecond, Retention: time.Hour,
		LocalLimit: 256 << 10, Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})), Now: time.Now}, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	insert(10)
	testkit.Eventually(t, 10*time.Second, "the first rows are uploaded", func() bool {
		s := r.Status()
		return s.LocalTXID > 0 && s.ReplicaTXID >= s.LocalTXID
	})

	s3.Stop()
	defer func() {
		if t.Failed() {
			t.Logf("status %+v\n%s", r.Status(), log)
		}
	}()
	testkit.Eventually(t, 30*time.Second, "what waits is dropped past the bound", func() bool {
		insert(20)
		time.Sleep(50 * time.Millisecond)
		return strings.Contains(log.String(), "past the bound")
	})
	insert(20)
	testkit.Eventually(t, 30*time.Second, "the store's absence is seen", func() bool {
		return r.Status().Errors > 0
	})
	// Litestream lists under a lock its WAL reader takes: while the store
	// is away a listing gives up after failingListTimeout, not after the
	// S3 client's eight tries, so the WAL goes on being read.
	itr, err := r.client.LTXFiles(context.Background(), 1, 0, false)
	if err == nil {
		for itr.Next() {
		}
		err = itr.Close()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a listing while the store is away ended with %v, want it cut at %v", err, failingListTimeout)
	}
	s3.Start(t)
	testkit.Eventually(t, 60*time.Second, "the replica catches up", func() bool {
		s := r.Status()
		return !s.Failing && s.LocalTXID > 0 && s.ReplicaTXID >= s.LocalTXID && strings.Contains(log.String(), "replication caught up")
	})
	var want int
	db.QueryRow(`SELECT count(*) FROM rows`).Scan(&want)
	testkit.Eventually(t, 10*time.Second, "a restore holds every row", func() bool {
		return restoredRows(t, target, log) == want
	})
}

// rowsDB is a database in WAL mode with a table of rows, and what inserts
// n rows of size bytes each.
func rowsDB(t *testing.T, path string, size int) (*sql.DB, func(n int)) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE rows (id INTEGER PRIMARY KEY, v BLOB)`); err != nil {
		t.Fatal(err)
	}
	return db, func(n int) {
		t.Helper()
		for range n {
			if _, err := db.Exec(`INSERT INTO rows (v) VALUES (randomblob(?))`, size); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// restoredRows restores the latest state of target and counts its rows.
func restoredRows(t *testing.T, target Target, log *lockedBuffer) int {
	t.Helper()
	out := filepath.Join(t.TempDir(), "restored.db")
	if _, err := Restore(context.Background(), target, out, time.Time{}, false, slog.New(slog.NewTextHandler(log, nil))); err != nil {
		t.Fatal(err)
	}
	restored, err := sql.Open("sqlite", "file:"+out+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	var n int
	if err := restored.QueryRow(`SELECT count(*) FROM rows`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
