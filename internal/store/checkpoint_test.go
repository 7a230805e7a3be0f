package store

import (
	"context"
	"database/sql"
	"petstore/internal/domain"
	"sync"
	"testing"
	"time"
)

// The writer leaves checkpoints to Checkpoint, which keeps the WAL small
// even while creates never stop: the WAL starts over after a checkpoint
// instead of growing with every commit.
func TestCheckpointKeepsTheWALSmallUnderSteadyCreates(t *testing.T) {
	s, _ := openTestSQLite(t, time.Now)
	ctx := context.Background()
	var auto, limit int
	if err := s.write.QueryRow("PRAGMA wal_autocheckpoint").Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("the writer checkpoints by itself every %d pages (%v)", auto, err)
	}
	if err := s.write.QueryRow("PRAGMA journal_size_limit").Scan(&limit); err != nil || limit != walSizeLimit {
		t.Fatalf("the writer cuts the WAL back to %d bytes (%v), want %d", limit, err, walSizeLimit)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := s.CreatePets(ctx, []domain.PetInsert{{Pet: domain.Pet{Name: "Rex", CategoryID: 1}}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var frames []int
	for range 20 {
		time.Sleep(20 * time.Millisecond)
		c, err := s.Checkpoint(ctx)
		if err != nil || !c.complete {
			t.Fatalf("Checkpoint: %+v, %v", c, err)
		}
		frames = append(frames, c.frames)
	}
	close(stop)
	wg.Wait()
	startedOver := 0
	for i := 1; i < len(frames); i++ {
		if frames[i] < frames[i-1] {
			startedOver++
		}
	}
	if startedOver < len(frames)/4 {
		t.Errorf("the WAL started over after %d of %d checkpoints; frames it held: %v", startedOver, len(frames), frames)
	}
}

func TestCheckpointWaitsForAPauseInTheWrites(t *testing.T) {
	start := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	type look struct {
		after   time.Duration // since start
		commits int64         // counted by then
		due     bool
	}
	tests := []struct {
		name  string
		looks []look
	}{
		{"nothing written: no checkpoint", []look{{time.Second, 0, false}, {2 * time.Minute, 0, false}}},
		{"writes that pause are checkpointed in the pause", []look{
			{250 * time.Millisecond, 10, false}, {500 * time.Millisecond, 25, false}, {750 * time.Millisecond, 25, true}}},
		{"writes that never pause wait for the commit cap", []look{
			{1 * time.Second, checkpointAfterCommits / 3, false}, {2 * time.Second, checkpointAfterCommits - 1, false},
			{3 * time.Second, checkpointAfterCommits, true}}},
		{"a trickle of writes waits at most a minute", []look{
			{30 * time.Second, 1, false}, {59 * time.Second, 2, false}, {61 * time.Second, 3, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy := checkpointPolicy{doneAt: start}
			for i, l := range tt.looks {
				if got := policy.due(start.Add(l.after), l.commits); got != l.due {
					t.Fatalf("look %d (%v, %d commits): due = %v, want %v", i, l.after, l.commits, got, l.due)
				}
			}
		})
	}
}

// A checkpoint that a reader holds back (a backup in another process, say)
// is not taken as done: the next look tries again, and once it completes
// the WAL starts over.
func TestACheckpointHeldBackByAReaderIsTriedAgain(t *testing.T) {
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	s, path := openTestSQLite(t, func() time.Time { return at })
	ctx := context.Background()
	create := func() {
		t.Helper()
		if err := s.CreatePets(ctx, []domain.PetInsert{{Pet: domain.Pet{Name: "Rex", CategoryID: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	policy := &checkpointPolicy{doneAt: at}
	look := func(wantDone int64) {
		t.Helper()
		if err := s.checkpointIfDue(ctx, policy, at); err != nil {
			t.Fatal(err)
		}
		if policy.done != wantDone {
			t.Fatalf("checkpointed up to commit %d, want %d", policy.done, wantDone)
		}
	}
	create()
	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	reader, err := other.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRow("SELECT count(*) FROM pets").Scan(&n); err != nil {
		t.Fatal(err)
	}
	create() // after the reader's snapshot: it cannot be copied yet

	look(0) // the writes have not paused yet
	look(0) // they have, but the reader holds the checkpoint back
	reader.Rollback()
	look(2)
	before, err := s.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	create()
	after, err := s.Checkpoint(ctx)
	if err != nil || after.frames >= before.frames {
		t.Errorf("the WAL held %d frames, then %d after one more commit (%v): it did not start over", before.frames, after.frames, err)
	}
}

// openTestSQLite is a new SQLite store in a file of the test's own.
func openTestSQLite(t *testing.T, now func() time.Time) (s *SQLite, path string) {
	t.Helper()
	path = t.TempDir() + "/petstore.db"
	s, err := OpenSQLite(t.Context(), path, true, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}
