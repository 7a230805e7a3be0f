// The schema, one list for both engines: each migration's SQL for SQLite
// and for PostgreSQL in files of the same name, migrations/sqlite/*.sql and
// migrations/postgres/*.sql, embedded, so that they stay in step; and how
// each engine brings a database up to date.

package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// runMigrations runs by exec, in order, the migrations a schema at version
// lacks; a schema newer than this petstore knows is refused.
func runMigrations(version int, exec func(Migration) error) error {
	if version > len(Migrations) {
		return fmt.Errorf("schema version %d is newer than this petstore knows (%d): upgrade petstore", version, len(Migrations))
	}
	for i := version; i < len(Migrations); i++ {
		if err := exec(Migrations[i]); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	return nil
}

func (s *SQLite) migrate(ctx context.Context) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return err
	}
	if err := runMigrations(version, func(m Migration) error { _, err := tx.ExecContext(ctx, m.SQLite); return err }); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(Migrations))); err != nil {
		return err
	}
	return tx.Commit()
}

// migrate brings the schema up to date. When it is current, it only reads
// the version: a server whose role has no right beyond its grants starts
// (docs/production.md, "Least privilege on PostgreSQL"). When it is behind
// and the role may not change it, the error says to run petstore migrate.
func (s *Postgres) migrate(ctx context.Context) error {
	version, err := s.schemaVersion(ctx)
	if err != nil || version == len(Migrations) {
		return err
	}
	err = s.applyMigrations(ctx)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgInsufficientPrivilege {
		var role string
		s.pool.QueryRow(ctx, `SELECT current_user`).Scan(&role)
		return fmt.Errorf("the schema is at version %d and this petstore needs %d, which role %s may not make: "+
			"run petstore migrate --db URL as the role that owns the tables (%s)", version, len(Migrations), role, pgErr.Message)
	}
	return err
}

// pgInsufficientPrivilege and pgUndefinedTable are PostgreSQL's SQLSTATEs
// for a right the role lacks and a table that is not there.
const (
	pgInsufficientPrivilege = "42501"
	pgUndefinedTable        = "42P01"
)

// schemaVersion is the version petstore_schema records: 0 before the
// first migration.
func (s *Postgres) schemaVersion(ctx context.Context) (int, error) {
	var version int
	err := s.pool.QueryRow(ctx, `SELECT version FROM petstore_schema`).Scan(&version)
	var pgErr *pgconn.PgError
	if errors.Is(err, pgx.ErrNoRows) || (errors.As(err, &pgErr) && pgErr.Code == pgUndefinedTable) {
		return 0, nil
	}
	if err == nil && version > len(Migrations) {
		return 0, fmt.Errorf("schema version %d is newer than this petstore knows (%d): upgrade petstore", version, len(Migrations))
	}
	return version, err
}

// applyMigrations runs the migrations the schema lacks, under an advisory
// lock, so that servers starting at once migrate once.
func (s *Postgres) applyMigrations(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	// A session lock, held across the transaction: a second server that
	// starts meanwhile waits here, then finds the work done.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, lockMigrate, s.lockSpace); err != nil {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1, $2)`, lockMigrate, s.lockSpace)
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS petstore_schema (version integer NOT NULL)`); err != nil {
			return err
		}
		var version int
		err := tx.QueryRow(ctx, `SELECT version FROM petstore_schema`).Scan(&version)
		if errors.Is(err, pgx.ErrNoRows) {
			_, err = tx.Exec(ctx, `INSERT INTO petstore_schema (version) VALUES (0)`)
		}
		if err != nil {
			return err
		}
		if err := runMigrations(version, func(m Migration) error { _, err := tx.Exec(ctx, m.Postgres); return err }); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE petstore_schema SET version = $1`, len(Migrations))
		return err
	})
}
