package store

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"petstore/internal/domain"
)

// Storage is all the service keeps, on either engine (see the package
// doc), as one small interface per aggregate: each part of the server
// takes only the ones it uses, and the SQL stays behind them. Their errors
// say what went wrong in the domain's terms (a domain.Error): a pet or key
// not found, an Idempotency-Key taken, or the database unavailable right
// now and why, which a caller may retry.
type Storage interface {
	domain.PetStore
	domain.IdempotencyStore
	domain.KeyStore
	domain.UsageStore
	domain.UsageHistoryStore
	domain.AuditStore
	domain.AdminTokenStore
	domain.WebhookStorage // webhooks.go
	domain.BanStore
	domain.ServerStore // servers.go, migrations.go
	Lifecycle
}

// Lifecycle is the engine as a whole: what it is, its background work,
// its snapshot for petstore copy, its health and its end.
type Lifecycle interface {
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
	// database file and watches that file (Lost). Work that waits on the database ends within timeout
	// (--db-timeout).
	Maintain(ctx context.Context, timeout time.Duration, logger *slog.Logger)
	// Snapshot reads everything the store holds, as it is at this moment,
	// for petstore copy. The caller closes it.
	Snapshot(ctx context.Context) (Snapshot, error)
	// Lost tells, with a look at the path (a stat), whether the database
	// file was deleted or replaced since it was opened: then every write
	// is refused, for good. Always nil on PostgreSQL.
	Lost() error
	Ping(ctx context.Context) error
	Close() error
}

// Snapshot is what a store held at one moment, table by table (copyTables
// names them and their columns, the same in both engines).
type Snapshot interface {
	// Rows streams the rows of table, their values in the order of columns.
	Rows(ctx context.Context, table string, columns []string) (RowStream, error)
	// Count is how many rows table holds.
	Count(ctx context.Context, table string) (int64, error)
	// LastID is the highest id table ever gave, even one whose row is gone
	// (ids are never given twice); 0 when it gave none.
	LastID(ctx context.Context, table string) (int64, error)
	Close() error
}

// CopyTarget is a database petstore copy fills: an empty PostgreSQL one
// (OpenCopyTarget).
type CopyTarget interface {
	// CopyFrom moves everything src holds in, and adds copiedEvent (the
	// copy's keys.copied, given its counts), as one change.
	CopyFrom(ctx context.Context, src Snapshot, copiedEvent domain.AuditEvent) (domain.Copied, error)
	Close() error
}

// RowStream is the rows of one table of a snapshot: Values after each Next
// that is true, then Err. It is what pgx's CopyFrom reads.
type RowStream interface {
	Next() bool
	Values() ([]any, error)
	Err() error
	Close()
}

// Open opens the database --db names: a PostgreSQL URL or a SQLite
// file (created when create is set).
func Open(ctx context.Context, db string, create bool, now func() time.Time) (Storage, error) {
	if IsPostgresURL(db) {
		return OpenPostgres(ctx, db, now)
	}
	return OpenSQLite(ctx, db, create, now)
}

// Database URLs as they may be shown: which engine a --db names, and a
// URL or an error message without its password.

// ErrBadURL: a database URL the engine cannot read, a mistake on the
// command line rather than in the database. The command that took the URL
// says which flag gave it.
var ErrBadURL = errors.New("not a PostgreSQL URL this petstore can use")

// IsPostgresURL tells a PostgreSQL URL from a SQLite file path in --db.
func IsPostgresURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// OneLine is a message of pgx's, which puts each address it tried on a
// line of its own, as one line, each distinct part once.
func OneLine(msg string) string {
	var parts []string
	for _, part := range strings.Split(msg, "\n") {
		if part = strings.TrimSpace(part); part != "" && !slices.Contains(parts, part) {
			parts = append(parts, part)
		}
	}
	return strings.Join(parts, " ")
}

// RedactURL is rawURL as it may be shown: without its password.
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(an unparsable URL)"
	}
	return u.Redacted()
}

// RedactPassword removes rawURL's password from msg, should a library
// quote it.
func RedactPassword(msg, rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil {
		return msg
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
		msg = strings.ReplaceAll(msg, url.QueryEscape(pw), "xxxxx")
	}
	return msg
}
