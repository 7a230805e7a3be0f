package replicate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/benbjohnson/litestream/file"
	_ "github.com/benbjohnson/litestream/s3" // registers the s3 scheme
	"github.com/superfly/ltx"
)

// writeTimeout bounds one upload (a snapshot of a large database is the
// longest) and one deletion: Litestream's S3 client waits up to a day.
const writeTimeout = 10 * time.Minute

// newClient is the replica client of t, as Litestream reads its URL, with
// its calls counted.
func newClient(t Target, now func() time.Time) (*countingClient, error) {
	var inner litestream.ReplicaClient
	var err error
	if strings.HasPrefix(t.raw, "file:") {
		inner, err = file.NewReplicaClientFromURL("file", "", strings.TrimPrefix(t.raw, "file://"), nil, nil)
	} else {
		inner, err = litestream.NewReplicaClientFromURL(t.raw)
	}
	if err != nil {
		return nil, err
	}
	return &countingClient{ReplicaClient: inner, now: now}, nil
}

// Init is the client's, with a hint for the one setting its S3 client
// cannot take: it brings its own HTTP transport.
func (c *countingClient) Init(ctx context.Context) error {
	err := c.ReplicaClient.Init(ctx)
	if err != nil && strings.Contains(err.Error(), "RootCAs") {
		return fmt.Errorf("%v (AWS_CA_BUNDLE is not read for the replica: name the CA bundle in SSL_CERT_FILE instead)", err)
	}
	return err
}

// SetLogger gives the client its logger once. Litestream sets it on each
// start, and the replicator starts Litestream again over the same client
// after a drop (bound), while a call of the stopped one may still log.
func (c *countingClient) SetLogger(logger *slog.Logger) {
	c.loggerSet.Do(func() { c.ReplicaClient.SetLogger(logger) })
}

// countingClient is Litestream's replica client with what the server shows
// of it (Status): the bytes uploaded, when last, and the failures.
type countingClient struct {
	litestream.ReplicaClient
	now       func() time.Time
	loggerSet sync.Once

	mu          sync.Mutex
	bytes       int64
	errors      int64
	lastUpload  time.Time
	lastErr     string
	lastErrAt   time.Time
	failing     bool // the last call to the store failed
	failingFrom time.Time
}

// failingListTimeout bounds a listing while the store is failing.
// Litestream lists the replica's files under a lock that its WAL reader
// also takes (DB.MaxLTXFileInfo), and its S3 client tries a call eight
// times with backoff: a store that is away would stop the WAL from being
// read, and so from being checkpointed, for seconds at a time.
const failingListTimeout = time.Second

func (c *countingClient) LTXFiles(ctx context.Context, level int, seek ltx.TXID, useMetadata bool) (ltx.FileIterator, error) {
	cancel := context.CancelFunc(func() {})
	if c.isFailing() {
		ctx, cancel = context.WithTimeout(ctx, failingListTimeout)
	}
	itr, err := c.ReplicaClient.LTXFiles(ctx, level, seek, useMetadata)
	if err != nil {
		cancel()
		c.note(ctx, err, 0)
		return itr, err
	}
	return &countingIterator{FileIterator: itr, c: c, ctx: ctx, cancel: cancel}, nil
}

func (c *countingClient) isFailing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failing
}

// countingIterator notes the outcome of a listing, which S3 reads page
// by page as it is iterated: its failure comes with Err or Close.
type countingIterator struct {
	ltx.FileIterator
	c      *countingClient
	ctx    context.Context
	cancel context.CancelFunc // ends the listing's deadline, if any
	noted  bool
	read   bool
}

// Next reads the listing: a listing never read made no call to the store,
// and says nothing of it.
func (it *countingIterator) Next() bool {
	it.read = true
	return it.FileIterator.Next()
}

func (it *countingIterator) Err() error {
	err := it.FileIterator.Err()
	it.noteOnce(err)
	return err
}

func (it *countingIterator) Close() error {
	defer it.cancel()
	err := it.FileIterator.Close()
	if err == nil {
		err = it.FileIterator.Err()
	}
	it.noteOnce(err)
	return err
}

func (it *countingIterator) noteOnce(err error) {
	if !it.noted && (it.read || err != nil) {
		it.noted = true
		it.c.note(it.ctx, err, 0)
	}
}

func (c *countingClient) OpenLTXFile(ctx context.Context, level int, minTXID, maxTXID ltx.TXID, offset, size int64) (io.ReadCloser, error) {
	rc, err := c.ReplicaClient.OpenLTXFile(ctx, level, minTXID, maxTXID, offset, size)
	if errors.Is(err, os.ErrNotExist) {
		return rc, err // an answer, not a failure to reach the store
	}
	c.note(ctx, err, 0)
	return rc, err
}

func (c *countingClient) WriteLTXFile(ctx context.Context, level int, minTXID, maxTXID ltx.TXID, r io.Reader) (*ltx.FileInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	info, err := c.ReplicaClient.WriteLTXFile(ctx, level, minTXID, maxTXID, r)
	var n int64
	if err == nil && info != nil {
		n = info.Size
	}
	c.note(ctx, err, n)
	return info, err
}

func (c *countingClient) DeleteLTXFiles(ctx context.Context, a []*ltx.FileInfo) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	err := c.ReplicaClient.DeleteLTXFiles(ctx, a)
	if len(a) > 0 {
		c.note(ctx, err, 0)
	}
	return err
}

// note counts a call's outcome: an upload of n bytes, or a failure. A call
// cut short because the server is stopping is neither.
func (c *countingClient) note(ctx context.Context, err error, uploaded int64) {
	if err != nil && ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if err != nil {
		c.errors++
		c.lastErr, c.lastErrAt = err.Error(), now
		if !c.failing {
			c.failing, c.failingFrom = true, now
		}
		return
	}
	c.failing = false
	if uploaded > 0 {
		c.bytes += uploaded
		c.lastUpload = now
	}
}

// demoted is Litestream's own log: its lines are the server's at
// debug level, where --log-level debug shows them; what an operator needs
// (failing, caught up) the Replicator logs itself.
func demoted(logger *slog.Logger) *slog.Logger {
	return slog.New(demote{logger.Handler()})
}

type demote struct{ slog.Handler }

func (d demote) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.Handler.Enabled(ctx, slog.LevelDebug)
}

func (d demote) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return d.Handler.Handle(ctx, r)
}

func (d demote) WithAttrs(attrs []slog.Attr) slog.Handler { return demote{d.Handler.WithAttrs(attrs)} }
func (d demote) WithGroup(name string) slog.Handler       { return demote{d.Handler.WithGroup(name)} }
