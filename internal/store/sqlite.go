package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"petstore/internal/domain"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite keeps pets, API keys, daily usage and idempotency records in one
// SQLite file. SQLite has one writer at a time, so writes go through a pool
// of one connection and never wait on each other for the lock; reads use a
// pool of their own, which WAL lets run beside the writer.
type SQLite struct {
	sqlAggregates
	write *sql.DB
	read  *sql.DB
	now   func() time.Time

	// insertPets[k] inserts 1<<k pets in one statement.
	insertPets                     [insertPetsSizes]*sql.Stmt
	insertIdempotency              *sql.Stmt
	getPet, listPets, listByStatus *sql.Stmt
	keyByHash, keysVersion         *sql.Stmt

	commits atomic.Int64 // write transactions committed, for checkpointPolicy
	file    *dbFile      // the file opened, watched (sqlitefile.go): no write once it is lost
}

// insertPetsSizes: statements for 1, 2, 4 ... 256 pets. A batch of creates
// is stored with a few of them: a statement per pet costs more in
// database/sql and SQLite's AUTOINCREMENT bookkeeping than its row.
const insertPetsSizes = 9

// errNoDatabase: a command that must not create a database (keys list,
// backup) found no file.
var errNoDatabase = errors.New("no such database file")

// OpenSQLite opens (creating when create is set) the database at path and
// brings its schema up to date. A missing directory is an error, not made.
func OpenSQLite(ctx context.Context, path string, create bool, now func() time.Time) (*SQLite, error) {
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("open database %s: directory %s does not exist", path, dir)
	}
	if !create {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("open database %s: %w", path, errNoDatabase)
		}
	}
	// Pragmas go in the DSN so that every pooled connection gets them.
	// synchronous=NORMAL in WAL mode: a commit is in the WAL file (the OS's
	// page cache) before it returns, so it survives the process being killed;
	// only a power cut can lose the last few commits. See docs/production.md, "Operations".
	q := url.Values{"_pragma": {"busy_timeout(5000)", "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(ON)"}, "_txlock": {"immediate"}}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?"
	// The writer never checkpoints the WAL itself: a checkpoint in a
	// commit would stall every create waiting on that commit (see
	// Checkpoint). When the WAL starts over, a file grown past
	// walSizeLimit is cut back to it.
	file := &dbFile{path: path, lostErr: domain.Unavailable(domain.DBRefused, errFileLost)}
	write, err := file.open(dsn + q.Encode() +
		"&_pragma=wal_autocheckpoint(0)&_pragma=journal_size_limit(" + strconv.Itoa(walSizeLimit) + ")")
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetConnMaxIdleTime(0)
	// A reader never makes a file: one opened after the file was deleted
	// fails rather than reading a new, empty database.
	q.Add("_pragma", "query_only(1)")
	q.Add("mode", "rw")
	read, err := file.open(dsn + q.Encode())
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	readers := max(4, runtime.GOMAXPROCS(0))
	read.SetMaxOpenConns(readers)
	read.SetMaxIdleConns(readers)

	s := &SQLite{write: write, read: read, now: now, file: file}
	s.sqlAggregates = newSQLAggregates(s)
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := s.prepare(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := file.opened(); err != nil {
		s.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return s, nil
}

func (s *SQLite) prepare(ctx context.Context) error {
	for _, p := range []struct {
		db   *sql.DB
		stmt **sql.Stmt
		sql  string
	}{
		// An expired record not yet pruned is replaced; a live one stays.
		{s.write, &s.insertIdempotency, `INSERT INTO idempotency (key_id, idem_key, request_hash, pet_id, created_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (key_id, idem_key) DO UPDATE SET request_hash = excluded.request_hash, pet_id = excluded.pet_id, created_at = excluded.created_at
			WHERE idempotency.created_at < ?`},
		{s.read, &s.getPet, `SELECT id, name, category_id, status FROM pets WHERE id = ?`},
		{s.read, &s.listPets, `SELECT id, name, category_id, status FROM pets WHERE id > ? ORDER BY id LIMIT ?`},
		{s.read, &s.listByStatus, `SELECT id, name, category_id, status FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`},
		{s.read, &s.keyByHash, `SELECT ` + keyColumns + ` FROM api_keys WHERE hash = ?`},
		{s.read, &s.keysVersion, `SELECT value FROM meta WHERE name = 'keys_version'`},
	} {
		stmt, err := p.db.PrepareContext(ctx, p.sql)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		*p.stmt = stmt
	}
	for k := range s.insertPets {
		query := `INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?)` + strings.Repeat(`, (?, ?, ?)`, 1<<k-1)
		stmt, err := s.write.PrepareContext(ctx, query)
		if err != nil {
			return fmt.Errorf("prepare an insert of %d pets: %w", 1<<k, err)
		}
		s.insertPets[k] = stmt
	}
	return nil
}

// When to checkpoint. A checkpoint stalls creates for some milliseconds
// even when made beside them (see Checkpoint), so it waits for a pause in
// the writes: a look finds no commit since the one before. Under writes
// that never pause it comes once the WAL holds checkpointAfterCommits
// commits (3 to 6 pages of 4 KiB each: the pages a commit changed, so 100
// to 200 MiB; at the most creates one core stores, 7 or 8 seconds of them),
// and any write is checkpointed within checkpointAtLeastEvery. A WAL file
// grown past walSizeLimit is cut back to it when it starts over.
const (
	checkpointLookEvery    = 250 * time.Millisecond
	checkpointAfterCommits = 8192
	checkpointAtLeastEvery = time.Minute
	walSizeLimit           = 64 << 20
)

// checkpointPolicy decides, at each look, whether to checkpoint.
type checkpointPolicy struct {
	seen   int64     // commits counted at the last look
	done   int64     // commits counted before the last checkpoint
	doneAt time.Time // when it was made
}

func (p *checkpointPolicy) due(now time.Time, commits int64) bool {
	paused := commits == p.seen
	p.seen = commits
	waiting := commits - p.done
	return waiting > 0 && (paused || waiting >= checkpointAfterCommits || now.Sub(p.doneAt) >= checkpointAtLeastEvery)
}

func (s *SQLite) Shared() bool { return false }

func (s *SQLite) Namespace() string { return "" }

// Maintain checkpoints the WAL into the database file when checkpointPolicy
// says it is time. A checkpoint waits for no lock, and what it copied
// stays copied, so it is not cut short by timeout. Beside it, it watches
// the file (dbFile).
func (s *SQLite) Maintain(ctx context.Context, _ time.Duration, logger *slog.Logger) {
	var watching sync.WaitGroup
	defer watching.Wait()
	watching.Go(func() { s.file.watch(ctx, logger) })
	policy := checkpointPolicy{doneAt: s.now()}
	domain.Every(ctx, checkpointLookEvery, func() {
		if err := s.checkpointIfDue(ctx, &policy, s.now()); err != nil && ctx.Err() == nil {
			logger.Warn("checkpoint the WAL into the database file", "err", err)
		}
	})
}

func (s *SQLite) PetsAdded() <-chan struct{} { return nil }

func (s *SQLite) Lost() error { return s.file.check() }

func (s *SQLite) checkpointIfDue(ctx context.Context, policy *checkpointPolicy, now time.Time) error {
	commits := s.commits.Load()
	if s.file.writable() != nil || !policy.due(now, commits) {
		return nil
	}
	copied, err := s.Checkpoint(ctx)
	if err == nil && copied.complete {
		policy.done, policy.doneAt = commits, now
	}
	return err
}

// Checkpoint copies the commits in the WAL into the database file, so that
// the next write starts the WAL over and it stays small. It copies in two
// steps, so that writes wait only for the second, short one: first on a
// reader, beside the writes (a passive checkpoint), then on the write
// connection, which no write can use meanwhile, the few commits made during
// the first. Only a WAL copied to its end is started over, and under a
// steady stream of creates a checkpoint beside them never reaches it.
//
// A reader of another process (a backup) can hold the copy back; the
// checkpoint is then not complete, and the WAL is not started over.
func (s *SQLite) Checkpoint(ctx context.Context) (checkpoint, error) {
	var c checkpoint
	for _, db := range []*sql.DB{s.read, s.write} {
		var busy, copied int
		err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &c.frames, &copied)
		if err != nil {
			return checkpoint{}, storeError(err)
		}
		c.complete = busy == 0 && copied == c.frames
	}
	return c, nil
}

// checkpoint is what a Checkpoint found: the frames (pages) the WAL held,
// and whether all are now in the database file.
type checkpoint struct {
	frames   int
	complete bool
}

// commit commits a write transaction and counts it.
func (s *SQLite) commit(tx *sql.Tx) error {
	if err := tx.Commit(); err != nil {
		return storeError(err)
	}
	s.commits.Add(1)
	return nil
}

// Close closes the database; the WAL is checkpointed when the last
// connection goes (into the file opened, even when it is lost: a WAL left
// beside a file renamed over it would be read as that file's).
func (s *SQLite) Close() error {
	for _, stmt := range append(s.insertPets[:], s.insertIdempotency, s.getPet, s.listPets, s.listByStatus, s.keyByHash, s.keysVersion) {
		if stmt != nil {
			stmt.Close()
		}
	}
	return errors.Join(s.read.Close(), s.write.Close())
}

// Ping tells whether the database takes writes: its file is still the one
// opened, and it takes the write lock, as a create does, and lets it go at
// once. Reads would answer while another process holds the lock and every
// create waits.
func (s *SQLite) Ping(ctx context.Context) error {
	if err := s.file.check(); err != nil {
		return err
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return storeError(err)
	}
	return storeError(tx.Rollback())
}

// CreatePets stores a batch of pets in one transaction: one commit, one
// write of each changed page, however many pets. A pet and its idempotency
// record are stored together or not at all.
func (s *SQLite) CreatePets(ctx context.Context, batch []domain.PetInsert) error {
	if err := s.file.writable(); err != nil {
		return err
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return storeError(err)
	}
	defer tx.Rollback()
	// Holding the write lock, a statement waits for no other: only BEGIN
	// and COMMIT (which watches BeginTx's context) need the deadline, and
	// each statement that watched it would start a goroutine to do so.
	ctx = context.WithoutCancel(ctx)
	insertIdempotency := tx.StmtContext(ctx, s.insertIdempotency)
	now := s.now()
	for i := 0; i < len(batch); {
		if batch[i].Idem == nil {
			// Pets without an Idempotency-Key, as many as one statement
			// of the sizes at hand takes.
			plain := 1
			for i+plain < len(batch) && batch[i+plain].Idem == nil {
				plain++
			}
			k := min(bits.Len(uint(plain))-1, insertPetsSizes-1)
			if err := s.insertPetRows(ctx, tx, k, batch[i:i+1<<k]); err != nil {
				return err
			}
			i += 1 << k
			continue
		}
		in := &batch[i]
		i++
		if err := s.insertPetRows(ctx, tx, 0, batch[i-1:i]); err != nil {
			return err
		}
		res, err := insertIdempotency.ExecContext(ctx,
			in.Idem.KeyID, in.Idem.Key, in.Idem.RequestHash, in.Pet.ID, now.Unix(), now.Add(-domain.IdempotencyTTL).Unix())
		if err != nil {
			return storeError(err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			// Another process holds this Idempotency-Key: take the pet back.
			if _, err := tx.ExecContext(ctx, `DELETE FROM pets WHERE id = ?`, in.Pet.ID); err != nil {
				return storeError(err)
			}
			in.Err = domain.ErrIdempotencyTaken
		}
	}
	return s.commit(tx)
}

// insertPetRows inserts the 1<<k pets of rows with insertPets[k] and sets
// their ids.
func (s *SQLite) insertPetRows(ctx context.Context, tx *sql.Tx, k int, rows []domain.PetInsert) error {
	args := make([]any, 0, 3*len(rows))
	for i := range rows {
		args = append(args, rows[i].Pet.Name, rows[i].Pet.CategoryID, nullText(rows[i].Pet.Status))
	}
	res, err := tx.StmtContext(ctx, s.insertPets[k]).ExecContext(ctx, args...)
	if err != nil {
		// After a failed statement SQLite may have rolled the whole
		// transaction back (a full disk, say): give up on the batch.
		return storeError(err)
	}
	last, err := res.LastInsertId()
	if err != nil {
		return err
	}
	// AUTOINCREMENT numbers the rows of one INSERT one after another, in
	// the order of its VALUES.
	for i := range rows {
		rows[i].Pet.ID = last - int64(len(rows)-1-i)
	}
	return nil
}

// IdempotencyRecord returns the record for an API key's Idempotency-Key made
// at or after since, or ok=false when there is none.
func (s *SQLite) IdempotencyRecord(ctx context.Context, keyID int64, key string, since time.Time) (rec domain.IdempotencyRecord, ok bool, err error) {
	var created int64
	err = s.read.QueryRowContext(ctx,
		`SELECT request_hash, pet_id, created_at FROM idempotency WHERE key_id = ? AND idem_key = ? AND created_at >= ?`,
		keyID, key, since.Unix()).Scan(&rec.RequestHash, &rec.PetID, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, storeError(err)
	}
	rec.KeyID, rec.Key, rec.CreatedAt = keyID, key, time.Unix(created, 0)
	return rec, true, nil
}

func (s *SQLite) PruneIdempotency(ctx context.Context, cutoff time.Time) (int64, error) {
	if err := s.file.writable(); err != nil {
		return 0, err
	}
	res, err := s.write.ExecContext(ctx, `DELETE FROM idempotency WHERE created_at < ?`, cutoff.Unix())
	if err != nil {
		return 0, storeError(err)
	}
	s.commits.Add(1)
	return res.RowsAffected()
}

func (s *SQLite) GetPet(ctx context.Context, id int64) (domain.Pet, error) {
	var p domain.Pet
	var status sql.NullString
	err := s.getPet.QueryRowContext(ctx, id).Scan(&p.ID, &p.Name, &p.CategoryID, &status)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Pet{}, domain.NotFound("no pet has id %d", id)
	}
	if err != nil {
		return domain.Pet{}, storeError(err)
	}
	p.Status = status.String
	return p, nil
}

func (s *SQLite) ListPets(ctx context.Context, status string, after int64, limit int) ([]domain.Pet, error) {
	var rows *sql.Rows
	var err error
	if status == "" {
		rows, err = s.listPets.QueryContext(ctx, after, limit)
	} else {
		rows, err = s.listByStatus.QueryContext(ctx, status, after, limit)
	}
	if err != nil {
		return nil, storeError(err)
	}
	defer rows.Close()
	pets := make([]domain.Pet, 0, limit)
	for rows.Next() {
		var p domain.Pet
		var st sql.NullString
		if err := rows.Scan(&p.ID, &p.Name, &p.CategoryID, &st); err != nil {
			return nil, storeError(err)
		}
		p.Status = st.String
		pets = append(pets, p)
	}
	if err := rows.Err(); err != nil {
		return nil, storeError(err)
	}
	return pets, nil
}

// ScanPets hands fn bytes valid only during the call: loading a million
// pets this way makes no garbage.
func (s *SQLite) ScanPets(ctx context.Context, after int64, limit int, fn func(id int64, name []byte, categoryID int64, status []byte)) (int, error) {
	rows, err := s.listPets.QueryContext(ctx, after, limit)
	if err != nil {
		return 0, storeError(err)
	}
	defer rows.Close()
	n := 0
	var id, categoryID int64
	var name, status sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&id, &name, &categoryID, &status); err != nil {
			return n, storeError(err)
		}
		fn(id, name, categoryID, status)
		n++
	}
	return n, storeError(rows.Err())
}

// storeError turns the SQLite failures that mean "the disk is not there for
// us right now" into an unavailable Error, which clients may retry: a lock
// another process held past the deadline (or busy_timeout) is a timeout, a
// file that refuses the write is refused. Others are returned as they are
// and answered as 500.
func storeError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return domain.Unavailable(domain.DBTimeout, err)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return domain.Unavailable(domain.DBTimeout, err)
		case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM:
			return domain.Unavailable(domain.DBRefused, err)
		}
	}
	return err
}

func (s *SQLite) update(ctx context.Context, fn func(dbTx) error) error {
	if err := s.file.writable(); err != nil {
		return err
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return storeError(err)
	}
	defer tx.Rollback()
	if err := fn(sqliteTx{tx}); err != nil {
		return storeError(err)
	}
	return s.commit(tx)
}

// view reads through the read pool, beside the writer.
func (s *SQLite) view(ctx context.Context, fn func(dbTx) error) error {
	return storeError(fn(sqliteTx{s.read}))
}

func (s *SQLite) clock() time.Time { return s.now() }

func (s *SQLite) KeyByHash(ctx context.Context, hash []byte) (k domain.Key, ok bool, err error) {
	k, err = scanKey(s.keyByHash.QueryRowContext(ctx, hash).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Key{}, false, nil
	}
	if err != nil {
		return domain.Key{}, false, storeError(err)
	}
	return k, true, nil
}

func (s *SQLite) KeysVersion(ctx context.Context) (int64, error) {
	var v int64
	err := s.keysVersion.QueryRowContext(ctx).Scan(&v)
	return v, storeError(err)
}

func (s *SQLite) SetLastUsed(ctx context.Context, uses []domain.LastUse) error {
	return s.update(ctx, func(tx dbTx) error {
		for _, u := range uses {
			_, err := tx.Exec(ctx, `UPDATE api_keys SET last_used_at = max(coalesce(last_used_at, 0), ?) WHERE id = ?`, u.Minute.Unix(), u.KeyID)
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// AddUsage adds each count to the stored total of its key and day, in one
// transaction, each batch once (addUsage).
func (s *SQLite) AddUsage(ctx context.Context, counts []domain.UsageCount) error {
	return addUsage(ctx, s, counts, func(tx dbTx, run []domain.UsageCount) error {
		for _, c := range run {
			_, err := tx.Exec(ctx, `INSERT INTO usage (key_id, day, count) VALUES (?, ?, ?)
				ON CONFLICT (key_id, day) DO UPDATE SET count = count + excluded.count`, c.KeyID, c.Day, c.Count)
			if err != nil {
				return err
			}
		}
		return nil
	})
}
