// The schema, one list for both engines: each migration's SQL for SQLite
// and for PostgreSQL in files of the same name, migrations/sqlite/*.sql and
// Migrations/postgres/*.sql, embedded, so that they stay in step.

package store

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
)

// Migration is one step of the schema, in each engine's SQL.
type Migration struct {
	SQLite, Postgres string
}

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// Migrations are applied in order, the order of their files' names
// (NNN_what.sql); SQLite's PRAGMA user_version and PostgreSQL's
// petstore_schema table count those done. Append only: never edit one that
// has shipped. Times are Unix seconds on both engines, so that copy moves
// them unchanged.
var Migrations = readMigrations(migrationFiles)

// readMigrations reads the migrations of files: each name under
// Migrations/sqlite with its twin under migrations/postgres. A file
// without its twin is a mistake of the build, not of a database: it
// panics, and every test with it.
func readMigrations(files fs.FS) []Migration {
	sqlite, _ := fs.Glob(files, "migrations/sqlite/*.sql")
	postgres, _ := fs.Glob(files, "migrations/postgres/*.sql")
	if len(sqlite) != len(postgres) {
		panic(fmt.Sprintf("%d SQLite migrations but %d PostgreSQL ones", len(sqlite), len(postgres)))
	}
	ms := make([]Migration, len(sqlite))
	for i := range sqlite {
		if path.Base(sqlite[i]) != path.Base(postgres[i]) {
			panic(fmt.Sprintf("migration %d is %s on SQLite but %s on PostgreSQL", i+1, sqlite[i], postgres[i]))
		}
		ms[i] = Migration{SQLite: readMigration(files, sqlite[i]), Postgres: readMigration(files, postgres[i])}
	}
	return ms
}

func readMigration(files fs.FS, name string) string {
	b, err := fs.ReadFile(files, name)
	if err != nil {
		panic(err)
	}
	return string(b)
}
