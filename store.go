package main

import (
	"context"
	"log/slog"
	"time"

	"petstore/internal/domain"
)

// storage is where the service keeps pets, API keys, daily usage, the
// audit trail and idempotency records: a SQLite file (sqliteStore,
// store_sqlite.go) or a PostgreSQL database shared by several servers
// (pgStore, store_postgres.go). It is one small interface per aggregate;
// each part of the server takes only the ones it uses, and the SQL stays
// behind them. Their errors say what went wrong in the domain's terms (a
// domainError): a pet or key not found, an Idempotency-Key taken, or the
// database unavailable right now and why, which a caller may retry.
type storage interface {
	domain.PetStore
	domain.IdempotencyStore
	domain.KeyStore
	domain.UsageStore
	domain.UsageHistoryStore
	domain.AuditStore
	domain.AdminTokenStore
	domain.WebhookStorage // webhook_store.go
	domain.BanStore
	lifecycle
}

// lifecycle is the engine as a whole: what it is, its background work,
// its snapshot for petstore copy, its health and its end.
type lifecycle interface {
	// Shared tells whether other servers write to this database too
	// (PostgreSQL): a copy of its pets in memory is then only a prefix of
	// the table, and a read past its end must go to the database.
	Shared() bool
	// Namespace tells this database apart from others whose servers share
	// one Redis: "" for a SQLite file, which one server alone serves; on
	// PostgreSQL a name for its database and schema.
	Namespace() string
	// Maintain runs the engine's own background work until ctx ends,
	// logging what fails: on PostgreSQL it follows the pets other servers
	// store (PetsAdded); on SQLite it checkpoints the WAL into the
	// database file. Work that waits on the database ends within timeout
	// (--db-timeout).
	Maintain(ctx context.Context, timeout time.Duration, logger *slog.Logger)
	// Snapshot reads everything the store holds, as it is at this moment,
	// for petstore copy. The caller closes it.
	Snapshot(ctx context.Context) (snapshot, error)
	Ping(ctx context.Context) error
	Close() error
}

// snapshot is what a store held at one moment, table by table (copyTables
// names them and their columns, the same in both engines).
type snapshot interface {
	// Rows streams the rows of table, their values in the order of columns.
	Rows(ctx context.Context, table string, columns []string) (rowStream, error)
	// Count is how many rows table holds.
	Count(ctx context.Context, table string) (int64, error)
	// LastID is the highest id table ever gave, even one whose row is gone
	// (ids are never given twice); 0 when it gave none.
	LastID(ctx context.Context, table string) (int64, error)
	Close() error
}

// copyTarget is a database petstore copy fills: an empty PostgreSQL one
// (openCopyTarget).
type copyTarget interface {
	// CopyFrom moves everything src holds in, and adds copiedEvent (the
	// copy's keys.copied, given its counts), as one change.
	CopyFrom(ctx context.Context, src snapshot, copiedEvent domain.AuditEvent) (domain.Copied, error)
	Close() error
}

// rowStream is the rows of one table of a snapshot: Values after each Next
// that is true, then Err. It is what pgx's CopyFrom reads.
type rowStream interface {
	Next() bool
	Values() ([]any, error)
	Err() error
	Close()
}

// openStorage opens the database --db names: a PostgreSQL URL or a SQLite
// file (created when create is set).
func openStorage(ctx context.Context, db string, create bool, now func() time.Time) (storage, error) {
	if isPostgresURL(db) {
		return openPostgres(ctx, db, now)
	}
	return openSQLite(ctx, db, create, now)
}
