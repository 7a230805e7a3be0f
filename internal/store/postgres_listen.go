package store

// The pets stored by other servers: notices after a commit, the poll and
// the LISTEN that tail them (docs/replicas.md).

import (
	"petstore/internal/domain"

	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

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

// Shared: every server of a deployment writes to its PostgreSQL database.
func (s *Postgres) Shared() bool { return true }

// Namespace names the database and schema, as the advisory locks do.
func (s *Postgres) Namespace() string { return fmt.Sprintf("%x", uint32(s.lockSpace)) }

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
