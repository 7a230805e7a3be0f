package replicate

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"petstore/internal/domain"

	"github.com/benbjohnson/litestream"
	"github.com/superfly/ltx"
)

// Config is what --replicate-to, --replicate-interval and
// --replicate-retention say.
type Config struct {
	Target    Target
	Interval  time.Duration // how often the WAL is read and uploaded
	Retention time.Duration // how far back a restore can go
	// LocalLimit bounds what waits on this machine to be uploaded; past
	// it, the waiting files are dropped and a fresh snapshot follows.
	LocalLimit int64
	Logger     *slog.Logger
	Now        func() time.Time
}

// DefaultLocalLimit is Config.LocalLimit's default.
const DefaultLocalLimit = 1 << 30

// checkpointPages is how many pages the WAL holds before Litestream
// checkpoints it (its default is 1,000). Litestream holds every writer
// back while its checkpoint copies the WAL into the database file and
// syncs it (docs/design.md), so a smaller WAL makes a shorter wait for
// the creates that arrive meanwhile.
const checkpointPages = 256

// shutdownSync bounds the last upload when the server stops.
const shutdownSync = 5 * time.Second

// Replicator streams one SQLite database's changes to its replica.
type Replicator struct {
	cfg    Config
	path   string
	client *countingClient
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	store     *litestream.Store
	db        *litestream.DB
	caughtUp  time.Time // every write made before it is in the replica (note)
	localSize int64     // bytes waiting on this machine, at the last look
	warned    bool      // the failure is logged, its end is not yet
	lastRetry time.Time // the watch's last try of a failing upload
	// uploaded is the last transaction seen uploaded: Litestream forgets
	// its replica's position after a failure, until it reads it again.
	uploaded uint64
	// snapshotAfter is the transaction the replica held when what waited
	// was dropped: the snapshot that follows comes after it.
	snapshotAfter uint64
	looks         []look // the looks whose transaction the replica lacks
	// walSeen is the WAL as it was when the last look had Litestream
	// read it to its end (readWAL): a WAL changed since holds commits
	// Litestream may not have read.
	walSeen walState
}

// Start begins replicating the database at path (which exists, its schema
// made) to cfg.Target, in the background, until Close.
func Start(ctx context.Context, cfg Config, path string) (*Replicator, error) {
	client, err := newClient(cfg.Target, cfg.Now)
	if err != nil {
		return nil, fmt.Errorf("--replicate-to %s: %v", cfg.Target.Shown(), err)
	}
	r := &Replicator{cfg: cfg, path: path, client: client, done: make(chan struct{}), caughtUp: cfg.Now()}
	if err := r.open(ctx); err != nil {
		return nil, err
	}
	watchCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.watch(watchCtx)
	go syncWAL(watchCtx, path+"-wal")
	return r, nil
}

// open starts Litestream on the database: its monitor reads the WAL into
// local LTX files every Interval and its replica uploads them.
func (r *Replicator) open(ctx context.Context) error {
	db := litestream.NewDB(r.path)
	db.MonitorInterval = r.cfg.Interval
	db.MinCheckpointPageN = checkpointPages
	db.Replica = litestream.NewReplicaWithClient(db, r.client)
	db.Replica.SyncInterval = r.cfg.Interval
	levels := litestream.CompactionLevels{}
	for _, l := range litestream.DefaultCompactionLevels {
		levels = append(levels, &litestream.CompactionLevel{Level: l.Level, Interval: l.Interval})
	}
	st := litestream.NewStore([]*litestream.DB{db}, levels)
	st.SnapshotRetention = r.cfg.Retention
	st.SnapshotInterval = min(litestream.DefaultSnapshotInterval, r.cfg.Retention)
	st.Logger = demoted(r.cfg.Logger)
	db.SetLogger(st.Logger.With("db", filepath.Base(r.path)))
	db.ShutdownSyncTimeout = shutdownSync
	if err := st.Open(ctx); err != nil {
		return fmt.Errorf("start replicating to %s: %v", r.cfg.Target.Shown(), err)
	}
	r.mu.Lock()
	r.store, r.db = st, db
	r.mu.Unlock()
	return nil
}

// Close stops replicating after a last upload of what the WAL holds (for
// at most shutdownSync).
func (r *Replicator) Close() error {
	r.cancel()
	<-r.done
	r.mu.Lock()
	st := r.store
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*shutdownSync)
	defer cancel()
	return st.Close(ctx)
}

// watch looks at the replica every Interval: it logs a WARN when uploads
// start failing (once) and an INFO when the replica has caught up, and it
// keeps what waits on this machine within LocalLimit.
func (r *Replicator) watch(ctx context.Context) {
	defer close(r.done)
	tick := time.NewTicker(max(r.cfg.Interval, 100*time.Millisecond))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r.look(ctx)
		if i%10 == 0 {
			r.bound(ctx)
		}
		r.retry(ctx)
	}
}

// look notes how far the replica is behind, and logs the start and the
// end of a failure. It first has Litestream read the WAL to its end:
// Litestream's own position lags the WAL by up to an interval, and the
// replica holding that position would claim commits it has not read.
func (r *Replicator) look(ctx context.Context) {
	r.readWAL(ctx)
	s := r.Status()
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.cfg.Now()
	upToDate := r.note(now, s)
	stalled := !upToDate && now.Sub(r.caughtUp) > stallAfter(r.cfg.Interval)
	switch {
	case !r.warned && (s.Failing || stalled):
		r.warned = true
		r.cfg.Logger.Warn("replication is failing: the server goes on serving and retries with backoff; the replica holds the database as it was at behind_since",
			"replica", r.cfg.Target.Shown(), "err", s.LastError, "behind_since", r.caughtUp.UTC().Format(time.RFC3339))
	case r.warned && !s.Failing && upToDate:
		r.warned = false
		r.cfg.Logger.Info("replication caught up: the replica holds every transaction again", "replica", r.cfg.Target.Shown(), "txid", s.LocalTXID)
	}
}

// readWAL has Litestream read every commit in the WAL into its local
// files (the same Sync its monitor makes each interval) and notes the
// WAL as it was before: each commit in it is then in Litestream's
// position.
func (r *Replicator) readWAL(ctx context.Context) {
	r.mu.Lock()
	db := r.db
	r.mu.Unlock()
	before := walStateOf(db.WALPath())
	ctx, cancel := context.WithTimeout(ctx, max(r.cfg.Interval, time.Second))
	defer cancel()
	if err := db.Sync(ctx); err != nil {
		r.cfg.Logger.Debug("replication: read the WAL", "replica", r.cfg.Target.Shown(), "err", err)
		before = walState{}
	}
	r.mu.Lock()
	r.walSeen = before
	r.mu.Unlock()
}

// walState is the WAL file's size and last change: a commit changes them
// (a WAL started over is written from its start, and its time changes).
type walState struct {
	size int64
	mod  time.Time
}

func walStateOf(path string) walState {
	fi, err := os.Stat(path)
	if err != nil {
		return walState{}
	}
	return walState{fi.Size(), fi.ModTime()}
}

// maxLooks bounds the looks kept while the replica is behind.
const maxLooks = 4096

// note keeps, at each look, the last local transaction, and moves
// caughtUp to the last look whose transaction the replica now holds:
// every write made before it is in the replica. Under steady writes the
// replica is always a transaction or two behind, but never far. It tells
// whether the replica holds all. After a drop, what the replica must hold
// is the snapshot that follows (a transaction past snapshotAfter).
func (r *Replicator) note(now time.Time, s Status) (upToDate bool) {
	want := s.LocalTXID
	if r.snapshotAfter > 0 {
		want = max(want, r.snapshotAfter+1)
		if s.ReplicaTXID > r.snapshotAfter {
			r.snapshotAfter = 0
		}
	}
	if len(r.looks) == maxLooks {
		r.looks = r.looks[1:]
	}
	r.looks = append(r.looks, look{now, want})
	i := 0
	for ; i < len(r.looks) && r.looks[i].txid <= s.ReplicaTXID; i++ {
		r.caughtUp = r.looks[i].at
	}
	r.looks = r.looks[i:]
	return len(r.looks) == 0
}

// look is the last local transaction at a moment.
type look struct {
	at   time.Time
	txid uint64
}

// retryEvery caps the wait between two tries of a failing upload:
// Litestream's own backoff doubles up to 5 minutes, so a store back after
// a minute away would wait minutes more for it.
const retryEvery = 10 * time.Second

// retry uploads what waits, if uploads are failing and the last try is
// retryEvery old.
func (r *Replicator) retry(ctx context.Context) {
	r.mu.Lock()
	db := r.db
	due := r.warned && r.cfg.Now().Sub(r.lastRetry) >= retryEvery
	if due {
		r.lastRetry = r.cfg.Now()
	}
	r.mu.Unlock()
	if !due {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, retryEvery)
	defer cancel()
	if err := db.Replica.Sync(ctx); err != nil {
		r.cfg.Logger.Debug("replication: retry the upload", "replica", r.cfg.Target.Shown(), "err", err)
	}
}

// walSyncEvery is how often the WAL's new pages are written to disk
// ahead of Litestream's checkpoint (syncWAL).
const walSyncEvery = 100 * time.Millisecond

// syncWAL writes the WAL's new pages to disk every walSyncEvery until ctx
// ends. SQLite syncs the WAL at the start of a checkpoint, and Litestream
// checkpoints while holding every writer back: a second of creates' pages
// waiting to be written made that wait tens of milliseconds, and the
// creates' p99 with it. Synced here, outside any lock, they leave little
// for the checkpoint to write (docs/design.md).
func syncWAL(ctx context.Context, path string) {
	domain.Every(ctx, walSyncEvery, func() {
		if f, err := os.Open(path); err == nil {
			_ = f.Sync() // best effort: SQLite syncs what matters itself
			f.Close()
		}
	})
}

// stallAfter is how long the replica may stay behind, with no failure
// returned, before the server says replication is failing (a store that
// takes the connection and never answers).
func stallAfter(interval time.Duration) time.Duration {
	return max(30*time.Second, 10*interval)
}

// bound drops what waits on this machine past LocalLimit: Litestream
// keeps every transaction it has not uploaded, with no cap of its own.
// It stops, forgets its local files and starts again; once the replica
// answers, its first upload is a snapshot of the whole database. What
// happened between the replica's last transaction and that snapshot
// cannot be restored to a point in time (docs/production.md).
func (r *Replicator) bound(ctx context.Context) {
	r.mu.Lock()
	db, st := r.db, r.store
	r.mu.Unlock()
	r.mu.Lock()
	uploaded := r.uploaded
	r.mu.Unlock()
	size := waitingSize(db.LTXLevelDir(0), uploaded)
	r.mu.Lock()
	r.localSize = size
	r.mu.Unlock()
	if size <= r.cfg.LocalLimit {
		return
	}
	r.cfg.Logger.Warn("replication: what waits to be uploaded is past the bound; dropping it, and a snapshot of the whole database follows once the replica answers: point-in-time restore has a gap from gap_from until then",
		"replica", r.cfg.Target.Shown(), "waiting_bytes", size, "bound_bytes", r.cfg.LocalLimit, "gap_from", r.caughtUp.UTC().Format(time.RFC3339))
	closeCtx, cancel := context.WithTimeout(ctx, 2*shutdownSync)
	err := st.Close(closeCtx)
	cancel()
	if err != nil {
		r.cfg.Logger.Debug("replication: stop before dropping the waiting files", "err", err)
	}
	if err := os.RemoveAll(db.MetaPath()); err != nil {
		r.cfg.Logger.Error("replication: drop the waiting files", "err", err)
	}
	if err := r.open(ctx); err != nil && ctx.Err() == nil {
		r.cfg.Logger.Error("replication: start again after dropping the waiting files", "err", err)
	}
	r.mu.Lock()
	// The dropped transactions are forgotten: what the replica must now
	// hold is the snapshot, and the INFO follows once it does.
	r.warned, r.localSize, r.snapshotAfter, r.looks = true, 0, uploaded, nil
	r.mu.Unlock()
}

// waitingSize is the size of the local LTX files of dir (level 0) not yet
// uploaded: those past transaction uploaded. Litestream keeps the others
// for a while after their upload (its L0 retention).
func waitingSize(dir string, uploaded uint64) int64 {
	entries, _ := os.ReadDir(dir)
	var n int64
	for _, e := range entries {
		_, maxTXID, err := ltx.ParseFilename(e.Name())
		if err != nil || uint64(maxTXID) <= uploaded {
			continue
		}
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// Status is where the replica is.
type Status struct {
	URL         string    // the replica's URL as it may be shown
	LocalTXID   uint64    // the last transaction read from the WAL
	ReplicaTXID uint64    // the last one uploaded
	LastUpload  time.Time // zero before the first
	Behind      time.Duration
	Bytes       int64 // uploaded by this server
	Errors      int64 // failed calls to the replica's store
	LastError   string
	LastErrorAt time.Time
	Failing     bool
	Waiting     int64 // bytes waiting on this machine to be uploaded
}

// Status reads where the replica is. Behind is zero only when the replica
// holds every commit the WAL held at the last look and the WAL has not
// changed since; otherwise it counts from the last look whose commits the
// replica holds (caughtUp).
func (r *Replicator) Status() Status {
	r.mu.Lock()
	db, caughtUp, waiting, behind := r.db, r.caughtUp, r.localSize, len(r.looks) > 0
	behind = behind || walStateOf(db.WALPath()) != r.walSeen
	r.mu.Unlock()
	s := Status{URL: r.cfg.Target.Shown(), Waiting: waiting}
	if pos, err := db.Pos(); err == nil {
		s.LocalTXID = uint64(pos.TXID)
	}
	r.mu.Lock()
	r.uploaded = max(r.uploaded, uint64(db.Replica.Pos().TXID))
	s.ReplicaTXID = r.uploaded
	r.mu.Unlock()
	if behind || s.ReplicaTXID < s.LocalTXID {
		s.Behind = r.cfg.Now().Sub(caughtUp)
	}
	c := r.client
	c.mu.Lock()
	s.Bytes, s.Errors, s.LastUpload, s.LastError, s.LastErrorAt, s.Failing = c.bytes, c.errors, c.lastUpload, c.lastErr, c.lastErrAt, c.failing
	c.mu.Unlock()
	return s
}
