package store

import (
	"context"
	"errors"
	"io/fs"
	"petstore/internal/testkit"
	"slices"
	"testing"
	"time"
)

// certmagic's storage on PostgreSQL keeps, lists, states and deletes keys
// as its file storage does, and a lock is held by one at a time, freed by
// Unlock or when its holder stops extending it.
func TestACMEStorageOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testkit.PostgresURL(t)
	store, err := OpenPostgres(ctx, db, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s, other := store.ACMEStorage().(*pgACMEStorage), store.ACMEStorage().(*pgACMEStorage)
	const ttl = 2 * time.Second
	s.ttl, s.poll, other.ttl, other.poll = ttl, 100*time.Millisecond, ttl, 100*time.Millisecond
	for _, k := range []string{"certificates/ca/a.test/a.test.crt", "certificates/ca/a.test/a.test.key", "certificates/ca/b.test/b.test.crt", "acme/users/u.json"} {
		if err := s.Store(ctx, k, []byte("v:"+k)); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := other.Load(ctx, "acme/users/u.json"); err != nil || string(v) != "v:acme/users/u.json" {
		t.Errorf("Load: %q, %v", v, err)
	}
	if _, err := s.Load(ctx, "acme/none"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing key: %v, want fs.ErrNotExist", err)
	}
	if got, _ := s.List(ctx, "certificates/ca", false); !slices.Equal(got, []string{"certificates/ca/a.test", "certificates/ca/b.test"}) {
		t.Errorf("List not recursive: %v", got)
	}
	if got, _ := s.List(ctx, "certificates", true); len(got) != 3 {
		t.Errorf("List recursive: %v, want the three certificate files", got)
	}
	if info, err := s.Stat(ctx, "certificates/ca/a.test"); err != nil || info.IsTerminal {
		t.Errorf("Stat of a directory: %+v, %v", info, err)
	}
	if info, err := s.Stat(ctx, "acme/users/u.json"); err != nil || !info.IsTerminal || info.Size != int64(len("v:acme/users/u.json")) {
		t.Errorf("Stat of a file: %+v, %v", info, err)
	}
	if err := s.Delete(ctx, "certificates/ca/a.test"); err != nil || s.Exists(ctx, "certificates/ca/a.test/a.test.key") || !s.Exists(ctx, "certificates/ca/b.test") {
		t.Errorf("Delete of a directory: %v; want its keys gone and the others kept", err)
	}

	if err := s.Lock(ctx, "issue_cert_a.test"); err != nil {
		t.Fatal(err)
	}
	// Held past its TTL: a lock nobody extended would have expired.
	short, cancel := context.WithTimeout(ctx, 2*ttl)
	defer cancel()
	if err := other.Lock(short, "issue_cert_a.test"); err == nil {
		t.Fatal("a second holder got a lock that is held and extended")
	}
	if err := s.Unlock(ctx, "issue_cert_a.test"); err != nil {
		t.Fatal(err)
	}
	if err := other.Lock(ctx, "issue_cert_a.test"); err != nil {
		t.Fatalf("the lock after Unlock: %v", err)
	}
	other.held["issue_cert_a.test"].stop() // its holder dies: nobody extends it
	start := time.Now()
	if err := s.Lock(ctx, "issue_cert_a.test"); err != nil || time.Since(start) > 3*ttl {
		t.Errorf("a lock whose holder died: %v after %v, want it within the TTL", err, time.Since(start))
	}
}
