package replicate

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"testing"
	"time"
)

// Caught up (Behind zero) means every committed write is in the replica:
// a commit Litestream has not read yet counts as behind, however far its
// own position says the replica is, and a restore once Behind is zero
// holds every row.
func TestBehindIsZeroOnlyOnceEveryCommitIsUploaded(t *testing.T) {
	target, err := ParseTarget("file://" + filepath.Join(t.TempDir(), "replica"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rows.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	insert := func(n int) {
		t.Helper()
		for range n {
			if _, err := db.Exec(`INSERT INTO rows (v) VALUES (randomblob(100))`); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := db.Exec(`CREATE TABLE rows (id INTEGER PRIMARY KEY, v BLOB)`); err != nil {
		t.Fatal(err)
	}
	log := &lockedBuffer{}
	// An interval of an hour: nothing reads the WAL or uploads but the
	// test, through the replicator's look and the replica's upload.
	r, err := Start(context.Background(), Config{Target: target, Interval: time.Hour, Retention: time.Hour,
		LocalLimit: DefaultLocalLimit, Logger: slog.New(slog.NewTextHandler(log, nil)), Now: time.Now}, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := t.Context()
	upload := func() {
		t.Helper()
		r.look(ctx)
		if err := r.db.Replica.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		r.look(ctx)
	}
	insert(10)
	upload()
	if s := r.Status(); s.Behind != 0 {
		t.Fatalf("after the first rows' upload: %+v, want caught up\n%s", s, log)
	}
	insert(10)
	if s := r.Status(); s.Behind == 0 {
		t.Errorf("10 rows committed, none read from the WAL: %+v, want behind", s)
	}
	upload()
	if s := r.Status(); s.Behind != 0 {
		t.Fatalf("after the upload: %+v, want caught up\n%s", s, log)
	}
	out := filepath.Join(t.TempDir(), "restored.db")
	if _, err := Restore(ctx, target, out, time.Time{}, false, slog.New(slog.NewTextHandler(log, nil))); err != nil {
		t.Fatal(err)
	}
	restored, err := sql.Open("sqlite", "file:"+out+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	var got int
	if err := restored.QueryRow(`SELECT count(*) FROM rows`).Scan(&got); err != nil || got != 20 {
		t.Errorf("the restore once caught up holds %d rows (%v), want 20", got, err)
	}
}
