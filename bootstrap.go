// The first key of an empty database: shown on a terminal, or written to a
// file only its owner can read when standard error is a kept log (a
// journal, a container's log), so that the key never lands in the log.

package main

import (
	"context"
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
// alone is logged (README.md, "A first session").
func bootstrapKey(ctx context.Context, store domain.KeyStore, cfg serveConfig, url string, stderr io.Writer, logger *slog.Logger) error {
	free := domain.Plans["free"]
	key, token := manage.NewAPIKey(domain.Key{Env: cfg.Env, Name: "bootstrap", Plan: "free", PerMinute: free.PerMinute, PerDay: free.PerDay, Scopes: domain.AllScopes})
	key, created, err := store.CreateFirstKey(ctx, key, domain.ServerActor)
	if err != nil {
		return fmt.Errorf("create the bootstrap key: %w", err)
	}
	if !created {
		return nil
	}
	if f, ok := stderr.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		path, err := writeBootstrapKey(bootstrapKeyPath(cfg), token)
		if err != nil {
			return fmt.Errorf("made the first API key (key %d, \"bootstrap\"), but could not write it to a file: %w; "+
				"standard error is not a terminal, so it is not printed: make a key with petstore keys create", key.ID, err)
		}
		logger.Info("no API keys yet, so a first one (Free plan) is in a file only this user can read: read it, then delete it",
			"key_id", key.ID, "bootstrap_key_file", path)
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

// writeBootstrapKey writes token to path, readable and writable by this
// user only (0600, whatever a file already there allowed), and returns the
// path made absolute.
func writeBootstrapKey(path, token string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(filepath.Dir(abs), ".bootstrap-key-*")
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(token + "\n")
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(f.Name(), abs)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return abs, nil
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
