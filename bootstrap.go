// The first key of an empty database: shown on a terminal, or written to a
// file only its owner can read when standard error is a kept log (a
// journal, a container's log), so that the key never lands in the log.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"petstore/internal/domain"
	"petstore/internal/manage"
	"petstore/internal/store"

	"golang.org/x/term"
)

// bootstrapKey makes a first Free key on a database without any, so that a
// new user can call the API at once. It is the only key the server ever
// gives out: printed on a terminal, otherwise written to a file whose path
// alone is logged (README.md, "A first session"). A key that cannot be
// written to its file is not made: the start stops, naming the place.
func bootstrapKey(ctx context.Context, db domain.KeyStore, cfg serveConfig, url string, stderr io.Writer, logger *slog.Logger) error {
	free := domain.Plans["free"]
	key, token := manage.NewAPIKey(domain.Key{Env: cfg.Env, Name: "bootstrap", Plan: "free", PerMinute: free.PerMinute, PerDay: free.PerDay, Scopes: domain.AllScopes})
	if f, ok := stderr.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		return bootstrapKeyToFile(ctx, db, key, token, bootstrapKeyPath(cfg), logger)
	}
	key, created, err := db.CreateFirstKey(ctx, key, domain.ServerActor, nil)
	if err != nil {
		return fmt.Errorf("create the bootstrap key: %w", err)
	}
	if !created {
		return nil
	}
	fmt.Fprintf(stderr, `
No API keys yet in %s, so here is one (key %d, "bootstrap", Free plan).
It is shown only this once: keep it.

    %s

Try it:  curl -H 'Authorization: Bearer %s' %s/v1/pets
More:    %s

`, cfg.Shown(), key.ID, token, token, url, keysCreateHint(cfg))
	return nil
}

// bootstrapKeyToFile makes key, whose secret is token, the first key when
// the database has none, and writes it to a file at path. The file is
// made before the key, and written before the key's transaction commits:
// a place that cannot be written stops the start with no key made.
func bootstrapKeyToFile(ctx context.Context, db domain.KeyStore, key domain.Key, token, path string, logger *slog.Logger) error {
	// Most starts find keys: they need no writable place.
	keys, err := db.Keys(ctx)
	if err != nil {
		return fmt.Errorf("look for API keys: %w", err)
	}
	if len(keys) > 0 {
		return nil
	}
	// Named in full in the log and in an error: on PostgreSQL the default
	// is in the working directory.
	abs, err := filepath.Abs(path)
	if err != nil {
		return keyFileError(path, err)
	}
	f, err := newKeyFile(abs)
	if err != nil {
		return keyFileError(abs, err)
	}
	key, created, err := db.CreateFirstKey(ctx, key, domain.ServerActor, func(domain.Key) error { return f.hold(token) })
	f.discard(created && err == nil)
	switch {
	case f.err != nil:
		return keyFileError(f.path, f.err)
	case err != nil:
		return fmt.Errorf("create the bootstrap key: %w", err)
	case created:
		logger.Info("no API keys yet, so a first one (Free plan) is in a file only this user can read: read it, then delete it",
			"key_id", key.ID, "bootstrap_key_file", f.path)
	}
	return nil
}

// keyFileError says that the first key could not be written to path, and
// so was not made, and what to do.
func keyFileError(path string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the temporary file's name would only confuse
	}
	return fmt.Errorf("cannot write the first API key to %s (%v), so none was made: "+
		"give a file in a directory this user can write with --bootstrap-key-file", path, err)
}

// keyFile is where the first key goes: a file made, readable and writable
// by this user only (0600), beside path before the key is made, then
// written and renamed to path (replacing whatever file was there) in the
// key's transaction.
type keyFile struct {
	path   string // absolute
	tmp    *os.File
	placed bool  // renamed to path
	err    error // what hold met
}

// newKeyFile makes the file beside path, an absolute path.
func newKeyFile(path string) (*keyFile, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".bootstrap-key-*")
	if err != nil {
		return nil, err
	}
	return &keyFile{path: path, tmp: tmp}, nil
}

// hold writes token to the file, to the disk, and puts the file in place.
func (f *keyFile) hold(token string) error {
	_, err := f.tmp.WriteString(token + "\n")
	if err == nil {
		err = f.tmp.Sync()
	}
	if closeErr := f.tmp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(f.tmp.Name(), f.path)
	}
	f.placed, f.err = err == nil, err
	return err
}

// discard removes what is not wanted: the file before it was put in
// place, and the one put in place when the key was not stored after all.
func (f *keyFile) discard(stored bool) {
	f.tmp.Close()
	if !f.placed {
		os.Remove(f.tmp.Name())
	} else if !stored {
		os.Remove(f.path)
	}
}

// bootstrapKeyPath is where the first key is written: --bootstrap-key-file,
// or beside the SQLite file, or petstore.bootstrap-key in the working
// directory on PostgreSQL.
func bootstrapKeyPath(cfg serveConfig) string {
	switch {
	case cfg.bootstrapKeyFile != "":
		return cfg.bootstrapKeyFile
	case store.IsPostgresURL(cfg.DB):
		return "petstore.bootstrap-key"
	}
	return cfg.DB + ".bootstrap-key"
}

// keysCreateHint is a keys create command for the server's database that
// works as printed: the --db as given, but a URL without its password, which
// libpq's PGPASSWORD or ~/.pgpass then supplies.
func keysCreateHint(cfg serveConfig) string {
	db := withoutPassword(cfg.DB)
	hint := "petstore keys create --db " + shellWord(db)
	if cfg.Env != "production" {
		hint += " --env " + cfg.Env
	}
	hint += " --plan pro --name my-app"
	if db != cfg.DB {
		hint += "\n         (the password is left out: give it in PGPASSWORD or ~/.pgpass)"
	}
	return hint
}

// withoutPassword is db with no password: a PostgreSQL URL loses the one in
// its user part and a password parameter; a file path stays as it is.
func withoutPassword(db string) string {
	u, err := url.Parse(db)
	if !store.IsPostgresURL(db) || err != nil {
		return db
	}
	_, inUser := u.User.Password()
	q := u.Query()
	if !inUser && !q.Has("password") {
		return db
	}
	if inUser {
		u.User = url.User(u.User.Username())
	}
	if q.Has("password") {
		q.Del("password")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

var plainShellWord = regexp.MustCompile(`^[A-Za-z0-9@%+=:,./_-]+$`)

// shellWord is s as one word of a POSIX shell: quoted unless it is plain.
func shellWord(s string) string {
	if plainShellWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
