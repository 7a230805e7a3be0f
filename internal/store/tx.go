// The SQL that both engines run alike is written once, over dbTx: a
// transaction (or, for reads, a connection) of either engine, and the
// little each engine says differently (its dialect). Below them, the SQL
// both speak alike: the columns of a key and of the audit trail, and how
// their nullable times and ids travel.

package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"petstore/internal/domain"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// sqlAggregates are the aggregates written once, over sqlEngine: both
// engines embed them, and so implement their interfaces (storage.go) with the
// same code. A new aggregate is a type over sqlEngine added here.
type sqlAggregates struct {
	sqlKeys     // the keys and the audit trail (keys.go)
	sqlWebhooks // the webhooks' endpoints, outbox and notices (webhooks.go)
	sqlBans     // the bans (bans.go)
	sqlServers  // the servers' check-ins (servers.go)
}

func newSQLAggregates(db sqlEngine) sqlAggregates {
	return sqlAggregates{sqlKeys{db}, sqlWebhooks{db}, sqlBans{db}, sqlServers{db}}
}

// sqlEngine is what the SQL written once needs of an engine.
type sqlEngine interface {
	// update runs fn in one write transaction, committed when fn returns
	// nil; its failures come back as the engine's store errors.
	update(ctx context.Context, fn func(dbTx) error) error
	// view runs fn with reads outside a transaction.
	view(ctx context.Context, fn func(dbTx) error) error
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
	Dialect() dialect
}

type rowScanner interface{ Scan(dest ...any) error }

// scanOne reads a row of one column.
func scanOne[T any](scan func(...any) error) (v T, err error) {
	err = scan(&v)
	return v, err
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
	// oneServer: one server uses the database (SQLite), so its check-in
	// is the only row of servers.
	oneServer bool
}

var (
	sqliteDialect   = dialect{lockTable: func(string) string { return "" }, oneServer: true}
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

// queryRows reads every row of query, in a read of db, each by scanRow; no
// row is an empty slice.
func queryRows[T any](ctx context.Context, db sqlEngine, scanRow func(scan func(...any) error) (T, error), query string, args ...any) (out []T, err error) {
	err = db.view(ctx, func(tx dbTx) error {
		out, err = txRows(ctx, tx, scanRow, query, args...)
		return err
	})
	return out, err
}

// txRows is queryRows in tx.
func txRows[T any](ctx context.Context, tx dbTx, scanRow func(scan func(...any) error) (T, error), query string, args ...any) ([]T, error) {
	out := []T{}
	rows, err := tx.Query(ctx, query, args...)
	err = each(rows, err, func(scan func(...any) error) error {
		row, err := scanRow(scan)
		out = append(out, row)
		return err
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

// keyColumns are the columns scanKey reads, in its order.
const keyColumns = `id, hash, name, plan, rpm, rpd, env, scopes, created_at, revoked_at, expires_at, coalesce(budget_id, id), rolled_to, last_used_at, external_id`

// scanKey reads one key row of keyColumns.
func scanKey(scan func(...any) error) (domain.Key, error) {
	var k domain.Key
	var created int64
	var scopes string
	var revoked, expires, rolledTo, lastUsed sql.NullInt64
	var externalID sql.NullString
	if err := scan(&k.ID, &k.Hash, &k.Name, &k.Plan, &k.PerMinute, &k.PerDay, &k.Env, &scopes, &created, &revoked,
		&expires, &k.BudgetID, &rolledTo, &lastUsed, &externalID); err != nil {
		return domain.Key{}, err
	}
	k.ExternalID = externalID.String
	k.Scopes = domain.StoredScopes(scopes, domain.AllScopes)
	k.CreatedAt = time.Unix(created, 0).UTC()
	k.RevokedAt = unixOrZero(revoked)
	k.ExpiresAt = unixOrZero(expires)
	k.RolledTo = rolledTo.Int64
	k.LastUsedAt = unixOrZero(lastUsed)
	return k, nil
}

// unixOrZero and milliOrZero are a time in Unix seconds or milliseconds,
// or the zero time for NULL.
func unixOrZero(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(n.Int64, 0).UTC()
}

func milliOrZero(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.UnixMilli(n.Int64).UTC()
}

// nullUnix is t in Unix seconds, or NULL for the zero time.
func nullUnix(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.Unix()
}

// nullText is s, or NULL for "".
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullID is id, or NULL for 0.
func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// auditColumns are the columns of an event as AuditRow gives them and
// scanAuditEvent reads them (after id), in their order.
const auditColumns = `at, action, actor, key_id, new_key_id, address, env, details`

// AuditRow is e's values for auditColumns: times in Unix milliseconds, the
// details as a JSON object.
func AuditRow(e domain.AuditEvent) ([]any, error) {
	details, err := json.Marshal(e.Details)
	if err != nil {
		return nil, err
	}
	return []any{e.At.UnixMilli(), e.Action, e.Actor, nullID(e.KeyID), nullID(e.NewKeyID), nullText(e.Address), e.Env, string(details)}, nil
}

// scanAuditEvent reads one row of id and auditColumns.
func scanAuditEvent(scan func(...any) error) (domain.AuditEvent, error) {
	var e domain.AuditEvent
	var at int64
	var keyID, newKeyID sql.NullInt64
	var address sql.NullString
	var details string
	if err := scan(&e.ID, &at, &e.Action, &e.Actor, &keyID, &newKeyID, &address, &e.Env, &details); err != nil {
		return domain.AuditEvent{}, err
	}
	e.At = time.UnixMilli(at).UTC()
	e.KeyID, e.NewKeyID, e.Address = keyID.Int64, newKeyID.Int64, address.String
	if err := json.Unmarshal([]byte(details), &e.Details); err != nil {
		return domain.AuditEvent{}, fmt.Errorf("audit event %d: details: %w", e.ID, err)
	}
	return e, nil
}

// auditQuery is the query of the events f picks, oldest first, and its
// arguments.
func auditQuery(f domain.AuditFilter) (string, []any) {
	var where []string
	var args []any
	if !f.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, f.Since.UnixMilli())
	}
	if f.Env != "" {
		// A key's event by the key's environment; an address's ban (and
		// its lift) in every one; any other event by its own env.
		where = append(where, `((key_id IS NOT NULL AND key_id IN (SELECT id FROM api_keys WHERE env = ?))
			OR (key_id IS NULL AND (address IS NOT NULL OR env = ?)))`)
		args = append(args, f.Env, f.Env)
	}
	if f.KeyID != 0 {
		where, args = append(where, "(key_id = ? OR new_key_id = ?)"), append(args, f.KeyID, f.KeyID)
	}
	if f.Action != "" {
		where, args = append(where, "action = ?"), append(args, f.Action)
	}
	after, order := ">", ` ORDER BY at, id`
	if f.Newest {
		after, order = "<", ` ORDER BY at DESC, id DESC`
	}
	if f.After != 0 {
		// The page after event After, in the order asked for.
		where, args = append(where, "(at, id) "+after+" (SELECT at, id FROM audit_events WHERE id = ?)"), append(args, f.After)
	}
	query := `SELECT id, ` + auditColumns + ` FROM audit_events`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += order
	if f.Limit > 0 {
		query, args = query+` LIMIT ?`, append(args, f.Limit)
	}
	return query, args
}
