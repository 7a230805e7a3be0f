package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"petstore/internal/domain"
)

// A database file deleted or replaced while open is lost: the look at its
// path says so, every write is refused as unavailable (refused) without
// reaching the file, and the check each write makes allocates nothing,
// before the loss or after.
func TestADeletedOrReplacedDatabaseFileTakesNoMoreWrites(t *testing.T) {
	for _, c := range []struct {
		name string
		lose func(t *testing.T, path string)
	}{
		{"its directory removed", func(t *testing.T, path string) {
			if err := os.RemoveAll(filepath.Dir(path)); err != nil {
				t.Fatal(err)
			}
		}},
		{"the file deleted", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
		{"another file renamed over it", func(t *testing.T, path string) {
			other := filepath.Join(filepath.Dir(path), "other.db")
			if err := os.WriteFile(other, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, path := openTestSQLite(t, time.Now)
			ctx := context.Background()
			create := func() error {
				return s.CreatePets(ctx, []domain.PetInsert{{Pet: domain.Pet{Name: "Rex", CategoryID: 1}}})
			}
			if err := errors.Join(s.file.check(), s.Ping(ctx), create()); err != nil {
				t.Fatalf("before: %v", err)
			}
			if n := testing.AllocsPerRun(1000, func() { _ = s.file.writable() }); n != 0 {
				t.Errorf("a write's check allocates %v times, want 0", n)
			}
			c.lose(t, path)
			if err := create(); err != nil {
				t.Fatalf("a write before anyone looked: %v; the look is the watch's and the probe's", err)
			}
			if err := s.Ping(ctx); domain.DBFailureOf(err) != domain.DBRefused {
				t.Fatalf("Ping after the loss: %v, want unavailable (refused)", err)
			}
			commits := s.commits.Load()
			for name, err := range map[string]error{
				"a create":      create(),
				"a usage write": s.AddUsage(ctx, []domain.UsageCount{{KeyID: 1, Day: "2026-11-28", Count: 1, Batch: domain.Batch{Stream: "test", N: 1}}}),
				"a prune":       func() error { _, err := s.PruneIdempotency(ctx, time.Now()); return err }(),
				"the check":     s.file.check(),
			} {
				if domain.DBFailureOf(err) != domain.DBRefused || !errors.Is(err, s.file.lostErr) {
					t.Errorf("%s after the loss: %v, want the file's loss", name, err)
				}
			}
			if n := s.commits.Load() - commits; n != 0 {
				t.Errorf("%d commits after the loss was seen, want none", n)
			}
			if n := testing.AllocsPerRun(1000, func() { _ = s.file.writable() }); n != 0 {
				t.Errorf("a write's check after the loss allocates %v times, want 0", n)
			}
		})
	}
}

// The file renamed over a lost one is someone else's: the server never
// writes it, even when its pool wants a new connection after the loss (a
// reader dropped, a pool not yet full) with the lost file's WAL still
// beside the path, nor when it closes.
func TestAFileRenamedOverTheDatabaseIsLeftAsItWas(t *testing.T) {
	s, path := openTestSQLite(t, time.Now)
	ctx := context.Background()
	for range 50 {
		if err := s.CreatePets(ctx, []domain.PetInsert{{Pet: domain.Pet{Name: "Rex", CategoryID: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	// No reader kept: the next read opens a new connection by path.
	s.read.SetMaxIdleConns(0)
	const replacement = "another file, not the server's database"
	other := filepath.Join(filepath.Dir(path), "other")
	if err := errors.Join(os.WriteFile(other, []byte(replacement), 0o600), os.Rename(other, path)); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); !errors.Is(err, s.file.lostErr) {
		t.Fatalf("Ping after the loss: %v, want the file's loss", err)
	}
	if _, err := s.GetPet(ctx, 1); !errors.Is(err, s.file.lostErr) {
		t.Errorf("a read on a new connection after the loss: %v, want the file's loss", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != replacement {
		t.Errorf("the file renamed over the database holds %d bytes %.60q (%v), want it as it was", len(b), b, err)
	}
}
