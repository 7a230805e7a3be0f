package store

// The database as a whole, as petstore copy and backup see it
// (docs/production.md): a snapshot of either engine as the source of a
// copy, PostgreSQL as its target, and the backup of a SQLite file.

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"time"

	"petstore/internal/domain"

	"github.com/jackc/pgx/v5"
)

// copyTables are the tables copy moves, with their columns, in both schemas.
var copyTables = []struct {
	name    string
	columns []string
	count   func(*domain.Copied) *int64
}{
	{"pets", []string{"id", "name", "category_id", "status"}, func(c *domain.Copied) *int64 { return &c.Pets }},
	{"api_keys", []string{"id", "hash", "name", "plan", "rpm", "rpd", "env", "scopes", "created_at", "revoked_at",
		"expires_at", "budget_id", "rolled_to", "last_used_at", "external_id"}, func(c *domain.Copied) *int64 { return &c.Keys }},
	{"usage", []string{"key_id", "day", "count"}, func(c *domain.Copied) *int64 { return &c.Usage }},
	{"idempotency", []string{"key_id", "idem_key", "request_hash", "pet_id", "created_at"}, func(c *domain.Copied) *int64 { return &c.Idempotency }},
	{"audit_events", append([]string{"id"}, strings.Split(auditColumns, ", ")...), func(c *domain.Copied) *int64 { return &c.AuditEvents }},
	{"admin_tokens", []string{"id", "hash", "name", "scopes", "env", "created_at", "revoked_at"}, func(c *domain.Copied) *int64 { return &c.AdminTokens }},
	{"usage_history", []string{"budget_id", "day", "allowed", "rate_limited", "quota_exceeded", "banned", "forbidden"},
		func(c *domain.Copied) *int64 { return &c.UsageHistory }},
	{"webhook_endpoints", []string{"id", "url", "events", "enabled", "created_at", "secret", "previous_secret", "previous_until",
		"failing_since", "last_attempt_at", "last_status", "last_error", "env"}, func(c *domain.Copied) *int64 { return &c.WebhookEndpoints }},
	{"webhook_events", []string{"id", "type", "at", "body", "trace_context"}, func(c *domain.Copied) *int64 { return &c.WebhookEvents }},
	{"webhook_deliveries", []string{"event_id", "endpoint_id", "state", "attempts", "next_at", "claimed_until",
		"last_attempt_at", "last_status", "last_error"}, func(c *domain.Copied) *int64 { return &c.WebhookDeliveries }},
	{"webhook_notices", []string{"mark", "at", "forget_at"}, func(c *domain.Copied) *int64 { return &c.WebhookNotices }},
	{"bans", []string{"subject", "kind", "started_at", "ends_at", "lifted_at", "version"}, func(c *domain.Copied) *int64 { return &c.Bans }},
}

// OpenCopyTarget opens the PostgreSQL database at url for petstore copy.
func OpenCopyTarget(ctx context.Context, url string) (CopyTarget, error) {
	return OpenPostgres(ctx, url, time.Now)
}

// CopyFrom moves src into this database, which must be empty, in one
// transaction, and checks before it commits that each table holds as many
// rows as src's.
func (s *Postgres) CopyFrom(ctx context.Context, src Snapshot, copiedEvent domain.AuditEvent) (domain.Copied, error) {
	var n domain.Copied
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// No server may write while the copy runs.
		if _, err := tx.Exec(ctx, `LOCK TABLE pets, api_keys, usage, idempotency, audit_events, meta, admin_tokens, usage_history,
			webhook_endpoints, webhook_events, webhook_deliveries, webhook_notices, bans IN EXCLUSIVE MODE`); err != nil {
			return err
		}
		var there domain.Copied
		if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM pets), (SELECT count(*) FROM api_keys),
			(SELECT count(*) FROM usage), (SELECT count(*) FROM idempotency), (SELECT count(*) FROM audit_events),
			(SELECT count(*) FROM admin_tokens), (SELECT count(*) FROM usage_history), (SELECT count(*) FROM bans)`).Scan(
			&there.Pets, &there.Keys, &there.Usage, &there.Idempotency, &there.AuditEvents, &there.AdminTokens, &there.UsageHistory, &there.Bans); err != nil {
			return err
		}
		if there != (domain.Copied{}) {
			return fmt.Errorf("the target database is not empty (%d pets, %d keys, %d usage counts, %d idempotency records, %d audit events, %d admin tokens, %d days of usage history, %d bans): copy moves a SQLite database into an empty PostgreSQL database only",
				there.Pets, there.Keys, there.Usage, there.Idempotency, there.AuditEvents, there.AdminTokens, there.UsageHistory, there.Bans)
		}
		for _, table := range copyTables {
			moved, err := copyTable(ctx, tx, src, table.name, table.columns)
			if err != nil {
				return err
			}
			*table.count(&n) = moved
		}
		// Ids are never reused: each sequence goes on after the highest id
		// the source gave, even one whose row is gone.
		for _, table := range []string{"pets", "api_keys", "audit_events", "admin_tokens", "webhook_endpoints"} {
			last, err := src.LastID(ctx, table)
			if err != nil {
				return err
			}
			if last > 0 {
				if _, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence($1, 'id'), $2)`, table, last); err != nil {
					return err
				}
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE meta SET value = value + 1 WHERE name = 'keys_version'`); err != nil {
			return err
		}
		// The bans keep their versions: later writes go on after them.
		if _, err := tx.Exec(ctx, `UPDATE meta SET value = (SELECT coalesce(max(version), 0) FROM bans) WHERE name = 'bans_version'`); err != nil {
			return err
		}
		counts := n
		copiedEvent.At, copiedEvent.Details.Copied = domain.AuditTime(s.now()), &counts
		return recordActions(ctx, pgTx{tx}, copiedEvent)
	})
	return n, s.pgError(err)
}

// copyTable moves one table of src in with COPY and checks that as many
// rows arrived as src holds.
func copyTable(ctx context.Context, tx pgx.Tx, src Snapshot, table string, columns []string) (int64, error) {
	rows, err := src.Rows(ctx, table, columns)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", table, err)
	}
	moved, err := tx.CopyFrom(ctx, pgx.Identifier{table}, columns, rows)
	rows.Close()
	if err != nil {
		return 0, fmt.Errorf("copy %s: %w", table, err)
	}
	want, err := src.Count(ctx, table)
	if err != nil {
		return 0, err
	}
	got, err := scanOne[int64](tx.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan)
	if err != nil {
		return 0, err
	}
	if got != want || moved != want {
		return 0, fmt.Errorf("copy %s: %d rows in SQLite, %d copied, %d in PostgreSQL", table, want, moved, got)
	}
	return moved, nil
}

// Snapshot reads the database in one repeatable-read transaction.
func (s *Postgres) Snapshot(ctx context.Context) (Snapshot, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	// The transaction sees the database as of its first statement, not its
	// BEGIN.
	if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
		tx.Rollback(context.WithoutCancel(ctx))
		return nil, err
	}
	return pgSnapshot{tx}, nil
}

type pgSnapshot struct{ tx pgx.Tx }

func (p pgSnapshot) Rows(ctx context.Context, table string, columns []string) (RowStream, error) {
	return p.tx.Query(ctx, `SELECT `+strings.Join(columns, ", ")+` FROM `+table)
}

func (p pgSnapshot) Count(ctx context.Context, table string) (int64, error) {
	return scanOne[int64](p.tx.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan)
}

// LastID reads the id sequence as well as the ids: a sequence is outside
// transactions, so it may have moved since the snapshot began, never back.
func (p pgSnapshot) LastID(ctx context.Context, table string) (int64, error) {
	return scanOne[int64](p.tx.QueryRow(ctx, `SELECT greatest(coalesce(pg_sequence_last_value(pg_get_serial_sequence($1, 'id')::regclass), 0),
		coalesce((SELECT max(id) FROM `+table+`), 0))`, table).Scan)
}

func (p pgSnapshot) Close() error { return p.tx.Rollback(context.Background()) }

// BackupSQLite writes a consistent copy of the live database at path to
// out, which must not exist yet. It runs on the write connection (VACUUM
// INTO writes a file), which in the backup command's own process is
// otherwise idle; WAL lets it read a snapshot while a server keeps writing.
func BackupSQLite(ctx context.Context, path, out string) error {
	s, err := OpenSQLite(ctx, path, false, time.Now)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("backup: %s already exists", out)
	}
	if _, err := s.write.ExecContext(ctx, "VACUUM INTO ?", out); err != nil {
		return fmt.Errorf("backup to %s: %w", out, err)
	}
	return nil
}

// Snapshot reads the database in one read transaction, which WAL keeps
// as it was when the snapshot began while a server goes on writing.
func (s *SQLite) Snapshot(ctx context.Context) (Snapshot, error) {
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	// The transaction sees the database as of its first read, not its BEGIN.
	var tables int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&tables); err != nil {
		tx.Rollback()
		return nil, err
	}
	return sqliteSnapshot{tx}, nil
}

type sqliteSnapshot struct{ tx *sql.Tx }

func (p sqliteSnapshot) Rows(ctx context.Context, table string, columns []string) (RowStream, error) {
	rows, err := p.tx.QueryContext(ctx, `SELECT `+strings.Join(columns, ", ")+` FROM `+table)
	if err != nil {
		return nil, err
	}
	return &sqlRowStream{rows: rows, values: make([]any, len(columns))}, nil
}

func (p sqliteSnapshot) Count(ctx context.Context, table string) (int64, error) {
	return scanOne[int64](p.tx.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan)
}

// LastID reads sqlite_sequence, where AUTOINCREMENT keeps the last id it gave.
func (p sqliteSnapshot) LastID(ctx context.Context, table string) (int64, error) {
	return scanOne[int64](p.tx.QueryRowContext(ctx, `SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = ?), 0), coalesce((SELECT max(id) FROM `+table+`), 0))`, table).Scan)
}

func (p sqliteSnapshot) Close() error { return p.tx.Rollback() }

// sqlRowStream is database/sql rows as a RowStream.
type sqlRowStream struct {
	rows   *sql.Rows
	values []any
}

func (r *sqlRowStream) Next() bool { return r.rows.Next() }

func (r *sqlRowStream) Values() ([]any, error) {
	ptrs := make([]any, len(r.values))
	for i := range r.values {
		ptrs[i] = &r.values[i]
	}
	if err := r.rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	return r.values, nil
}

func (r *sqlRowStream) Err() error { return r.rows.Err() }

func (r *sqlRowStream) Close() { r.rows.Close() }
