// The preamble every command shares, and migrate, backup, copy and audit.

package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"petstore/internal/domain"
	"petstore/internal/manage"
	"petstore/internal/store"
)

// command is the preamble of a command: its flag set, whose flags may also
// be given as PETSTORE_<FLAG> in the environment, and with withDB the
// --env and --db of the database it works on.
type command struct {
	fs     *flag.FlagSet
	db     DBFlags
	getenv func(string) string
	help   io.Writer // where -h prints the flags
}

func newCommand(name string, getenv func(string) string, help io.Writer) *command {
	return &command{fs: flag.NewFlagSet(name, flag.ContinueOnError), getenv: getenv, help: help}
}

func (c *command) withDB() *command {
	c.db.Register(c.fs)
	return c
}

func (c *command) jsonFlag(instead string) *bool {
	return c.fs.Bool("json", false, "print a JSON array instead of "+instead)
}

// parse reads args and the environment into the flags, for a command that
// takes no arguments.
func (c *command) parse(args []string) error {
	rest, err := c.parseArgs(args)
	if err == nil && len(rest) > 0 {
		err = Usagef("%s takes no arguments, got %q", c.fs.Name(), rest[0])
	}
	return err
}

// parseArgs is parse for a command that takes arguments: it returns them.
func (c *command) parseArgs(args []string) ([]string, error) {
	return ParseFlags(c.fs, args, c.getenv, c.help)
}

// parseOne is parseArgs for a command that takes one argument, which takes
// names.
func (c *command) parseOne(args []string, takes string) (string, error) {
	rest, err := c.parseArgs(args)
	if err == nil && len(rest) != 1 {
		err = Usagef("%s takes one %s", c.fs.Name(), takes)
	}
	if err != nil {
		return "", err
	}
	return rest[0], nil
}

// repeatedFlag is a flag that may be given many times: each value is
// appended to the list it returns.
func repeatedFlag(fs *flag.FlagSet, name, usage string) *[]string {
	var list []string
	fs.Func(name, usage, func(v string) error {
		list = append(list, v)
		return nil
	})
	return &list
}

// withStore opens the database of --env and --db, creating it only when
// create is set, and runs do on it.
func (c *command) withStore(ctx context.Context, create bool, do func(store.Storage) error) error {
	if err := c.db.Check(); err != nil {
		return err
	}
	store, err := OpenFlagged(ctx, "--db", c.db.DB, create, time.Now)
	if err != nil {
		return err
	}
	defer store.Close()
	return do(store)
}

// asUsage is v, or err made a usage error: the shared operations' refusal
// of what the command line says.
func asUsage[T any](v T, err error) (T, error) {
	if err != nil {
		return v, Usagef("%s", err.Error())
	}
	return v, nil
}

// ParseFlags parses args into fs, allowing flags and arguments in any order,
// then fills every flag not on the command line from PETSTORE_<FLAG>.
// It returns the positional arguments.
func ParseFlags(fs *flag.FlagSet, args []string, getenv func(string) string, stdout io.Writer) ([]string, error) {
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(stdout)
				fmt.Fprintf(stdout, "usage of petstore %s:\n", fs.Name())
				fs.PrintDefaults()
				return nil, ErrHelp
			}
			return nil, Usagef("%s: %v (see petstore %s -h)", fs.Name(), err, fs.Name())
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
				err = Usagef("%s=%q: %v", env, v, e)
			}
		}
	})
	return positional, err
}

// ErrHelp ends a command that printed its help.
var ErrHelp = errors.New("help shown")

// given tells whether the flag name was set, even to "".
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// parseScopeFlags reads --scope flags, each one scope or several separated
// by commas, every one of within; none given: all of within. unknown is the
// usage error of a name in flag that is none of them.
func parseScopeFlags(flags []string, within domain.ScopeSet, unknown func(flag, name string) error) (domain.ScopeSet, error) {
	if len(flags) == 0 {
		return within, nil
	}
	var s domain.ScopeSet
	for _, flag := range flags {
		names := strings.Split(flag, ",")
		for i := range names {
			names[i] = strings.TrimSpace(names[i])
		}
		scopes, name, ok := domain.ParseScopes(names, within)
		if !ok {
			return 0, unknown(flag, name)
		}
		s |= scopes
	}
	return s, nil
}

// DBFlags are the flags every command has: which environment, which file.
type DBFlags struct {
	Env string
	DB  string
}

func (d *DBFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&d.Env, "env", "production", "environment: production or staging (each has its own database and key prefix)")
	fs.StringVar(&d.DB, "db", "", "SQLite database file (default petstore.db, or petstore-staging.db on staging), or a postgres:// URL")
}

func (d *DBFlags) Check() error {
	if _, ok := domain.KeyPrefixes[d.Env]; !ok {
		return Usagef("--env must be production or staging, not %q", d.Env)
	}
	if d.DB == "" {
		d.DB = "petstore.db"
		if d.Env == "staging" {
			d.DB = "petstore-staging.db"
		}
	}
	return nil
}

// Shown is the database as output may name it: a URL without its password.
func (d *DBFlags) Shown() string {
	if store.IsPostgresURL(d.DB) {
		return store.RedactURL(d.DB)
	}
	return d.DB
}

// create opens the database for a command that makes something (keys
// create): it creates a SQLite file that is not there, and then says so on
// stderr with its absolute path, so that a key made in the wrong folder, for
// a database no server uses, is noticed at once.
func (d *DBFlags) create(ctx context.Context, stderr io.Writer) (store.Storage, error) {
	return d.createWith(ctx, stderr, func() (store.Storage, error) { return OpenFlagged(ctx, "--db", d.DB, true, time.Now) })
}

// createWith is create opening the database with open.
func (d *DBFlags) createWith(ctx context.Context, stderr io.Writer, open func() (store.Storage, error)) (store.Storage, error) {
	if err := d.Check(); err != nil {
		return nil, err
	}
	_, statErr := os.Stat(d.DB)
	isNew := !store.IsPostgresURL(d.DB) && errors.Is(statErr, os.ErrNotExist)
	store, err := open()
	if err == nil && isNew {
		abs, absErr := filepath.Abs(d.DB)
		if absErr != nil {
			abs = d.DB
		}
		fmt.Fprintf(stderr, "petstore: created a new, empty database at %s\n", abs)
	}
	return store, err
}

// OpenFlagged opens the database the command-line flag names; a URL that
// no engine can read is a mistake on the command line (exit status 2).
func OpenFlagged(ctx context.Context, flag, db string, create bool, now func() time.Time) (store.Storage, error) {
	s, err := store.Open(ctx, db, create, now)
	if err != nil {
		return nil, flagError(flag, err)
	}
	return s, nil
}

func flagError(flag string, err error) error {
	if errors.Is(err, store.ErrBadURL) {
		return Usagef("%s %v", flag, err)
	}
	return err
}

// Migrate brings a database's schema up to date: the expand steps, and
// with --contract the contract steps too, which --contract refuses while a
// server older than one checked in during the last minute (--force runs
// them anyway). On SQLite, which one server uses, every step runs. On
// PostgreSQL it is run by the role that owns the tables, so that the
// servers may run as a role with only the grants they need
// (docs/production.md, "Least privilege on PostgreSQL"; docs/replicas.md,
// "Upgrading a fleet").
func Migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c := newCommand("migrate", getenv, stdout).withDB()
	var opts store.MigrateOptions
	c.fs.BoolVar(&opts.Contract, "contract", false, "apply the contract steps too, once every server knows them (PostgreSQL)")
	c.fs.BoolVar(&opts.Force, "force", false, "with --contract: even while an older server checked in during the last minute")
	if err := c.parse(args); err != nil {
		return err
	}
	if opts.Force && !opts.Contract {
		return Usagef("--force goes with --contract")
	}
	db, err := c.db.createWith(ctx, stderr, func() (store.Storage, error) {
		s, err := store.OpenToMigrate(ctx, c.db.DB, opts, time.Now)
		if err != nil {
			return nil, flagError("--db", err)
		}
		return s, nil
	})
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := db.Schema(ctx)
	if err != nil {
		return err
	}
	if st.Version < len(store.Migrations) {
		m := store.Migrations[st.Version]
		fmt.Fprintf(stdout, "the schema of %s is at version %d, level %d: migration %d (%s) is a contract step, left for petstore migrate --contract once every server knows it\n",
			c.db.Shown(), st.Version, st.Level, st.Version+1, m.Name)
		return nil
	}
	fmt.Fprintf(stdout, "the schema of %s is up to date (version %d, level %d)\n", c.db.Shown(), st.Version, st.Level)
	return nil
}

// Backup writes a copy of a SQLite database, made while servers go
// on writing to it. It writes to stderr only, its help too.
func Backup(ctx context.Context, args []string, getenv func(string) string, _, stderr io.Writer) error {
	c := newCommand("backup", getenv, stderr).withDB()
	var out string
	c.fs.StringVar(&out, "out", "", "file to write the copy to; must not exist (required)")
	if err := c.parse(args); err != nil {
		return err
	}
	if out == "" {
		return Usagef("backup needs --out FILE")
	}
	if err := c.db.Check(); err != nil {
		return err
	}
	if store.IsPostgresURL(c.db.DB) {
		return Usagef("backup copies a SQLite file; for PostgreSQL use pg_dump (see docs/replicas.md)")
	}
	if err := store.BackupSQLite(ctx, c.db.DB, out); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "backed up %s to %s\n", c.db.DB, out)
	return nil
}

// Copy moves a SQLite database into an empty PostgreSQL one.
func Copy(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
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
		return Usagef("copy needs --from FILE and --to postgres://...")
	case store.IsPostgresURL(from):
		return Usagef("--from must be a SQLite database file, not a URL")
	case !store.IsPostgresURL(to):
		return Usagef("--to must be a PostgreSQL URL (postgres://USER@HOST:PORT/DATABASE), not %q", to)
	case domain.KeyPrefixes[env] == "":
		return Usagef("--env must be production or staging, not %q", env)
	}
	src, err := OpenFlagged(ctx, "--from", from, false, time.Now)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := store.OpenCopyTarget(ctx, to)
	if err != nil {
		return flagError("--to", err)
	}
	defer dst.Close()
	var n domain.Copied
	snap, err := src.Snapshot(ctx)
	if err == nil {
		defer snap.Close()
		n, err = dst.CopyFrom(ctx, snap, domain.AuditEvent{Action: domain.AuditKeysCopied, Actor: CommandActor(), Env: env, Details: domain.AuditDetails{From: from}})
	}
	if err != nil {
		return fmt.Errorf("copy %s to %s: %s", from, store.RedactURL(to), store.OneLine(store.RedactPassword(err.Error(), to)))
	}
	fmt.Fprintf(stderr, "copied %d pets, %d keys, %d daily usage counts, %d idempotency records, %d audit events, %d admin tokens, %d days of usage history and %d bans from %s to %s; counts verified\n",
		n.Pets, n.Keys, n.Usage, n.Idempotency, n.AuditEvents, n.AdminTokens, n.UsageHistory, n.Bans, from, store.RedactURL(to))
	return nil
}

// Audit is petstore audit: the events of the trail, oldest first, a
// line each or a JSON array.
func Audit(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	c := newCommand("audit", getenv, stdout).withDB()
	var since, action string
	var keyID int64
	c.fs.StringVar(&since, "since", "", "only events at or after this: a duration back from now (24h, 7d, 30m) or an RFC 3339 time; default all")
	c.fs.Int64Var(&keyID, "key", 0, "only the events of this key id (a roll is an event of the old key and of the new one)")
	c.fs.StringVar(&action, "action", "", "only events of this action: "+strings.Join(domain.AuditActions, ", "))
	asJSON := c.jsonFlag("a line an event")
	if err := c.parse(args); err != nil {
		return err
	}
	filter, err := auditFilterOf(c.fs, since, keyID, action, time.Now())
	if err != nil {
		return err
	}
	filter.Env = c.db.Env
	return c.withStore(ctx, false, func(db store.Storage) error {
		events, err := db.AuditEvents(ctx, filter)
		if err != nil {
			return fmt.Errorf("read the audit trail: %w", err)
		}
		if *asJSON {
			return WriteAuditJSON(stdout, events)
		}
		return WriteAuditLines(stdout, events)
	})
}

// auditFilterOf checks audit's flags, and picks the events they ask for at
// now.
func auditFilterOf(fs *flag.FlagSet, since string, keyID int64, action string, now time.Time) (domain.AuditFilter, error) {
	f := domain.AuditFilter{KeyID: keyID, Action: action}
	if given(fs, "key") && keyID < 1 {
		return f, Usagef("--key must be a key's numeric id from petstore keys list, not %d", keyID)
	}
	if err := manage.CheckAuditAction("--action", action); err != nil {
		return f, Usagef("%s", err.Error())
	}
	var err error
	f.Since, err = manage.AuditSince("--since", since, given(fs, "since"), now)
	return asUsage(f, err)
}

// WriteAuditLines prints each event on a line: its time and action, then
// name=value pairs.
func WriteAuditLines(w io.Writer, events []domain.AuditEvent) error {
	bw := bufio.NewWriter(w)
	for _, e := range events {
		bw.WriteString(e.At.Format(manage.AuditTimeFormat))
		bw.WriteString(" " + e.Action)
		for _, p := range e.Pairs() {
			bw.WriteString(" " + p[0] + "=" + logfmtValue(p[1]))
		}
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// logfmtValue is v as a value of a name=value pair: quoted when it holds a
// space, a quote, an equals sign or a character that is not printable.
func logfmtValue(v string) string {
	if strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == '"' || r == '=' || r == 0x7f || !unicode.IsPrint(r) }) {
		return strconv.Quote(v)
	}
	return v
}

// WriteAuditJSON prints the events as a JSON array, [] for none.
func WriteAuditJSON(w io.Writer, events []domain.AuditEvent) error {
	return writeJSONIndented(w, manage.AuditJSONOf(events))
}

func writeJSONIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// listCommand runs a list command, whose only flags are the database's and
// --json: read gets its rows (of what, for an error) from the database, and
// writeRows writes them.
func listCommand[T any](ctx context.Context, name, what string, args []string, getenv func(string) string, stdout io.Writer,
	read func(ctx context.Context, store store.Storage, env string) ([]T, error), header string, line func(w io.Writer, row T)) error {
	c := newCommand(name, getenv, stdout).withDB()
	asJSON := c.jsonFlag("a table")
	if err := c.parse(args); err != nil {
		return err
	}
	return c.withStore(ctx, false, func(db store.Storage) error {
		rows, err := read(ctx, db, c.db.Env)
		if err != nil {
			return fmt.Errorf("list %s: %w", what, err)
		}
		return writeRows(stdout, *asJSON, rows, header, line)
	})
}

func writeRows[T any](w io.Writer, asJSON bool, rows []T, header string, line func(w io.Writer, row T)) error {
	if asJSON {
		return writeJSONIndented(w, rows)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, row := range rows {
		line(tw, row)
	}
	return tw.Flush()
}

// CommandActor is who runs a command, for its events: the operating-system
// user and the host, user@host. Where no /etc/passwd names the user (a
// container image has none), the user is $USER, else uid=N.
func CommandActor() string {
	name := "uid=" + strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	} else if env := os.Getenv("USER"); env != "" {
		name = env
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return name + "@" + host
}

// UsageError is a mistake in the command line.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

func Usagef(format string, args ...any) error {
	return &UsageError{fmt.Sprintf(format, args...)}
}
