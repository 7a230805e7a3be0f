package main

// Continuous replication of the SQLite file off the machine
// (docs/production.md, "Backup and restore"): serve's --replicate-* flags,
// the restore before a server starts on a missing file, and what the
// server shows of the replica.

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"time"

	"petstore/internal/cli"
	"petstore/internal/replicate"
	"petstore/internal/server"
	"petstore/internal/store"
)

// replicateConfig holds serve's --replicate-* flags.
type replicateConfig struct {
	to        string
	interval  time.Duration
	retention time.Duration
	target    replicate.Target // to, checked
}

func (c *replicateConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.to, "replicate-to", "", "stream the SQLite database's changes to this replica while serving, s3://BUCKET/PATH[?endpoint=URL] or file:///PATH; "+
		"a missing --db file is restored from it first. Credentials come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION), never the URL")
	fs.DurationVar(&c.interval, "replicate-interval", time.Second, "how often the database's changes are read and uploaded to the replica: at most this much (and one upload) is lost with the disk")
	fs.DurationVar(&c.retention, "replicate-retention", 72*time.Hour, "how far back the replica keeps the database's history: how far back restore --at can go")
}

// check refuses, as usage mistakes, a replica URL the server cannot use
// and --replicate-to with a PostgreSQL --db.
func (c *replicateConfig) check(db string) error {
	if c.to == "" {
		return nil
	}
	if store.IsPostgresURL(db) {
		return cli.Usagef("--replicate-to replicates a SQLite file; a PostgreSQL --db is backed up by its own means (see docs/production.md, \"Backup and restore\")")
	}
	t, err := replicate.ParseTarget(c.to)
	if err != nil {
		return cli.Usagef("--replicate-to %v", err)
	}
	// Below these, Litestream would read the WAL without pause, or take
	// a snapshot of the whole database every few minutes.
	if c.interval < 100*time.Millisecond || c.retention < time.Hour {
		return cli.Usagef("--replicate-interval must be 100ms or more and --replicate-retention 1h or more")
	}
	c.target = t
	return nil
}

// restoreOnStart restores the database file from the replica when the file
// is missing: the disk was lost, or this is a new machine. An empty replica
// is a fresh start; one that cannot be read ends the start, lest an empty
// database be replicated over the replica that exists.
func restoreOnStart(ctx context.Context, c replicateConfig, db string, logger *slog.Logger) error {
	if c.to == "" {
		return nil
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	got, err := replicate.Restore(ctx, c.target, db, time.Time{}, false, logger)
	switch {
	case errors.Is(err, replicate.ErrEmpty):
		logger.Info("the replica is empty: starting a fresh database", "replica", c.target.Shown(), "db", db)
		return nil
	case err != nil:
		return err
	}
	logger.Info("restored the database from the replica", "replica", c.target.Shown(), "db", db,
		"txid", got.TXID, "last_write", got.LastWrite.UTC().Format(time.RFC3339Nano))
	return nil
}

// replication is what the server needs of the flags, once checked.
func (c replicateConfig) replication() server.Replication {
	if c.to == "" {
		return server.Replication{}
	}
	return server.Replication{Target: c.target, Interval: c.interval, Retention: c.retention}
}
