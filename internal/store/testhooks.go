package store

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The hooks below are for the tests of a running server, which must reach
// below the store's interfaces to break a database under it or to read
// what it wrote. Nothing else calls them.

// Writer is the SQLite store's one writing connection.
func (s *SQLite) Writer() *sql.DB { return s.write }

// Pool is the PostgreSQL store's pool of connections.
func (s *Postgres) Pool() *pgxpool.Pool { return s.pool }

// HoldPetsOrderLock takes the lock that orders the ids of pets, as a
// batch of another server would that stalls, until release is called.
func (s *Postgres) HoldPetsOrderLock(ctx context.Context) (release func() error, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, lockPets, s.lockSpace); err != nil {
		conn.Release()
		return nil, err
	}
	return func() error {
		defer conn.Release()
		_, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, lockPets, s.lockSpace)
		return err
	}, nil
}
