package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"petstore/internal/domain"
	"petstore/internal/manage"
	"petstore/internal/store"
)

// The admin tokens' commands (admin create, list, revoke) and the bans' (bans
// list, bans lift).

func AdminCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c := newCommand("admin create", getenv, stdout).withDB()
	name := c.fs.String("name", "", "who holds the token, shown in admin list and as the actor admin:NAME of every change it makes (required)")
	scopeFlags := repeatedFlag(c.fs, "scope", "what the token may do: keys:read, keys:write, audit:read, webhooks; repeat the flag or separate scopes by commas (default all four)")
	if err := c.parse(args); err != nil {
		return err
	}
	if *name == "" {
		return Usagef("admin create needs --name NAME: the actor admin:NAME of every change the token makes")
	}
	if err := manage.CheckLabel("--name", *name); err != nil {
		return Usagef("%v", err)
	}
	scopes, err := parseScopeFlags(*scopeFlags, domain.AllAdminScopes, func(_, scope string) error {
		return Usagef("--scope: unknown admin scope %q; the admin scopes are %s", scope, strings.Join(domain.AllAdminScopes.Names(), ", "))
	})
	if err != nil {
		return err
	}
	return c.withStore(ctx, true, func(db store.Storage) error {
		if err := refuseSecrets(ctx, db, name, nil); err != nil {
			return err
		}
		token := domain.NewSecret(domain.AdminPrefixes[c.db.Env])
		hash := domain.HashKey(token)
		t, err := db.CreateAdminToken(ctx, domain.AdminToken{Hash: hash[:], Name: *name, Scopes: scopes, Env: c.db.Env}, CommandActor())
		if err != nil {
			return fmt.Errorf("create admin token: %w", err)
		}
		fmt.Fprintf(stderr, "created admin token %d (%s, %s) in %s; it is shown only now:\n", t.ID, *name, scopes.Described(), c.db.Shown())
		fmt.Fprintln(stdout, token)
		return nil
	})
}

func AdminList(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	read := func(ctx context.Context, db store.Storage, _ string) ([]domain.ListedAdminToken, error) {
		tokens, err := db.AdminTokens(ctx)
		return manage.Listed(tokens, func(t domain.AdminToken) domain.ListedAdminToken { return t.Listed() }), err
	}
	return listCommand(ctx, "admin list", "admin tokens", args, getenv, stdout, read, "ID\tNAME\tSCOPES\tCREATED\tREVOKED", func(w io.Writer, t domain.ListedAdminToken) {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", t.ID, t.Name, strings.Join(t.Scopes, ","), t.Created.Format(time.RFC3339), timeOrDash(t.Revoked))
	})
}

func AdminRevoke(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	c := newCommand("admin revoke", getenv, stdout).withDB()
	arg, err := c.parseOne(args, "ID (see petstore admin list)")
	if err != nil {
		return err
	}
	id, ok := domain.ParseID(arg)
	if !ok {
		return Usagef("ID must be an admin token's numeric id from petstore admin list, not %q", arg)
	}
	return c.withStore(ctx, false, func(db store.Storage) error {
		revoked, err := db.RevokeAdminToken(ctx, id, CommandActor())
		if err != nil {
			return commandError("revoke admin token key", id, err)
		}
		sayRevoked(stdout, "admin token", id, revoked, "the admin API refuses it at once")
		return nil
	})
}

// petstore bans list|lift: the bans in force, and a lift that every running
// server applies within a second.

func BansList(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	read := func(ctx context.Context, db store.Storage, env string) ([]manage.ListedBan, error) {
		bans, err := manage.EnvBans(ctx, db, env)
		return manage.ListedBans(bans), err
	}
	return listCommand(ctx, "bans list", "bans", args, getenv, stdout, read, "SUBJECT\tSINCE\tUNTIL", func(w io.Writer, b manage.ListedBan) {
		fmt.Fprintf(w, "%s\t%s\t%s\n", b.Subject, b.Since.Format(time.RFC3339), b.Until.Format(time.RFC3339))
	})
}

func BansLift(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	c := newCommand("bans lift", getenv, stdout).withDB()
	arg, err := c.parseOne(args, "subject, key:ID or address:IP (see petstore bans list)")
	if err != nil {
		return err
	}
	subject, err := domain.ParseBanSubject(arg)
	if err != nil {
		return Usagef("bans lift: %v", err)
	}
	return c.withStore(ctx, false, func(db store.Storage) error {
		b, err := db.LiftBan(ctx, subject, CommandActor(), c.db.Env)
		var notFound *domain.Error
		if errors.As(err, &notFound) && notFound.Kind == domain.KindNotFound {
			return notFound
		}
		if err != nil {
			return fmt.Errorf("lift the ban of %s: %w", subject, err)
		}
		fmt.Fprintf(stdout, "lifted the ban of %s (it would have ended %s); running servers let it through within a second\n",
			b.Subject, b.Until.Format(time.RFC3339))
		return nil
	})
}
