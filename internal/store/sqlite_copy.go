package store

// The SQLite file as a whole: its backup, and its snapshot as the source
// of petstore copy (docs/production.md).

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"time"
)

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
	return scanInt64(p.tx.QueryRowContext(ctx, `SELECT count(*) FROM `+table))
}

// LastID reads sqlite_sequence, where AUTOINCREMENT keeps the last id it gave.
func (p sqliteSnapshot) LastID(ctx context.Context, table string) (int64, error) {
	return scanInt64(p.tx.QueryRowContext(ctx, `SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = ?), 0), coalesce((SELECT max(id) FROM `+table+`), 0))`, table))
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
