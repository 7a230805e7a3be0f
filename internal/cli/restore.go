// restore: the database a replica holds, written to a file
// (docs/production.md, "Backup and restore").

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"petstore/internal/replicate"
	"petstore/internal/store"
)

// Restore writes the database the replica --from holds (as of --at, or
// its latest state) to --db. It writes to stderr only, its help too.
func Restore(ctx context.Context, args []string, getenv func(string) string, _, stderr io.Writer) error {
	c := newCommand("restore", getenv, stderr).withDB()
	var from, at string
	var force bool
	c.fs.StringVar(&from, "from", "", "the replica, s3://BUCKET/PATH[?endpoint=URL] or file:///PATH, as serve's --replicate-to names it (required)")
	c.fs.StringVar(&at, "at", "", "restore the database as it was at this time, RFC 3339 (default: its latest state)")
	c.fs.BoolVar(&force, "force", false, "replace --db when it exists (stop the server first)")
	if err := c.parse(args); err != nil {
		return err
	}
	if from == "" {
		return Usagef("restore needs --from URL, the replica serve's --replicate-to wrote")
	}
	if err := c.db.Check(); err != nil {
		return err
	}
	if store.IsPostgresURL(c.db.DB) {
		return Usagef("restore writes a SQLite file; a PostgreSQL database is restored by its own means (see docs/production.md, \"Backup and restore\")")
	}
	target, err := replicate.ParseTarget(from)
	if err != nil {
		return Usagef("--from %v", err)
	}
	var when time.Time
	if at != "" {
		if when, err = time.Parse(time.RFC3339, at); err != nil {
			return Usagef("--at %q must be a time in RFC 3339, such as 2026-01-02T15:04:05Z", at)
		}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	got, err := replicate.Restore(ctx, target, c.db.DB, when, force, logger)
	if errors.Is(err, replicate.ErrEmpty) {
		return fmt.Errorf("the replica at %s is empty: there is nothing to restore", target.Shown())
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "restored %s from %s: transaction %d, last written %s\n", c.db.DB, target.Shown(), got.TXID, got.LastWrite.UTC().Format(time.RFC3339Nano))
	return nil
}
