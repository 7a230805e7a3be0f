package store

import (
	"testing"
	"testing/fstest"
)

// TestMigrationsComeInPairs: each engine's SQL of a migration is a file
// of the same name under migrations/sqlite and migrations/postgres, read in
// the order of the names; a file without its twin stops the build's tests.
func TestMigrationsComeInPairs(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	pair := fstest.MapFS{
		"migrations/sqlite/002_b.sql":   file("B lite"),
		"migrations/sqlite/001_a.sql":   file("A lite"),
		"migrations/postgres/001_a.sql": file("A pg"),
		"migrations/postgres/002_b.sql": file("B pg"),
	}
	got := readMigrations(pair)
	want := []Migration{{SQLite: "A lite", Postgres: "A pg"}, {SQLite: "B lite", Postgres: "B pg"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("readMigrations = %q, want %q", got, want)
	}
	for _, tt := range []struct {
		name  string
		files fstest.MapFS
	}{
		{"a twin missing", fstest.MapFS{"migrations/sqlite/001_a.sql": file("A"), "migrations/sqlite/002_b.sql": file("B"), "migrations/postgres/001_a.sql": file("A")}},
		{"twins named apart", fstest.MapFS{"migrations/sqlite/001_a.sql": file("A"), "migrations/postgres/001_b.sql": file("B")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("readMigrations took them")
				}
			}()
			readMigrations(tt.files)
		})
	}
	for i, m := range Migrations {
		if m.SQLite == "" || m.Postgres == "" {
			t.Errorf("migration %d is empty on an engine: %+v", i+1, m)
		}
	}
}
