package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"petstore/internal/testkit"
)

// keys create on a database that is not there makes it, and says so with
// its absolute path, once: run from the wrong folder, the mistake shows.
func TestKeysCreateSaysWhenItMakesANewDatabase(t *testing.T) {
	t.Parallel()
	testkit.PetstoreBinary(t)
	dir := t.TempDir()
	const announce = "petstore: created a new, empty database at "
	want := announce + filepath.Join(dir, "petstore.db") + "\n"
	first := testkit.RunPetstore(t, dir, nil, "keys", "create", "--plan", "free")
	if first.Code != 0 || !strings.Contains(first.Stderr, want) {
		t.Errorf("keys create in an empty folder: exit status %d, stderr:\n%s\nwant the line %q", first.Code, first.Stderr, want)
	}
	if strings.Contains(first.Stdout, announce) {
		t.Errorf("standard output %q holds the notice; it must hold the key alone", first.Stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "petstore.db")); err != nil {
		t.Fatal(err)
	}
	again := testkit.RunPetstore(t, dir, nil, "keys", "create", "--plan", "free")
	if again.Code != 0 || strings.Contains(again.Stderr, announce) {
		t.Errorf("keys create on the database it made: exit status %d, stderr:\n%s\nwant no notice", again.Code, again.Stderr)
	}
}
