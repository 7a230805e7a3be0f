package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"petstore/internal/domain"
	"petstore/internal/manage"
	"petstore/internal/store"
)

// petstore bans list|lift: the bans in force, and a lift that every running
// server applies within a second.

func BansList(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	read := func(ctx context.Context, store store.Storage) ([]manage.ListedBan, error) {
		bans, err := store.Bans(ctx)
		return manage.ListedBans(bans), err
	}
	return listCommand(ctx, "bans list", "bans", args, getenv, stdout, read, "SUBJECT\tSINCE\tUNTIL", func(w io.Writer, b manage.ListedBan) {
		fmt.Fprintf(w, "%s\t%s\t%s\n", b.Subject, b.Since.Format(time.RFC3339), b.Until.Format(time.RFC3339))
	})
}

func BansLift(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	c := newCommand("bans lift", getenv, stdout).withDB()
	arg, err := c.parseOne(args, "subject, key:ID or address:IP (see petstore bans list)")
	if err != nil {
		return err
	}
	subject, err := domain.ParseBanSubject(arg)
	if err != nil {
		return Usagef("bans lift: %v", err)
	}
	return c.withStore(ctx, false, func(store store.Storage) error {
		b, err := store.LiftBan(ctx, subject, CommandActor(), c.db.Env)
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
