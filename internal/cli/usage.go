package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"petstore/internal/domain"
	"petstore/internal/manage"
	"petstore/internal/store"
)

// Usage is petstore usage: a key's usage history, a day a line or a
// JSON array, oldest first.
func Usage(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	c := newCommand("usage", getenv, stdout).withDB()
	var keyID int64
	var daysFlag string
	c.fs.Int64Var(&keyID, "key", 0, "the key whose usage to show, by id (a roll's keys share theirs) (required)")
	c.fs.StringVar(&daysFlag, "days", strconv.Itoa(manage.DefaultUsageDays), "how many days back, today included: 1 to 400")
	asJSON := c.jsonFlag("a table")
	if err := c.parse(args); err != nil {
		return err
	}
	if keyID < 1 {
		return Usagef("usage needs --key ID, a key's numeric id from petstore keys list")
	}
	days, err := asUsage(manage.UsageDays("--days", daysFlag))
	if err != nil {
		return err
	}
	return c.withStore(ctx, false, func(store store.Storage) error {
		rows, err := manage.KeyUsage(ctx, store, keyID, days, time.Now())
		if err != nil {
			return commandError("read the usage of key", keyID, err)
		}
		return writeRows(stdout, *asJSON, rows, "DAY\tALLOWED\tRATE_LIMITED\tQUOTA_EXCEEDED\tBANNED\tFORBIDDEN", func(w io.Writer, r domain.UsageDay) {
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\n", r.Day, r.Allowed, r.RateLimited, r.QuotaExceeded, r.Banned, r.Forbidden)
		})
	})
}
