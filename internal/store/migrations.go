// The schema, one list for both engines: each migration's SQL for SQLite
// and for PostgreSQL in files of the same name, migrations/sqlite/*.sql and
// migrations/postgres/*.sql, embedded, so that they stay in step; whether
// each is an expand or a contract step; and how each engine brings a
// database up to date (docs/design.md, "Migrations").

package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"petstore/internal/domain"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Migration is one step of the schema, in each engine's SQL.
type Migration struct {
	Name             string // its files' name, NNN_what.sql
	SQLite, Postgres string
	// Expand: the servers that know only the migrations before it keep
	// working on the schema it makes (new tables, new nullable columns or
	// ones with a default, new indexes). Otherwise it is a contract step.
	Expand bool
	// Marked: its files begin with "-- expand" or "-- contract". Every
	// migration from markedFrom on must be; those before count as
	// contract steps.
	Marked bool
}

// markedFrom is the number of the first migration that must say whether it
// expands or contracts the schema.
const markedFrom = 9

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// Migrations are applied in order, the order of their files' names
// (NNN_what.sql); SQLite's PRAGMA user_version and PostgreSQL's
// petstore_schema table count those done. Append only: never edit one that
// has shipped. Times are Unix seconds on both engines, so that copy moves
// them unchanged.
var Migrations = readMigrations(migrationFiles)

// levelRecorded is the count of migrations from which the schema records
// its level (the migration that adds the record): a schema before it has
// the level of its last contract step, which every server that reads
// levels knows.
var levelRecorded = 1 + slices.IndexFunc(Migrations, func(m Migration) bool { return m.Name == "011_servers.sql" })

// readMigrations reads the migrations of files: each name under
// Migrations/sqlite with its twin under migrations/postgres. A file
// without its twin, or twins of different kinds, is a mistake of the
// build, not of a database: it panics, and every test with it.
func readMigrations(files fs.FS) []Migration {
	sqlite, _ := fs.Glob(files, "migrations/sqlite/*.sql")
	postgres, _ := fs.Glob(files, "migrations/postgres/*.sql")
	if len(sqlite) != len(postgres) {
		panic(fmt.Sprintf("%d SQLite migrations but %d PostgreSQL ones", len(sqlite), len(postgres)))
	}
	ms := make([]Migration, len(sqlite))
	for i := range sqlite {
		name := path.Base(sqlite[i])
		if name != path.Base(postgres[i]) {
			panic(fmt.Sprintf("migration %d is %s on SQLite but %s on PostgreSQL", i+1, sqlite[i], postgres[i]))
		}
		m := Migration{Name: name, SQLite: readMigration(files, sqlite[i]), Postgres: readMigration(files, postgres[i])}
		m.Expand, m.Marked = kindOf(m.SQLite)
		if expand, marked := kindOf(m.Postgres); expand != m.Expand || marked != m.Marked {
			panic(fmt.Sprintf("migration %s is of one kind on SQLite and another on PostgreSQL", name))
		}
		ms[i] = m
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

// kindOf reads a migration's first line: "-- expand" or "-- contract",
// perhaps followed by a colon and why.
func kindOf(sql string) (expand, marked bool) {
	first, _, _ := strings.Cut(sql, "\n")
	word, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(first), "--")), ":")
	switch strings.TrimSpace(word) {
	case "expand":
		return true, true
	case "contract":
		return false, true
	}
	return false, false
}

// atStart tells whether a server may apply m when it starts on a shared
// database: an expand step, or one of those before the rule (they ran at
// start before it).
func (m Migration) atStart() bool { return m.Expand || !m.Marked }

// levelAt is the level of a schema with the first n migrations done: the
// count of the last contract step among them.
func levelAt(n int) int {
	for n > 0 && Migrations[n-1].Expand {
		n--
	}
	return n
}

// needed is how many migrations this petstore needs done: all it knows
// but the contract steps at the end of the list, which a release writes
// so that its code works before and after them (they wait for petstore
// migrate --contract).
func needed() int {
	n := len(Migrations)
	for n > 0 && Migrations[n-1].Marked && !Migrations[n-1].Expand {
		n--
	}
	return n
}

// schemaState is where a schema stands: version migrations done, at level.
type schemaState struct{ version, level int }

// readSchema is the state of a schema at version: its level is recorded
// from levelRecorded on (read by asking query), and before that it is the
// level of its last contract step, every migration of which this petstore
// knows.
func readSchema(version int, query func(string) rowScanner) (schemaState, error) {
	st := schemaState{version: version}
	if version < levelRecorded {
		st.level = levelAt(version)
		return st, nil
	}
	err := query(`SELECT level FROM petstore_schema`).Scan(&st.level)
	return st, err
}

// tooNew refuses a schema whose level is above what this petstore knows.
// One whose only unknown migrations are expand steps is not: this petstore
// runs on it.
func (st schemaState) tooNew() error {
	if st.level <= len(Migrations) {
		return nil
	}
	return fmt.Errorf("the schema is at level %d (version %d), above the %d migrations this petstore knows: "+
		"petstore migrate --contract made it for a newer petstore; run that one", st.level, st.version, len(Migrations))
}

// behind refuses a schema that lacks a migration this petstore needs.
func (st schemaState) behind() error {
	if st.version >= needed() {
		return nil
	}
	run := "petstore migrate"
	if !Migrations[st.version].atStart() {
		run = fmt.Sprintf("petstore migrate --contract (migration %d is a contract step: once no older server runs)", st.version+1)
	}
	return fmt.Errorf("the schema is at version %d (level %d) and this petstore needs %d of its %d migrations: "+
		"run %s --db URL as the role that owns the tables", st.version, st.level, needed(), len(Migrations), run)
}

// runMigrations runs by exec, in order from version, the migrations may
// lets run, up to the first it does not; it returns the count then done.
func runMigrations(version int, may func(n int) (bool, error), exec func(Migration) error) (int, error) {
	for ; version < len(Migrations); version++ {
		if ok, err := may(version + 1); err != nil || !ok {
			return version, err
		}
		if err := exec(Migrations[version]); err != nil {
			return version, fmt.Errorf("migration %d (%s): %w", version+1, Migrations[version].Name, err)
		}
	}
	return version, nil
}

// recordLevel records the level of a schema with n migrations done, by
// exec, once the record exists.
func recordLevel(n int, exec func(level int) error) error {
	if n < levelRecorded {
		return nil
	}
	return exec(levelAt(n))
}

// migrate brings the file's schema up to date, contract steps too: one
// server uses it, so none is left behind by them.
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
	st, err := readSchema(version, func(q string) rowScanner { return tx.QueryRowContext(ctx, q) })
	if err != nil {
		return err
	}
	if err := st.tooNew(); err != nil {
		return err
	}
	all := func(int) (bool, error) { return true, nil }
	done, err := runMigrations(version, all, func(m Migration) error { _, err := tx.ExecContext(ctx, m.SQLite); return err })
	if err != nil || done == version {
		return err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", done)); err != nil {
		return err
	}
	if err := recordLevel(done, func(level int) error {
		_, err := tx.ExecContext(ctx, `UPDATE petstore_schema SET level = ?`, level)
		return err
	}); err != nil {
		return err
	}
	return tx.Commit()
}

// Schema: SQLite's PRAGMA user_version counts the migrations done.
func (s *SQLite) Schema(ctx context.Context) (st domain.Schema, err error) {
	err = s.view(ctx, func(tx dbTx) error {
		version, err := scanOne[int](tx.QueryRow(ctx, "PRAGMA user_version").Scan)
		if err != nil {
			return err
		}
		state, err := readSchema(version, func(q string) rowScanner { return tx.QueryRow(ctx, q) })
		st = domain.Schema{Version: state.version, Level: state.level}
		return err
	})
	return st, err
}

// MigrateOptions are what petstore migrate is asked: Contract runs the
// contract steps too, which Force runs even while an older server checked
// in during the last contractWait.
type MigrateOptions struct{ Contract, Force bool }

// contractWait is how recently an older server must have checked in for
// petstore migrate --contract to refuse.
const contractWait = time.Minute

// OpenToMigrate is Open for petstore migrate: the schema brought up to
// date as opts allow (on SQLite, which one server uses, every step).
func OpenToMigrate(ctx context.Context, db string, opts MigrateOptions, now func() time.Time) (Storage, error) {
	if IsPostgresURL(db) {
		return openPostgres(ctx, db, now, opts)
	}
	return OpenSQLite(ctx, db, true, now)
}

// migrate brings the schema up to date as far as opts allow: a server
// applies the expand steps (and those before the rule), petstore migrate
// --contract the contract steps too. When it is current, it only reads
// the version: a server whose role has no right beyond its grants starts
// (docs/production.md, "Least privilege on PostgreSQL"). When it is behind
// and the role may not change it, the error says to run petstore migrate.
func (s *Postgres) migrate(ctx context.Context, opts MigrateOptions) error {
	st, err := s.schemaState(ctx)
	if err != nil {
		return err
	}
	if err := st.tooNew(); err != nil {
		return err
	}
	if st.version == 0 {
		opts.Contract = true // an empty database: no server that a contract step could leave behind
	}
	if st.version < len(Migrations) && (opts.Contract || Migrations[st.version].atStart()) {
		err = s.applyMigrations(ctx, opts)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == pgInsufficientPrivilege {
			var role string
			s.pool.QueryRow(ctx, `SELECT current_user`).Scan(&role)
			return fmt.Errorf("the schema is at version %d and this petstore needs %d, which role %s may not make: "+
				"run petstore migrate --db URL as the role that owns the tables (%s)", st.version, needed(), role, pgErr.Message)
		}
		if err != nil {
			return err
		}
		if st, err = s.schemaState(ctx); err != nil {
			return err
		}
	}
	return st.behind()
}

// pgInsufficientPrivilege and pgUndefinedTable are PostgreSQL's SQLSTATEs
// for a right the role lacks and a table that is not there.
const (
	pgInsufficientPrivilege = "42501"
	pgUndefinedTable        = "42P01"
)

// schemaState is what petstore_schema records: version 0 before the
// first migration.
func (s *Postgres) schemaState(ctx context.Context) (schemaState, error) {
	var version int
	err := s.pool.QueryRow(ctx, `SELECT version FROM petstore_schema`).Scan(&version)
	var pgErr *pgconn.PgError
	if errors.Is(err, pgx.ErrNoRows) || (errors.As(err, &pgErr) && pgErr.Code == pgUndefinedTable) {
		return schemaState{}, nil
	}
	if err != nil {
		return schemaState{}, err
	}
	return readSchema(version, func(q string) rowScanner { return s.pool.QueryRow(ctx, q) })
}

func (s *Postgres) Schema(ctx context.Context) (domain.Schema, error) {
	st, err := s.schemaState(ctx)
	return domain.Schema{Version: st.version, Level: st.level}, s.pgError(err)
}

// applyMigrations runs the migrations the schema lacks that opts allow,
// under an advisory lock, so that servers starting at once migrate once.
func (s *Postgres) applyMigrations(ctx context.Context, opts MigrateOptions) error {
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
		may := func(n int) (bool, error) {
			switch m := Migrations[n-1]; {
			case m.atStart() || opts.Contract && (opts.Force || n-1 < levelRecorded):
				return true, nil // before levelRecorded no server checks in
			case opts.Contract:
				return true, olderServer(ctx, tx, n, s.now())
			}
			return false, nil
		}
		done, err := runMigrations(version, may, func(m Migration) error { _, err := tx.Exec(ctx, m.Postgres); return err })
		if err != nil || done == version {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE petstore_schema SET version = $1`, done); err != nil {
			return err
		}
		return recordLevel(done, func(level int) error {
			_, err := tx.Exec(ctx, `UPDATE petstore_schema SET level = $1`, level)
			return err
		})
	})
}

// olderServer refuses contract step n while a server that knows fewer
// migrations checked in during the last contractWait, naming it.
func olderServer(ctx context.Context, tx pgx.Tx, n int, now time.Time) error {
	var address, version string
	var knows int
	var seen int64
	err := tx.QueryRow(ctx, `SELECT address, version, migrations, last_seen FROM servers
		WHERE migrations < $1 AND last_seen >= $2 ORDER BY last_seen DESC, address LIMIT 1`, n, now.Add(-contractWait).Unix()).
		Scan(&address, &version, &knows, &seen)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("migration %d (%s) is a contract step, and server %s (petstore %s, which knows %d migrations) checked in %ds ago: "+
		"upgrade or stop it first, or add --force", n, Migrations[n-1].Name, address, version, knows, max(0, now.Unix()-seen))
}
