package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keys create on a database that is not there makes it, and says so with
// its absolute path, once: run from the wrong folder, the mistake shows.
func TestKeysCreateSaysWhenItMakesANewDatabase(t *testing.T) {
	t.Parallel()
	petstoreBinary(t)
	dir := t.TempDir()
	const announce = "petstore: created a new, empty database at "
	want := announce + filepath.Join(dir, "petstore.db") + "\n"
	first := runBinary(t, dir, nil, "keys", "create", "--plan", "free")
	if first.code != 0 || !strings.Contains(first.stderr, want) {
		t.Errorf("keys create in an empty folder: exit status %d, stderr:\n%s\nwant the line %q", first.code, first.stderr, want)
	}
	if strings.Contains(first.stdout, announce) {
		t.Errorf("standard output %q holds the notice; it must hold the key alone", first.stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "petstore.db")); err != nil {
		t.Fatal(err)
	}
	again := runBinary(t, dir, nil, "keys", "create", "--plan", "free")
	if again.code != 0 || strings.Contains(again.stderr, announce) {
		t.Errorf("keys create on the database it made: exit status %d, stderr:\n%s\nwant no notice", again.code, again.stderr)
	}
}
