package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A server whose SQLite file is in a directory it cannot write stops at
// start, exit status 1, in one line that says why and what to do, and
// the file already there is untouched. As root, whom permissions do not
// stop, the directory is a read-only bind mount of itself; as another
// user, a directory without write permission.
func TestServeRefusesADataDirectoryItCannotWrite(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "petstore.db")
	if res := viaRun(t, nil, "keys", "create", "--db", db, "--plan", "pro", "--name", "kept"); res.Code != 0 {
		t.Fatalf("keys create: %d %s", res.Code, res.Stderr)
	}
	before := fileSum(t, db)
	want := "on a read-only file system"
	if os.Geteuid() == 0 {
		if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
			t.Fatalf("bind-mount %s: %v", dir, err)
		}
		defer syscall.Unmount(dir, 0)
		if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
			t.Fatalf("make %s read-only: %v", dir, err)
		}
	} else {
		want = "as uid "
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o755)
	}
	res := viaRun(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", db)
	line := strings.TrimSpace(res.Stderr)
	if res.Code != 1 || strings.Contains(line, "\n") || !strings.Contains(line, "cannot write to "+dir) ||
		!strings.Contains(line, want) || !strings.Contains(line, "--db") {
		t.Errorf("exit %d: %q; want 1 and one line: cannot write to %s, %s, what to do", res.Code, res.Stderr, dir, want)
	}
	if fileSum(t, db) != before {
		t.Error("the database changed")
	}
}
