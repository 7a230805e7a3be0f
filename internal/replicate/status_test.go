package replicate

import (
	"context"
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
	_, insert := rowsDB(t, path, 100)
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
	if got := restoredRows(t, target, log); got != 20 {
		t.Errorf("the restore once caught up holds %d rows, want 20", got)
	}
}
