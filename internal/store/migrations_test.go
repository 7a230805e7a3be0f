package store

import (
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

// TestMigrationsComeInPairs: each engine's SQL of a migration is a file
// of the same name under migrations/sqlite and migrations/postgres, read in
// the order of the names; a file without its twin stops the build's tests.
func TestMigrationsComeInPairs(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	pair := fstest.MapFS{
		"migrations/sqlite/002_b.sql":   file("-- expand: a table\nB lite"),
		"migrations/sqlite/001_a.sql":   file("A lite"),
		"migrations/postgres/001_a.sql": file("A pg"),
		"migrations/postgres/002_b.sql": file("-- expand: a table\nB pg"),
	}
	got := readMigrations(pair)
	want := []Migration{{Name: "001_a.sql", SQLite: "A lite", Postgres: "A pg"},
		{Name: "002_b.sql", SQLite: "-- expand: a table\nB lite", Postgres: "-- expand: a table\nB pg", Expand: true, Marked: true}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("readMigrations = %+v, want %+v", got, want)
	}
	for _, tt := range []struct {
		name  string
		files fstest.MapFS
	}{
		{"a twin missing", fstest.MapFS{"migrations/sqlite/001_a.sql": file("A"), "migrations/sqlite/002_b.sql": file("B"), "migrations/postgres/001_a.sql": file("A")}},
		{"twins named apart", fstest.MapFS{"migrations/sqlite/001_a.sql": file("A"), "migrations/postgres/001_b.sql": file("B")}},
		{"twins of two kinds", fstest.MapFS{"migrations/sqlite/001_a.sql": file("-- expand\nA"), "migrations/postgres/001_a.sql": file("-- contract\nA")}},
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

// TestEveryMigrationFromTheRuleOnSaysItsKind: from markedFrom on, each
// migration's files begin with -- expand or -- contract (one merged
// without it fails here); those before count as contract steps.
func TestEveryMigrationFromTheRuleOnSaysItsKind(t *testing.T) {
	for i, m := range Migrations {
		n, err := strconv.Atoi(strings.SplitN(m.Name, "_", 2)[0])
		switch {
		case err != nil:
			t.Errorf("migration %d is named %s, not NNN_what.sql", i+1, m.Name)
		case n >= markedFrom && !m.Marked:
			t.Errorf("%s does not begin with -- expand or -- contract: say whether the servers of the version before keep working on it (docs/design.md, \"Migrations\")", m.Name)
		case n < markedFrom && m.Marked:
			t.Errorf("%s is from before the rule: it counts as a contract step and says nothing", m.Name)
		}
	}
	if levelRecorded == 0 {
		t.Error("no migration records the schema's level (011_servers.sql)")
	}
	if got := levelAt(markedFrom - 1); got != markedFrom-1 {
		t.Errorf("the level with the migrations before the rule done is %d, want %d", got, markedFrom-1)
	}
}
