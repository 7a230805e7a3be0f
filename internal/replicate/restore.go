package replicate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/superfly/ltx"
)

// Restored is what a restore wrote: the replica's last transaction up to
// the time asked for, and when it was written.
type Restored struct {
	TXID      uint64
	LastWrite time.Time
}

// Restore writes the database the replica at t holds, as of at (its
// latest state when at is zero), to path, which must not exist unless
// overwrite is set: the file (and its WAL) is then replaced. A replica
// that holds nothing is ErrEmpty; one that cannot be read is an error
// naming it as Shown.
func Restore(ctx context.Context, t Target, path string, at time.Time, overwrite bool, logger *slog.Logger) (Restored, error) {
	client, err := newClient(t, time.Now)
	if err != nil {
		return Restored{}, fmt.Errorf("%s: %v", t.Shown(), err)
	}
	if err := client.Init(ctx); err != nil {
		return Restored{}, fmt.Errorf("read the replica at %s: %v", t.Shown(), err)
	}
	// A DB only for the replica's logger: Litestream's lines are the
	// server's at debug level.
	db := litestream.NewDB(path)
	db.SetLogger(demoted(logger))
	replica := litestream.NewReplicaWithClient(db, client)
	if !at.IsZero() {
		if err := checkAt(ctx, replica, t, at); err != nil {
			return Restored{}, err
		}
	}
	plan, err := litestream.CalcRestorePlan(ctx, client, 0, at, demoted(logger))
	switch {
	case errors.Is(err, litestream.ErrTxNotAvailable) && at.IsZero():
		return Restored{}, ErrEmpty
	case errors.Is(err, litestream.ErrTxNotAvailable):
		return Restored{}, fmt.Errorf("the replica at %s holds no state as old as %s", t.Shown(), at.Format(time.RFC3339))
	case err != nil:
		return Restored{}, fmt.Errorf("read the replica at %s: %v", t.Shown(), err)
	}
	last := plan[len(plan)-1]
	got := Restored{TXID: uint64(last.MaxTXID), LastWrite: last.CreatedAt}
	if hdr, err := litestream.FetchLTXHeader(ctx, client, last); err == nil && hdr.Timestamp > 0 {
		got.LastWrite = time.UnixMilli(hdr.Timestamp)
	}
	if err := restoreInto(ctx, replica, path, last, overwrite); err != nil {
		return Restored{}, fmt.Errorf("restore from %s: %v", t.Shown(), err)
	}
	return got, nil
}

// checkAt refuses a time the replica cannot restore: in the future, or
// before the oldest state it keeps (--replicate-retention).
func checkAt(ctx context.Context, replica *litestream.Replica, t Target, at time.Time) error {
	if at.After(time.Now()) {
		return fmt.Errorf("--at %s is in the future", at.Format(time.RFC3339))
	}
	oldest, _, err := replica.TimeBounds(ctx)
	if err != nil {
		return fmt.Errorf("read the replica at %s: %v", t.Shown(), err)
	}
	if oldest.IsZero() {
		return fmt.Errorf("the replica at %s is empty: there is nothing to restore", t.Shown())
	}
	if at.Before(oldest) {
		return fmt.Errorf("--at %s is before the oldest state the replica at %s keeps, %s (see --replicate-retention)",
			at.Format(time.RFC3339), t.Shown(), oldest.UTC().Format(time.RFC3339))
	}
	return nil
}

// restoreInto writes the replica's state up to last's transaction beside
// path, then moves it into place, with Litestream's local files of the
// database it replaces dropped: they describe another history.
func restoreInto(ctx context.Context, replica *litestream.Replica, path string, last *ltx.FileInfo, overwrite bool) error {
	if _, err := os.Stat(path); err == nil && !overwrite {
		return fmt.Errorf("%s exists: restore writes a new file; give --force to replace it", path)
	}
	tmp := path + ".restoring"
	for _, p := range []string{tmp, tmp + "-wal", tmp + "-shm"} {
		os.Remove(p)
	}
	opt := litestream.NewRestoreOptions()
	opt.OutputPath, opt.TXID, opt.IntegrityCheck = tmp, last.MaxTXID, litestream.IntegrityCheckQuick
	if err := replica.Restore(ctx, opt); err != nil {
		os.Remove(tmp)
		return err
	}
	for _, p := range []string{path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	dir, file := filepath.Split(path)
	if err := os.RemoveAll(filepath.Join(dir, "."+file+litestream.MetaDirSuffix)); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
