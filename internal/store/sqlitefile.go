// The SQLite file watched: a database file deleted (its directory removed)
// or replaced (another file renamed over it) while the server runs is
// still open, and SQLite would go on writing into the unlinked file, or
// beside the new one into WAL and SHM files that are no longer its own,
// answering 201 for pets that no restart will see
// (docs/production.md, "Operations").

package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"petstore/internal/domain"

	"modernc.org/sqlite"
)

// fileCheckEvery is how often the server looks at its database file's
// path, besides each health probe and each /readyz (Lost).
const fileCheckEvery = time.Second

// dbFile is the database file as it was opened: its path, device and
// inode. Once the path names no file, or another one, the file is lost
// for good (the open one can never be found again by a next start): every
// write answers unavailable, without touching the file. A write reads one
// atomic flag; the look at the path (a stat) is made in the background and
// by the health probe.
//
// Nor does the server open a new connection to a lost file: database/sql
// opens one by path whenever its pool wants one (a reader dropped after an
// interrupted query, a pool not yet full), and that one would find the
// file renamed over the path and beside it the lost file's WAL and SHM,
// and SQLite would copy the lost file's pages into it (a checkpoint when
// that connection closes). Every connection is opened through the file
// (open), which looks at the path first.
type dbFile struct {
	path     string
	dev, ino uint64
	known    atomic.Bool // dev and ino are noted (opened); till then the file is being made
	lost     atomic.Bool
	logged   atomic.Bool
	// lostErr is what writes answer once lost, made once: the hot path
	// allocates nothing.
	lostErr error
}

var errFileLost = errors.New("the database file was deleted or replaced while open: nothing more is written to it")

// open is a pool of connections to the file, each opened only while the
// path still names the file (connect).
func (f *dbFile) open(dsn string) (*sql.DB, error) {
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(fileConnector{c, f}), nil
}

// opened notes the device and inode of the file at the path, just opened
// (and made, if it was new).
func (f *dbFile) opened() error {
	dev, ino, err := fileIdentity(f.path)
	if err != nil {
		return err
	}
	f.dev, f.ino = dev, ino
	f.known.Store(true)
	return nil
}

// fileConnector opens a connection only while the file is not lost. A
// file replaced between the look and the open (microseconds, against the
// watch's second) is seen by the look after it: the connection is closed
// unused, and the file is lost from then on.
type fileConnector struct {
	driver.Connector
	file *dbFile
}

func (c fileConnector) Connect(ctx context.Context) (driver.Conn, error) {
	if err := c.file.check(); err != nil {
		return nil, err
	}
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.file.check(); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// fileIdentity is the device and inode of the file at path.
func fileIdentity(path string) (dev, ino uint64, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fmt.Errorf("%s: the system gives no device and inode", path)
	}
	return uint64(st.Dev), uint64(st.Ino), nil
}

// writable is nil while the file is the one opened; the hot path's check.
func (f *dbFile) writable() error {
	if f.lost.Load() {
		return f.lostErr
	}
	return nil
}

// check looks at the path: gone (no file, or no directory) or another
// file, and the file is lost. A look that fails otherwise (a directory
// this user may no longer search) proves nothing, and changes nothing.
func (f *dbFile) check() error {
	if f.lost.Load() {
		return f.lostErr
	}
	if !f.known.Load() {
		return nil
	}
	dev, ino, err := fileIdentity(f.path)
	switch {
	case err == nil && (dev != f.dev || ino != f.ino),
		errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		f.lost.Store(true)
		return f.lostErr
	}
	return nil
}

// watch checks the file every fileCheckEvery until ctx ends, and logs its
// loss once.
func (f *dbFile) watch(ctx context.Context, logger *slog.Logger) {
	domain.Every(ctx, fileCheckEvery, func() {
		if f.check() != nil && f.logged.CompareAndSwap(false, true) {
			logger.Error("the database file was deleted or replaced while the server ran: every write is refused (503) from now on, "+
				"and /readyz fails; restart the server on its file (restored from a backup, if deleted)", "path", f.path)
		}
	})
}
