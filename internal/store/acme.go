package store

import (
	"petstore/internal/domain"

	"context"
	"crypto/rand"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// certmagic's storage in PostgreSQL (docs/production.md, "A fleet on
// PostgreSQL"): the ACME account, the certificates with their keys and the
// challenges in progress live in acme_storage, so that every server on the
// database serves the same certificate and answers a challenge that another
// one started. A lock is a row of acme_locks that expires unless its holder
// extends it: a server that dies mid-order frees it within a minute,
// and an order that takes minutes holds no connection or transaction.

// pgACMEStorage is certmagic.Storage over a Postgres's pool.
type pgACMEStorage struct {
	pool *pgxpool.Pool
	// ttl is how long a lock row holds without being extended (its holder
	// extends it every third of that); poll how often a server waiting
	// for a lock tries again.
	ttl, poll time.Duration
	mu        sync.Mutex
	held      map[string]heldLock // the locks this server holds, by name
}

type heldLock struct {
	owner string
	stop  context.CancelFunc
}

// ACMEStorage is this database as certmagic's storage.
func (s *Postgres) ACMEStorage() certmagic.Storage {
	return &pgACMEStorage{pool: s.pool, ttl: time.Minute, poll: time.Second, held: map[string]heldLock{}}
}

// ACMEStorer is a store that keeps certmagic's files in its database,
// shared by every server on it.
type ACMEStorer interface {
	ACMEStorage() certmagic.Storage
}

// dbNowMillis is the database's clock in Unix milliseconds: every server
// compares a lock's expiry against the same clock.
const dbNowMillis = `(extract(epoch FROM clock_timestamp()) * 1000)::bigint`

func (p *pgACMEStorage) Store(ctx context.Context, key string, value []byte) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO acme_storage (key, value, modified) VALUES ($1, $2, `+dbNowMillis+`)
		ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, modified = EXCLUDED.modified`, key, value)
	return err
}

func (p *pgACMEStorage) Load(ctx context.Context, key string) ([]byte, error) {
	var value []byte
	err := p.pool.QueryRow(ctx, `SELECT value FROM acme_storage WHERE key = $1`, key).Scan(&value)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fs.ErrNotExist
	}
	return value, err
}

// Delete removes key and, when it is a directory, every key under it.
func (p *pgACMEStorage) Delete(ctx context.Context, key string) error {
	_, err := p.pool.Exec(ctx, `DELETE FROM acme_storage WHERE key = $1 OR starts_with(key, $1 || '/')`, key)
	return err
}

func (p *pgACMEStorage) Exists(ctx context.Context, key string) bool {
	var exists bool
	err := p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM acme_storage WHERE key = $1 OR starts_with(key, $1 || '/'))`, key).Scan(&exists)
	return err == nil && exists
}

// List is the keys under dir: all of them when recursive, else its
// immediate entries (a deeper key stands for the directory it is in).
func (p *pgACMEStorage) List(ctx context.Context, dir string, recursive bool) ([]string, error) {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	rows, err := p.pool.Query(ctx, `SELECT key FROM acme_storage WHERE starts_with(key, $1) ORDER BY key`, prefix)
	if err != nil {
		return nil, err
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fs.ErrNotExist
	}
	if recursive {
		return keys, nil
	}
	var entries []string
	for _, k := range keys {
		entry, _, _ := strings.Cut(strings.TrimPrefix(k, prefix), "/")
		if e := prefix + entry; !slices.Contains(entries, e) {
			entries = append(entries, e)
		}
	}
	return entries, nil
}

func (p *pgACMEStorage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	var modified, size int64
	err := p.pool.QueryRow(ctx, `SELECT modified, length(value) FROM acme_storage WHERE key = $1`, key).Scan(&modified, &size)
	switch {
	case err == nil:
		return certmagic.KeyInfo{Key: key, Modified: time.UnixMilli(modified), Size: size, IsTerminal: true}, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return certmagic.KeyInfo{}, err
	case p.Exists(ctx, key):
		return certmagic.KeyInfo{Key: key, IsTerminal: false}, nil
	}
	return certmagic.KeyInfo{}, fs.ErrNotExist
}

// Lock takes the lock name, waiting while another holder's row has not
// expired, and extends it until Unlock.
func (p *pgACMEStorage) Lock(ctx context.Context, name string) error {
	owner := rand.Text()
	for {
		tag, err := p.pool.Exec(ctx, `INSERT INTO acme_locks (name, owner, expires) VALUES ($1, $2, `+dbNowMillis+` + $3)
			ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires = EXCLUDED.expires
			WHERE acme_locks.expires < `+dbNowMillis, name, owner, p.ttl.Milliseconds())
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(p.poll):
		}
	}
	keep, stop := context.WithCancel(context.Background())
	p.mu.Lock()
	p.held[name] = heldLock{owner: owner, stop: stop}
	p.mu.Unlock()
	go domain.Every(keep, p.ttl/3, func() { p.extend(keep, name, owner) })
	return nil
}

// extend pushes the expiry of a lock this server holds.
func (p *pgACMEStorage) extend(ctx context.Context, name, owner string) {
	p.pool.Exec(ctx, `UPDATE acme_locks SET expires = `+dbNowMillis+` + $3 WHERE name = $1 AND owner = $2`,
		name, owner, p.ttl.Milliseconds())
}

// RenewLockLease extends a lock certmagic holds through a long order.
func (p *pgACMEStorage) RenewLockLease(ctx context.Context, name string, _ time.Duration) error {
	p.mu.Lock()
	h, ok := p.held[name]
	p.mu.Unlock()
	if !ok {
		return errors.New("lock " + name + " is not held here")
	}
	p.extend(ctx, name, h.owner)
	return nil
}

// Unlock frees the lock name, if this server still holds it.
func (p *pgACMEStorage) Unlock(ctx context.Context, name string) error {
	p.mu.Lock()
	h, ok := p.held[name]
	delete(p.held, name)
	p.mu.Unlock()
	if !ok {
		return errors.New("lock " + name + " is not held here")
	}
	h.stop()
	_, err := p.pool.Exec(ctx, `DELETE FROM acme_locks WHERE name = $1 AND owner = $2`, name, h.owner)
	return err
}
