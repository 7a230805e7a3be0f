package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

const maxKeyNameLen = 64

// createKey stores a new key for plan and returns it with its token, which
// exists only here: the database keeps its hash.
func createKey(ctx context.Context, store storage, env, plan, name string, lim limits) (apiKey, string, error) {
	token := newKey(env)
	hash := hashKey(token)
	k, err := store.CreateKey(ctx, apiKey{
		Hash: hash[:], Name: name, Plan: plan, PerMinute: lim.PerMinute, PerDay: lim.PerDay, Env: env,
	})
	return k, token, err
}

func keysCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var db dbFlags
	var plan, name string
	var rpm, rpd int64
	fs := flag.NewFlagSet("keys create", flag.ContinueOnError)
	db.register(fs)
	fs.StringVar(&plan, "plan", "", "plan: free, pro, business or enterprise (required)")
	fs.StringVar(&name, "name", "", "a name to recognise the key by in keys list")
	fs.Int64Var(&rpm, "rpm", 0, "requests per minute (enterprise only, required there)")
	fs.Int64Var(&rpd, "rpd", 0, "requests per day (enterprise only, required there)")
	rest, err := parseFlags(fs, args, getenv, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("keys create takes no arguments, got %q", rest[0])
	}
	lim, err := planLimits(plan, rpm, rpd)
	if err != nil {
		return err
	}
	if len(name) > maxKeyNameLen || strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return usagef("--name must be at most %d characters without spaces or control characters", maxKeyNameLen)
	}
	store, err := db.open(ctx, true)
	if err != nil {
		return err
	}
	defer store.Close()
	k, token, err := createKey(ctx, store, db.env, plan, name, lim)
	if err != nil {
		return fmt.Errorf("create key: %w", err)
	}
	fmt.Fprintf(stderr, "created key %d (%s plan, %d/minute, %d/day) in %s; it is shown only now:\n",
		k.ID, plan, lim.PerMinute, lim.PerDay, db.shown())
	fmt.Fprintln(stdout, token)
	return nil
}

// planLimits are the limits of plan; --rpm and --rpd belong to enterprise.
func planLimits(plan string, rpm, rpd int64) (limits, error) {
	if plan == "enterprise" {
		if rpm < 1 || rpd < 1 {
			return limits{}, usagef("the enterprise plan needs --rpm and --rpd, each 1 or more")
		}
		return limits{PerMinute: rpm, PerDay: rpd}, nil
	}
	lim, ok := plans[plan]
	switch {
	case plan == "":
		return limits{}, usagef("--plan is required: free, pro, business or enterprise")
	case !ok:
		return limits{}, usagef("unknown plan %q: choose free, pro, business or enterprise", plan)
	case rpm != 0 || rpd != 0:
		return limits{}, usagef("--rpm and --rpd are for the enterprise plan only; %s has fixed limits", plan)
	}
	return lim, nil
}

func keysList(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var db dbFlags
	var asJSON bool
	fs := flag.NewFlagSet("keys list", flag.ContinueOnError)
	db.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print a JSON array instead of a table")
	rest, err := parseFlags(fs, args, getenv, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("keys list takes no arguments, got %q", rest[0])
	}
	store, err := db.open(ctx, false)
	if err != nil {
		return err
	}
	defer store.Close()
	keys, err := store.Keys(ctx)
	if err != nil {
		return fmt.Errorf("list keys: %w", err)
	}
	if asJSON {
		type jsonKey struct {
			ID        int64      `json:"id"`
			Name      string     `json:"name"`
			Plan      string     `json:"plan"`
			PerMinute int64      `json:"perMinute"`
			PerDay    int64      `json:"perDay"`
			Created   time.Time  `json:"created"`
			Revoked   *time.Time `json:"revoked"`
		}
		out := make([]jsonKey, 0, len(keys))
		for _, k := range keys {
			j := jsonKey{k.ID, k.Name, k.Plan, k.PerMinute, k.PerDay, k.CreatedAt, nil}
			if !k.RevokedAt.IsZero() {
				j.Revoked = &k.RevokedAt
			}
			out = append(out, j)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPLAN\tPER_MINUTE\tPER_DAY\tCREATED\tREVOKED")
	for _, k := range keys {
		name, revoked := k.Name, "-"
		if name == "" {
			name = "-"
		}
		if !k.RevokedAt.IsZero() {
			revoked = k.RevokedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\n", k.ID, name, k.Plan, k.PerMinute, k.PerDay, k.CreatedAt.Format(time.RFC3339), revoked)
	}
	return tw.Flush()
}

func keysRevoke(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var db dbFlags
	fs := flag.NewFlagSet("keys revoke", flag.ContinueOnError)
	db.register(fs)
	rest, err := parseFlags(fs, args, getenv, stdout)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("keys revoke takes one KEY_ID (see petstore keys list)")
	}
	id, err := strconv.ParseInt(rest[0], 10, 64)
	if err != nil || id < 1 {
		return usagef("KEY_ID must be a key's numeric id from petstore keys list, not %q", rest[0])
	}
	store, err := db.open(ctx, false)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.RevokeKey(ctx, id); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return errors.New(e.Message)
		}
		return fmt.Errorf("revoke key %d: %w", id, err)
	}
	fmt.Fprintf(stdout, "revoked key %d; running servers refuse it within a second\n", id)
	return nil
}

func backupCommand(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	var db dbFlags
	var out string
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	db.register(fs)
	fs.StringVar(&out, "out", "", "file to write the copy to; must not exist (required)")
	rest, err := parseFlags(fs, args, getenv, stderr)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("backup takes no arguments, got %q", rest[0])
	}
	if out == "" {
		return usagef("backup needs --out FILE")
	}
	if err := db.check(); err != nil {
		return err
	}
	if isPostgresURL(db.db) {
		return usagef("backup copies a SQLite file; for PostgreSQL use pg_dump (see the README, \"Backup and restore\")")
	}
	store, err := openSQLite(ctx, db.db, false, time.Now)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.Backup(ctx, out); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "backed up %s to %s\n", db.db, out)
	return nil
}

func copyCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var from, to string
	fs := flag.NewFlagSet("copy", flag.ContinueOnError)
	fs.StringVar(&from, "from", "", "the SQLite database file to copy (required)")
	fs.StringVar(&to, "to", "", "the empty PostgreSQL database to copy it into, a postgres:// URL (required)")
	rest, err := parseFlags(fs, args, getenv, stdout)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return usagef("copy takes no arguments, got %q", rest[0])
	case from == "" || to == "":
		return usagef("copy needs --from FILE and --to postgres://...")
	case isPostgresURL(from):
		return usagef("--from must be a SQLite database file, not a URL")
	case !isPostgresURL(to):
		return usagef("--to must be a PostgreSQL URL (postgres://USER@HOST:PORT/DATABASE), not %q", to)
	}
	src, err := openSQLite(ctx, from, false, time.Now)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := openPostgres(ctx, to, time.Now)
	if err != nil {
		return err
	}
	defer dst.Close()
	n, err := dst.CopyFrom(ctx, src)
	if err != nil {
		return fmt.Errorf("copy %s to %s: %s", from, redactURL(to), oneLine(redactPassword(err.Error(), to)))
	}
	fmt.Fprintf(stderr, "copied %d pets, %d keys, %d daily usage counts and %d idempotency records from %s to %s; counts verified\n",
		n.Pets, n.Keys, n.Usage, n.Idempotency, from, redactURL(to))
	return nil
}
