package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"petstore/internal/store"
	"strconv"
	"syscall"
)

// checkDataDir refuses, before anything opens, a SQLite file whose
// directory this user cannot write: SQLite keeps its WAL beside the file,
// the ACME cache and the first key's file go there too, and SQLite's own
// "unable to open database file (14)" says none of that. In the container
// image the directory is the volume /data (docs/production.md, "In a
// container").
func checkDataDir(db string) error {
	if store.IsPostgresURL(db) {
		return nil
	}
	dir, err := filepath.Abs(filepath.Dir(db))
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".petstore-write-check-*")
	if err == nil {
		f.Close()
		return os.Remove(f.Name())
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil // OpenSQLite says the directory does not exist
	}
	const needs = "the SQLite file %s, its WAL, the ACME cache and the first key's file are written there"
	what := fmt.Sprintf(needs, filepath.Base(db))
	switch {
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("cannot write to %s: it is on a read-only file system, and %s: mount a writable volume there (in a container: -v petstore-data:/data), or give --db a file elsewhere", dir, what)
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("cannot write to %s as uid %d (%s): %s: make it writable by this user (in a container: chown 65532 the volume, or fsGroup: 65532 on Kubernetes), or give --db a file elsewhere", dir, os.Getuid(), owner(dir), what)
	}
	return fmt.Errorf("cannot write to %s: %w", dir, err)
}

// owner says who owns dir and its mode, as ls -ld would.
func owner(dir string) string {
	fi, err := os.Stat(dir)
	if err != nil {
		return err.Error()
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fi.Mode().String()
	}
	return "owned by uid " + strconv.Itoa(int(st.Uid)) + ", " + fi.Mode().String()
}
