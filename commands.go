// The commands that are neither serve nor a key command (backup, copy),
// and the preamble every command shares: flags read from the command line
// and then from the environment, --env and --db, and opening the database
// they name.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// command is the preamble of a command: its flag set, whose flags may also
// be given as PETSTORE_<FLAG> in the environment, and with withDB the
// --env and --db of the database it works on.
type command struct {
	fs     *flag.FlagSet
	db     dbFlags
	getenv func(string) string
	help   io.Writer // where -h prints the flags
}

func newCommand(name string, getenv func(string) string, help io.Writer) *command {
	return &command{fs: flag.NewFlagSet(name, flag.ContinueOnError), getenv: getenv, help: help}
}

// withDB gives the command --env and --db.
func (c *command) withDB() *command {
	c.db.register(c.fs)
	return c
}

// parse reads args and the environment into the flags, for a command that
// takes no arguments.
func (c *command) parse(args []string) error {
	rest, err := c.parseArgs(args)
	if err == nil && len(rest) > 0 {
		err = usagef("%s takes no arguments, got %q", c.fs.Name(), rest[0])
	}
	return err
}

// parseArgs is parse for a command that takes arguments: it returns them.
func (c *command) parseArgs(args []string) ([]string, error) {
	return parseFlags(c.fs, args, c.getenv, c.help)
}

// parseFlags parses args into fs, allowing flags and arguments in any order,
// then fills every flag not on the command line from PETSTORE_<FLAG>.
// It returns the positional arguments.
func parseFlags(fs *flag.FlagSet, args []string, getenv func(string) string, stdout io.Writer) ([]string, error) {
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(stdout)
				fmt.Fprintf(stdout, "usage of petstore %s:\n", fs.Name())
				fs.PrintDefaults()
				return nil, errHelp
			}
			return nil, usagef("%s: %v (see petstore %s -h)", fs.Name(), err, fs.Name())
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		env := "PETSTORE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if f.Name == "version" {
			return // PETSTORE_VERSION is too likely to mean something else
		}
		if v := getenv(env); v != "" && !set[f.Name] && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = usagef("%s=%q: %v", env, v, e)
			}
		}
	})
	return positional, err
}

// errHelp ends a command that printed its help.
var errHelp = errors.New("help shown")

// dbFlags are the flags every command has: which environment, which file.
type dbFlags struct {
	env string
	db  string
}

func (d *dbFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.env, "env", "production", "environment: production or staging (each has its own database and key prefix)")
	fs.StringVar(&d.db, "db", "", "SQLite database file (default petstore.db, or petstore-staging.db on staging), or a postgres:// URL")
}

func (d *dbFlags) check() error {
	if _, ok := keyPrefixes[d.env]; !ok {
		return usagef("--env must be production or staging, not %q", d.env)
	}
	if d.db == "" {
		d.db = "petstore.db"
		if d.env == "staging" {
			d.db = "petstore-staging.db"
		}
	}
	return nil
}

// shown is the database as output may name it: a URL without its password.
func (d *dbFlags) shown() string {
	if isPostgresURL(d.db) {
		return redactURL(d.db)
	}
	return d.db
}

// open checks the flags and opens the database, creating it only when
// create is set.
func (d *dbFlags) open(ctx context.Context, create bool) (storage, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return openFlagged(ctx, "--db", d.db, create, time.Now)
}

// openFlagged opens the database the command-line flag names; a URL that
// no engine can read is a mistake on the command line (exit status 2).
func openFlagged(ctx context.Context, flag, db string, create bool, now func() time.Time) (storage, error) {
	store, err := openStorage(ctx, db, create, now)
	if err != nil {
		return nil, flagError(flag, err)
	}
	return store, nil
}

// flagError is err, or a usage error naming flag when it is a URL that
// no engine can read.
func flagError(flag string, err error) error {
	if errors.Is(err, errBadURL) {
		return usagef("%s %v", flag, err)
	}
	return err
}

// backupCommand writes a copy of a SQLite database, made while servers go
// on writing to it.
func backupCommand(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	c := newCommand("backup", getenv, stderr).withDB()
	var out string
	c.fs.StringVar(&out, "out", "", "file to write the copy to; must not exist (required)")
	if err := c.parse(args); err != nil {
		return err
	}
	if out == "" {
		return usagef("backup needs --out FILE")
	}
	if err := c.db.check(); err != nil {
		return err
	}
	if isPostgresURL(c.db.db) {
		return usagef("backup copies a SQLite file; for PostgreSQL use pg_dump (see docs/replicas.md)")
	}
	if err := backupSQLite(ctx, c.db.db, out); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "backed up %s to %s\n", c.db.db, out)
	return nil
}

// copyCommand moves a SQLite database into an empty PostgreSQL one.
func copyCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c := newCommand("copy", getenv, stdout)
	var from, to, env string
	c.fs.StringVar(&env, "env", "production", "the environment the database serves, production or staging, for the copy's audit event")
	c.fs.StringVar(&from, "from", "", "the SQLite database file to copy (required)")
	c.fs.StringVar(&to, "to", "", "the empty PostgreSQL database to copy it into, a postgres:// URL (required)")
	if err := c.parse(args); err != nil {
		return err
	}
	switch {
	case from == "" || to == "":
		return usagef("copy needs --from FILE and --to postgres://...")
	case isPostgresURL(from):
		return usagef("--from must be a SQLite database file, not a URL")
	case !isPostgresURL(to):
		return usagef("--to must be a PostgreSQL URL (postgres://USER@HOST:PORT/DATABASE), not %q", to)
	case keyPrefixes[env] == "":
		return usagef("--env must be production or staging, not %q", env)
	}
	src, err := openFlagged(ctx, "--from", from, false, time.Now)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := openCopyTarget(ctx, to)
	if err != nil {
		return flagError("--to", err)
	}
	defer dst.Close()
	n, err := copyAll(ctx, src, dst, auditEvent{Action: auditKeysCopied, Actor: commandActor(), Env: env, Details: auditDetails{From: from}})
	if err != nil {
		return fmt.Errorf("copy %s to %s: %s", from, redactURL(to), oneLine(redactPassword(err.Error(), to)))
	}
	fmt.Fprintf(stderr, "copied %d pets, %d keys, %d daily usage counts, %d idempotency records and %d audit events from %s to %s; counts verified\n",
		n.Pets, n.Keys, n.Usage, n.Idempotency, n.AuditEvents, from, redactURL(to))
	return nil
}

// copyAll moves what src holds into dst, reading src in one snapshot, and
// adds copiedEvent.
func copyAll(ctx context.Context, src storage, dst copyTarget, copiedEvent auditEvent) (copied, error) {
	snap, err := src.Snapshot(ctx)
	if err != nil {
		return copied{}, err
	}
	defer snap.Close()
	return dst.CopyFrom(ctx, snap, copiedEvent)
}
