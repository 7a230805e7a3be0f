// The SQL that both engines run alike is written once, over dbTx: a
// transaction (or, for reads, a connection) of either engine, and the
// little each engine says differently (its dialect).

package store

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// sqlAggregates are the aggregates written once, over sqlEngine: both
// engines embed them, and so implement their interfaces (store.go) with the
// same code. A new aggregate is a type over sqlEngine added here.
type sqlAggregates struct {
	sqlKeys     // the keys and the audit trail (keys.go)
	sqlWebhooks // the webhooks' endpoints, outbox and notices (webhooks.go)
	sqlBans     // the bans (bans.go)
}

func newSQLAggregates(db sqlEngine) sqlAggregates {
	return sqlAggregates{sqlKeys{db}, sqlWebhooks{db}, sqlBans{db}}
}

// sqlEngine is what the SQL written once needs of an engine.
type sqlEngine interface {
	// update runs fn in one write transaction, committed when fn returns
	// nil; its failures come back as the engine's store errors.
	update(ctx context.Context, fn func(dbTx) error) error
	// view runs fn with reads outside a transaction.
	view(ctx context.Context, fn func(dbTx) error) error
	// clock is the store's time.
	clock() time.Time
}

// dbTx runs statements written with ? placeholders.
type dbTx interface {
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// QueryRow runs a query of one row; Scan returns errNoRows without one.
	QueryRow(ctx context.Context, query string, args ...any) rowScanner
	Query(ctx context.Context, query string, args ...any) (dbRows, error)
	// Insert runs an INSERT of one row into a table with an id column and
	// returns the row's id.
	Insert(ctx context.Context, query string, args ...any) (int64, error)
	// Dialect is what this engine says differently.
	Dialect() dialect
}

type rowScanner interface{ Scan(dest ...any) error }

// scanInt64 is the one int64 of a row.
func scanInt64(r rowScanner) (n int64, err error) {
	err = r.Scan(&n)
	return n, err
}

// dbRows is the rows of a query: Scan after each Next that is true, then
// Err; Close when done (after an error too).
type dbRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// errNoRows: a QueryRow found no row, on either engine.
var errNoRows = errors.New("no rows in result set")

// row is a row of QueryRow, its engine's error for no row (none) made
// errNoRows.
type row struct {
	row  rowScanner
	none error
}

func (r row) Scan(dest ...any) error {
	if err := r.row.Scan(dest...); errors.Is(err, r.none) {
		return errNoRows
	} else {
		return err
	}
}

// dialect is what the engines say differently.
type dialect struct {
	// forUpdate ends a SELECT whose rows the transaction will change:
	// PostgreSQL locks them until it ends; SQLite's write transaction
	// holds the file's one write lock already.
	forUpdate string
	// skipLocked ends a SELECT of rows this transaction claims: rows
	// another transaction holds are skipped rather than waited for.
	skipLocked string
	// lockTable makes a later writer of the table wait until this
	// transaction ends, so that a check of what it holds stays true until
	// the commit; "" where the transaction holds such a lock already.
	lockTable func(table string) string
}

var (
	sqliteDialect   = dialect{lockTable: func(string) string { return "" }}
	postgresDialect = dialect{
		forUpdate:  " FOR UPDATE",
		skipLocked: " FOR UPDATE SKIP LOCKED",
		lockTable:  func(table string) string { return "LOCK TABLE " + table + " IN EXCLUSIVE MODE" },
	}
)

// each calls fn for every row of a query, then returns what ended it.
func each(rows dbRows, err error, fn func(scan func(...any) error) error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// queryRows reads every row of query, in a read transaction of db, each
// by scanRow; no row is an empty slice.
func queryRows[T any](ctx context.Context, db sqlEngine, scanRow func(scan func(...any) error) (T, error), query string, args ...any) ([]T, error) {
	var out []T
	err := db.view(ctx, func(tx dbTx) error {
		out = []T{}
		rows, err := tx.Query(ctx, query, args...)
		return each(rows, err, func(scan func(...any) error) error {
			row, err := scanRow(scan)
			out = append(out, row)
			return err
		})
	})
	return out, err
}

// SQLite, through database/sql.

type sqliteTx struct {
	q interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}
}

func (t sqliteTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := t.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t sqliteTx) Insert(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := t.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

func (t sqliteTx) QueryRow(ctx context.Context, query string, args ...any) rowScanner {
	return row{t.q.QueryRowContext(ctx, query, args...), sql.ErrNoRows}
}

func (t sqliteTx) Query(ctx context.Context, query string, args ...any) (dbRows, error) {
	rows, err := t.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqliteRows{rows}, nil
}

func (sqliteTx) Dialect() dialect { return sqliteDialect }

type sqliteRows struct{ *sql.Rows }

func (r sqliteRows) Close() { r.Rows.Close() }

// PostgreSQL, through pgx.

type pgTx struct {
	q interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
		Query(context.Context, string, ...any) (pgx.Rows, error)
		QueryRow(context.Context, string, ...any) pgx.Row
	}
}

func (t pgTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := t.q.Exec(ctx, pgQuery(query), args...)
	return tag.RowsAffected(), err
}

func (t pgTx) Insert(ctx context.Context, query string, args ...any) (id int64, err error) {
	err = t.q.QueryRow(ctx, pgQuery(query+" RETURNING id"), args...).Scan(&id)
	return id, err
}

func (t pgTx) QueryRow(ctx context.Context, query string, args ...any) rowScanner {
	return row{t.q.QueryRow(ctx, pgQuery(query), args...), pgx.ErrNoRows}
}

func (t pgTx) Query(ctx context.Context, query string, args ...any) (dbRows, error) {
	return t.q.Query(ctx, pgQuery(query), args...)
}

func (pgTx) Dialect() dialect { return postgresDialect }

// pgQueries holds each query's PostgreSQL text, made once.
var pgQueries sync.Map

// pgQuery is query with its ? placeholders numbered as PostgreSQL's $1,
// $2 ... (no query here has a ? of its own in a string).
func pgQuery(query string) string {
	if q, ok := pgQueries.Load(query); ok {
		return q.(string)
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	pgQueries.Store(query, b.String())
	return b.String()
}
