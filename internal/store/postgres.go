package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"runtime"
	"slices"
	"sync"
	"time"

	"petstore/internal/batch"
	"petstore/internal/domain"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres keeps what SQLite keeps in a PostgreSQL database, which
// several servers share. It holds no state of its own beyond the pool: every
// answer comes from the database, so a server sees another's writes at once.
type Postgres struct {
	sqlAggregates
	pool *pgxpool.Pool
	now  func() time.Time
	// lockSpace names this database and schema: it is the second half of
	// its advisory lock keys (the first is one of the lock* constants), so
	// that two stores in one database, in different schemas, do not wait on
	// each other, and it keeps their keys in one Redis apart.
	lockSpace int32
	// notice is the payload of this store's notices of new pets, so that
	// its own listener can tell them apart: they are in its copy already.
	notice string
	// notices sends them once pets are stored; the batches stored while
	// one is on its way, or within noticeGap of it, share the next.
	notices batch.Batcher[struct{}]
	// added tells the reader of PetsAdded that other servers may have
	// stored pets.
	added chan struct{}
}

// Advisory lock classes (the first key of the two-key lock functions).
const (
	lockMigrate int32 = 0x7065_7401 // "pet" 1: while migrating the schema
	lockPets    int32 = 0x7065_7402 // "pet" 2: around each insert of pets, so ids commit in order
)

// Pool defaults, for a URL that does not set pool_max_conns or
// connect_timeout itself.
const (
	pgConnectTimeout = 5 * time.Second
	pgMinMaxConns    = 8
)

// OpenPostgres connects to the database at rawURL and brings its schema up
// to date. Several servers may start at once: the migration runs under an
// advisory lock.
func OpenPostgres(ctx context.Context, rawURL string, now func() time.Time) (*Postgres, error) {
	return openPostgres(ctx, rawURL, now, MigrateOptions{})
}

// openPostgres is OpenPostgres migrating as opts allow.
func openPostgres(ctx context.Context, rawURL string, now func() time.Time, opts MigrateOptions) (*Postgres, error) {
	shown := RedactURL(rawURL)
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%s is %w: %s", shown, ErrBadURL, OneLine(RedactPassword(err.Error(), rawURL)))
	}
	var q url.Values
	if u, err := url.Parse(rawURL); err == nil {
		q = u.Query()
	}
	if !q.Has("connect_timeout") {
		cfg.ConnConfig.ConnectTimeout = pgConnectTimeout
	}
	if !q.Has("pool_max_conns") {
		cfg.MaxConns = int32(max(pgMinMaxConns, 2*runtime.GOMAXPROCS(0)))
	}
	cfg.ConnConfig.Tracer = poolTracer{}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %s", shown, OneLine(RedactPassword(err.Error(), rawURL)))
	}
	s := &Postgres{pool: pool, now: now, notice: rand.Text(), added: make(chan struct{}, 1)}
	s.sqlAggregates = newSQLAggregates(s)
	s.notices = batch.Batcher[struct{}]{Max: math.MaxInt, Run: s.sendNotice}
	if err := s.setUp(ctx, opts); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database %s: %s", shown, OneLine(RedactPassword(err.Error(), rawURL)))
	}
	return s, nil
}

func (s *Postgres) setUp(ctx context.Context, opts MigrateOptions) error {
	if err := s.checkSchemaUsage(ctx); err != nil {
		return err
	}
	if err := s.pool.QueryRow(ctx, `SELECT hashtext(current_database() || '.' || current_schema())`).Scan(&s.lockSpace); err != nil {
		return err
	}
	if err := s.migrate(ctx, opts); err != nil {
		// Refused the schema's version: name every grant missing, rather
		// than the first refusal met.
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == pgInsufficientPrivilege {
			if missing := s.checkGrants(ctx); missing != nil && !errors.As(missing, &pgErr) {
				return missing
			}
		}
		return err
	}
	return s.checkGrants(ctx)
}

func (s *Postgres) Close() error {
	s.pool.Close()
	return nil
}

func (s *Postgres) Ping(ctx context.Context) error {
	return s.pgError(s.pool.Ping(ctx))
}

func (s *Postgres) update(ctx context.Context, fn func(dbTx) error) error {
	return s.pgError(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return fn(pgTx{tx}) }))
}

func (s *Postgres) view(ctx context.Context, fn func(dbTx) error) error {
	return s.retry(func() error { return fn(pgTx{s.pool}) })
}

func (s *Postgres) clock() time.Time { return s.now() }

// retry runs fn again, once, when it failed before anything reached the
// server: a pooled connection that a database restart left dead.
func (s *Postgres) retry(fn func() error) error {
	return s.pgError(retrySafe(fn))
}

// retrySafe is retry without turning the error into an Error.
func retrySafe(fn func() error) error {
	err := fn()
	if err != nil && pgconn.SafeToRetry(err) {
		err = fn()
	}
	return err
}

// CreatePets stores the batch in one transaction under a transaction-scoped
// advisory lock, so that ids commit in the order they are given: a reader
// that sees a pet sees every pet with a smaller id that will ever exist, and
// keyset pagination never skips one that commits late. The lock, the insert
// and the idempotency records go in one pipeline: one round trip. The other
// servers are told once it is committed (sendNotice).
func (s *Postgres) CreatePets(ctx context.Context, batch []domain.PetInsert) error {
	n := len(batch)
	a := petArraysOf(batch)
	now := s.now()
	var ids, taken []int64
	err := retrySafe(func() error {
		ids, taken = ids[:0], taken[:0]
		b := &pgx.Batch{}
		b.Queue(`SELECT pg_advisory_xact_lock($1, $2)`, lockPets, s.lockSpace)
		// The ids are taken from the sequence in one step, and the pet at
		// position ord of the batch gets the ord-th of them.
		b.Queue(`WITH last AS (SELECT setval('pets_id_seq', nextval('pets_id_seq') + $4 - 1) AS id)
			INSERT INTO pets (id, name, category_id, status)
			SELECT last.id - $4 + t.ord, t.name, t.category_id, t.status
			FROM last, unnest($1::text[], $2::bigint[], $3::text[]) WITH ORDINALITY AS t(name, category_id, status, ord)
			RETURNING id`, a.names, a.categories, a.statuses, n).Query(func(rows pgx.Rows) error {
			var err error
			ids, err = pgx.AppendRows(ids, rows, pgx.RowTo[int64])
			return err
		})
		if a.idemKeyIDs != nil {
			// A live record of another request holds the key: its pet is
			// taken back, and that create answered as in flight.
			b.Queue(`WITH wanted AS (
				SELECT key_id, idem_key, request_hash, currval('pets_id_seq') - $4 + ord AS pet_id
				FROM unnest($1::bigint[], $2::text[], $3::bytea[]) WITH ORDINALITY AS t(key_id, idem_key, request_hash, ord)
				WHERE key_id IS NOT NULL
			), kept AS (
				INSERT INTO idempotency (key_id, idem_key, request_hash, pet_id, created_at)
				SELECT key_id, idem_key, request_hash, pet_id, $5 FROM wanted
				ON CONFLICT (key_id, idem_key) DO UPDATE SET request_hash = excluded.request_hash,
					pet_id = excluded.pet_id, created_at = excluded.created_at
				WHERE idempotency.created_at < $6
				RETURNING pet_id
			)
			DELETE FROM pets WHERE id IN (SELECT pet_id FROM wanted EXCEPT SELECT pet_id FROM kept) RETURNING id`,
				a.idemKeyIDs, a.idemKeys, a.idemHashes, n, now.Unix(), now.Add(-domain.IdempotencyTTL).Unix()).Query(func(rows pgx.Rows) error {
				var err error
				taken, err = pgx.AppendRows(taken, rows, pgx.RowTo[int64])
				return err
			})
		}
		// Sent without BEGIN, the pipeline is one implicit transaction:
		// all of it commits, or none.
		return s.pool.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return s.createError(err)
	}
	if len(ids) != n {
		return fmt.Errorf("stored %d pets of a batch of %d", len(ids), n)
	}
	s.stored(ctx, batch, ids, taken)
	return nil
}

// stored tells the other servers of a committed batch, and gives each pet
// of it its id, in the batch's order, or ErrIdempotencyTaken when another
// request's Idempotency-Key took it back.
func (s *Postgres) stored(ctx context.Context, batch []domain.PetInsert, ids, taken []int64) {
	go func() {
		// The notice outlives the create that asked for it, but not
		// without bound when the database stalls.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), noticeTimeout)
		defer cancel()
		s.notices.Do(ctx, struct{}{})
	}()
	slices.Sort(ids)
	for i := range batch {
		batch[i].Pet.ID = ids[i]
		if slices.Contains(taken, ids[i]) {
			batch[i].Err = domain.ErrIdempotencyTaken
		}
	}
}

// createError is pgError for a batch of creates, which also tells when the
// batch may have committed all the same: it was sent, and the connection
// failed or the deadline passed before PostgreSQL answered. A batch never
// sent (no connection was had, or a dead one failed before anything reached
// the server) or that PostgreSQL answered with an error is not stored.
func (s *Postgres) createError(err error) error {
	failed := s.pgError(err)
	var pgErr *pgconn.PgError
	var connectErr *pgconn.ConnectError
	unsent := pgconn.SafeToRetry(err) || errors.As(err, &pgErr) || errors.As(err, &connectErr) ||
		(errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err))
	if failure := domain.DBFailureOf(failed); failure != 0 && !unsent {
		return domain.OutcomeUnknown(failure, err)
	}
	return failed
}

// petArrays are a batch's columns, as the arrays CreatePets unnests. The
// idempotency records' are nil when no create of the batch has one, and
// NULL for a create without one; a status is NULL when the client gave
// none.
type petArrays struct {
	names      []string
	categories []int64
	statuses   []*string
	idemKeyIDs []*int64
	idemKeys   []*string
	idemHashes [][]byte
}

func petArraysOf(batch []domain.PetInsert) petArrays {
	n := len(batch)
	a := petArrays{names: make([]string, n), categories: make([]int64, n), statuses: make([]*string, n)}
	for i := range batch {
		p := &batch[i].Pet
		a.names[i], a.categories[i] = p.Name, p.CategoryID
		if p.Status != "" {
			a.statuses[i] = &p.Status
		}
		if rec := batch[i].Idem; rec != nil {
			if a.idemKeyIDs == nil {
				a.idemKeyIDs, a.idemKeys, a.idemHashes = make([]*int64, n), make([]*string, n), make([][]byte, n)
			}
			a.idemKeyIDs[i], a.idemKeys[i], a.idemHashes[i] = &rec.KeyID, &rec.Key, rec.RequestHash
		}
	}
	return a
}

const petColumns = `id, name, category_id, status`

func (s *Postgres) GetPet(ctx context.Context, id int64) (domain.Pet, error) {
	var p domain.Pet
	var status *string
	err := s.retry(func() error {
		return s.pool.QueryRow(ctx, `SELECT `+petColumns+` FROM pets WHERE id = $1`, id).Scan(&p.ID, &p.Name, &p.CategoryID, &status)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.Pet{}, domain.NotFound("no pet has id %d", id)
	}
	if err != nil {
		return domain.Pet{}, err
	}
	if status != nil {
		p.Status = *status
	}
	return p, nil
}

func (s *Postgres) ListPets(ctx context.Context, status string, after int64, limit int) ([]domain.Pet, error) {
	pets := make([]domain.Pet, 0, limit)
	_, err := s.scanPets(ctx, status, after, limit, func(id int64, name []byte, categoryID int64, st []byte) {
		pets = append(pets, domain.Pet{ID: id, Name: string(name), CategoryID: categoryID, Status: string(st)})
	})
	return pets, err
}

func (s *Postgres) ScanPets(ctx context.Context, after int64, limit int, fn func(id int64, name []byte, categoryID int64, status []byte)) (int, error) {
	return s.scanPets(ctx, "", after, limit, fn)
}

func (s *Postgres) scanPets(ctx context.Context, status string, after int64, limit int, fn func(id int64, name []byte, categoryID int64, status []byte)) (int, error) {
	query, args := `SELECT `+petColumns+` FROM pets WHERE id > $1 ORDER BY id LIMIT $2`, []any{after, limit}
	if status != "" {
		query, args = `SELECT `+petColumns+` FROM pets WHERE status = $3 AND id > $1 ORDER BY id LIMIT $2`, append(args, status)
	}
	n := 0
	err := s.retry(func() error {
		n = 0
		rows, err := s.pool.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		var id, categoryID int64
		var name, st []byte
		_, err = pgx.ForEachRow(rows, []any{&id, &name, &categoryID, &st}, func() error {
			fn(id, name, categoryID, st)
			n++
			return nil
		})
		return err
	})
	return n, err
}

func (s *Postgres) IdempotencyRecord(ctx context.Context, keyID int64, key string, since time.Time) (rec domain.IdempotencyRecord, ok bool, err error) {
	var created int64
	err = s.retry(func() error {
		return s.pool.QueryRow(ctx,
			`SELECT request_hash, pet_id, created_at FROM idempotency WHERE key_id = $1 AND idem_key = $2 AND created_at >= $3`,
			keyID, key, since.Unix()).Scan(&rec.RequestHash, &rec.PetID, &created)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, err
	}
	rec.KeyID, rec.Key, rec.CreatedAt = keyID, key, time.Unix(created, 0)
	return rec, true, nil
}

func (s *Postgres) PruneIdempotency(ctx context.Context, cutoff time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM idempotency WHERE created_at < $1`, cutoff.Unix())
	return tag.RowsAffected(), s.pgError(err)
}

func (s *Postgres) KeyByHash(ctx context.Context, hash []byte) (k domain.Key, ok bool, err error) {
	err = s.retry(func() error {
		k, err = scanKey(s.pool.QueryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE hash = $1`, hash).Scan)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.Key{}, false, nil
	}
	if err != nil {
		return domain.Key{}, false, err
	}
	return k, true, nil
}

func (s *Postgres) KeysVersion(ctx context.Context) (int64, error) {
	var v int64
	err := s.retry(func() error {
		return s.pool.QueryRow(ctx, `SELECT value FROM meta WHERE name = 'keys_version'`).Scan(&v)
	})
	return v, err
}

// SetLastUsed keeps the later use: another server may have seen one already.
func (s *Postgres) SetLastUsed(ctx context.Context, uses []domain.LastUse) error {
	ids := make([]int64, len(uses))
	minutes := make([]int64, len(uses))
	for i, u := range uses {
		ids[i], minutes[i] = u.KeyID, u.Minute.Unix()
	}
	return s.retry(func() error {
		_, err := s.pool.Exec(ctx, `UPDATE api_keys AS k SET last_used_at = greatest(coalesce(k.last_used_at, 0), t.minute)
			FROM unnest($1::bigint[], $2::bigint[]) AS t(id, minute) WHERE k.id = t.id`, ids, minutes)
		return err
	})
}

// AddUsage adds the counts to the stored totals, which other servers add
// to as well, in one transaction, each batch once (addUsage).
func (s *Postgres) AddUsage(ctx context.Context, counts []domain.UsageCount) error {
	return addUsage(ctx, s, counts, func(tx dbTx, run []domain.UsageCount) error {
		keyIDs := make([]int64, len(run))
		days := make([]string, len(run))
		ns := make([]int64, len(run))
		for i, c := range run {
			keyIDs[i], days[i], ns[i] = c.KeyID, c.Day, c.Count
		}
		// Summed first: one statement may not update a row twice.
		_, err := tx.Exec(ctx, `INSERT INTO usage (key_id, day, count)
			SELECT key_id, day, sum(count) FROM unnest(?::bigint[], ?::text[], ?::bigint[]) AS t(key_id, day, count) GROUP BY key_id, day
			ON CONFLICT (key_id, day) DO UPDATE SET count = usage.count + excluded.count`, keyIDs, days, ns)
		return err
	})
}

// pgError turns the failures that mean "the database cannot serve us right
// now" into an unavailable Error, which clients may retry, with its cause: a
// deadline that passed waiting for an answer (timeout) or for a connection
// of a pool whose every connection is taken (pool_exhausted); a connection
// refused or cut, a server shutting down or out of connections (refused).
// Errors the database answered otherwise are returned as they are (500).
func (s *Postgres) pgError(err error) error {
	if err == nil || errors.Is(err, pgx.ErrNoRows) || errors.Is(err, context.Canceled) {
		return err
	}
	var known *domain.Error
	if errors.As(err, &known) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", "53", "57": // connection exception, insufficient resources, operator intervention
			return domain.Unavailable(domain.DBRefused, err)
		}
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err) {
		// Not pgconn's: the deadline passed before a connection was had.
		if st := s.pool.Stat(); st.AcquiredConns() >= st.MaxConns() {
			return domain.Unavailable(domain.DBPoolExhausted, err)
		}
		return domain.Unavailable(domain.DBTimeout, err)
	}
	var netErr net.Error
	if pgconn.Timeout(err) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return domain.Unavailable(domain.DBTimeout, err)
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &netErr) || errors.As(err, &connectErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err) {
		return domain.Unavailable(domain.DBRefused, err)
	}
	return err
}

// The pets stored by other servers: notices after a commit, the poll and
// the LISTEN that tail them (docs/replicas.md).

// noticeGap is the least time between two notices of one store: each
// costs every other server a query (its tail), so a busy server sends at
// most a hundred a second, however many batches it stores.
const noticeGap = 10 * time.Millisecond

// noticeTimeout bounds a notice's wait for a connection and its answer.
const noticeTimeout = 5 * time.Second

// sendNotice tells the other servers that pets were stored: they tail
// their copies of the pets on it. It is not part of the insert's
// transaction, as a NOTIFY holds a lock of the whole PostgreSQL server
// from its commit until the commit is on disk: every transaction that
// notifies, in any database, waits for the one before it. Sent after the
// commit, on its own, it needs no flush to disk (a notice lost in a crash
// costs only freshness: the poll makes up for it), and no create waits for
// it or for another application's notices.
func (s *Postgres) sendNotice(ctx context.Context, _ []struct{}) error {
	_, err := s.pool.Exec(ctx, `SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)`, s.PetsChannel(), s.notice)
	time.Sleep(noticeGap)
	return err
}

// PetsChannel is the LISTEN/NOTIFY channel that tells of new pets in this
// schema.
func (s *Postgres) PetsChannel() string { return fmt.Sprintf("petstore_pets_%x", uint32(s.lockSpace)) }

func (s *Postgres) Shared() bool { return true }

// Namespace names the database and schema, as the advisory locks do.
func (s *Postgres) Namespace() string { return fmt.Sprintf("%x", uint32(s.lockSpace)) }

// Lost: a PostgreSQL database has no file of the server's to lose.
func (s *Postgres) Lost() error { return nil }

// petsPollEvery backs the notices of new pets, which a listening connection
// that broke has missed.
const petsPollEvery = time.Second

// Maintain follows the pets other servers store: PetsAdded receives on
// each of their notices and on a poll for the notices a broken connection
// missed. The listening connection's steps end within timeout.
func (s *Postgres) Maintain(ctx context.Context, timeout time.Duration, _ *slog.Logger) {
	var wg sync.WaitGroup
	wg.Go(func() { s.ListenPets(ctx, timeout, s.petsAdded) })
	wg.Go(func() { domain.Every(ctx, petsPollEvery, s.petsAdded) })
	wg.Wait()
}

func (s *Postgres) PetsAdded() <-chan struct{} { return s.added }

// petsAdded tells the reader of PetsAdded, unless a notice waits for it
// already.
func (s *Postgres) petsAdded() {
	select {
	case s.added <- struct{}{}:
	default:
	}
}

// ListenPets calls fn each time pets were stored, by any server, until ctx
// ends. It listens on a connection of its own, which it makes anew when it
// breaks; notices sent while it was down are missed, so a poll must back it.
// Connecting, LISTEN and the check of a quiet connection each end within
// timeout (--db-timeout), so a connection that stalled is found and made
// anew.
func (s *Postgres) ListenPets(ctx context.Context, timeout time.Duration, fn func()) {
	for ctx.Err() == nil {
		s.listen(ctx, timeout, fn)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// listenCheckEvery is how long the listening connection may stay quiet
// before it is asked whether it still answers.
const listenCheckEvery = 5 * time.Second

// listen is one connection of ListenPets, until it fails.
func (s *Postgres) listen(ctx context.Context, timeout time.Duration, fn func()) error {
	bounded, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(bounded, s.pool.Config().ConnConfig)
	if err != nil {
		return err
	}
	defer func() {
		closing, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		conn.Close(closing)
	}()
	if _, err := conn.Exec(bounded, "LISTEN "+pgx.Identifier{s.PetsChannel()}.Sanitize()); err != nil {
		return err
	}
	for {
		quiet, cancel := context.WithTimeout(ctx, listenCheckEvery)
		n, err := conn.WaitForNotification(quiet)
		cancel()
		switch {
		case err == nil:
			if n.Payload != s.notice { // this store's own pets are in its copy already
				fn()
			}
		case ctx.Err() == nil && pgconn.Timeout(err):
			// A quiet timeout leaves the connection usable.
			check, cancel := context.WithTimeout(ctx, timeout)
			err = conn.Ping(check)
			cancel()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
}
