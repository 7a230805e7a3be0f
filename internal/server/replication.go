package server

// Continuous replication of the SQLite file off the machine
// (docs/production.md, "Backup and restore"): serve's --replicate-* flags,
// the restore before a server starts on a missing file, and what the
// server shows of the replica.

import (
	"context"
	"time"

	"petstore/internal/adminapi"
	"petstore/internal/metrics"
	"petstore/internal/replicate"
)

// Replication is what --replicate-to, --replicate-interval and
// --replicate-retention say, checked (the root's replication.go): where
// the SQLite file's changes go, how often, and how far back the replica
// keeps them. Its zero value replicates nothing.
type Replication struct {
	Target    replicate.Target
	Interval  time.Duration
	Retention time.Duration
}

// StartReplication starts streaming the database's changes to the replica,
// when --replicate-to says so (c has a Target); stop ends it after a last upload.
func (a *App) StartReplication(ctx context.Context, c Replication, db string) (stop func(), _ error) {
	if c.Target.String() == "" {
		return func() {}, nil
	}
	r, err := replicate.Start(ctx, replicate.Config{
		Target: c.Target, Interval: c.Interval, Retention: c.Retention,
		LocalLimit: replicate.DefaultLocalLimit, Logger: a.logger, Now: a.now,
	}, db)
	if err != nil {
		return nil, err
	}
	a.replica = r
	started := a.now()
	a.metrics.CountReplication(func() metrics.Replication {
		s := r.Status()
		since := s.LastUpload
		if since.IsZero() {
			since = started
		}
		return metrics.Replication{SinceUpload: a.now().Sub(since).Seconds(), Behind: s.Behind.Seconds(),
			Bytes: s.Bytes, Errors: s.Errors, Waiting: s.Waiting}
	})
	a.logger.Info("replicating the database", "replica", c.Target.Shown(), "interval", c.Interval, "retention", c.Retention)
	return func() {
		if err := r.Close(); err != nil {
			a.logger.Warn("the last upload to the replica at shutdown", "replica", c.Target.Shown(), "err", err)
		}
	}, nil
}

// backupStatus is GET /admin/v1/backup's answer.
func (a *App) backupStatus() adminapi.BackupStatus {
	if a.replica == nil {
		return adminapi.BackupStatus{}
	}
	s := a.replica.Status()
	b := adminapi.BackupStatus{Replicating: true, URL: s.URL, LastError: s.LastError}
	behind := s.Behind.Seconds()
	b.BehindSeconds, b.UploadedBytes, b.Errors = &behind, &s.Bytes, &s.Errors
	if !s.LastUpload.IsZero() {
		t := s.LastUpload.UTC()
		b.LastUploadAt = &t
	}
	if !s.LastErrorAt.IsZero() {
		t := s.LastErrorAt.UTC()
		b.LastErrorAt = &t
	}
	return b
}
