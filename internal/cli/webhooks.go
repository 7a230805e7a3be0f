package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"petstore/internal/domain"
	"petstore/internal/manage"
	"petstore/internal/store"
	"petstore/internal/webhook"
)

// The webhooks commands: endpoints, their secrets, test events, and the
// deliveries a running server makes.

func WebhooksAdd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c := newCommand("webhooks add", getenv, stdout).withDB()
	events := repeatedFlag(c.fs, "events", "the event types the endpoint takes, comma-separated or repeated: "+strings.Join(domain.WebhookEventTypes, ", ")+" (default all)")
	url, err := c.parseOne(args, "URL, the endpoint's http or https address")
	if err != nil {
		return err
	}
	terms, err := manage.NewEndpointTerms(url, *events)
	if err != nil {
		return Usagef("webhooks add: %v", err)
	}
	// A host no server can reach whatever its flags (an address in another
	// form, a name ending in a number) is refused, as the admin API refuses
	// it; one only a server without --webhook-allow-private refuses is
	// added with a warning.
	if problem := webhook.NewAddressGuard(true).URLProblem(ctx, terms.URL); problem != "" {
		return Usagef("webhooks add: %s", problem)
	}
	if problem := webhook.NewAddressGuard(false).URLProblem(ctx, terms.URL); problem != "" {
		fmt.Fprintf(stderr, "warning: the %s; added all the same, as this command cannot know how the servers run.\n", problem)
	}
	return c.withStore(ctx, true, func(db store.Storage) error {
		e, err := db.AddWebhookEndpoint(ctx, terms, CommandActor(), c.db.Env)
		if err != nil {
			return fmt.Errorf("add webhook endpoint: %w", err)
		}
		fmt.Fprintf(stderr, "added webhook endpoint %d for %s (%s) in %s.\nIts id, then its signing secret, shown only now:\n",
			e.ID, domain.ShownURL(e.URL), eventsShown(e.Events), c.db.Shown())
		fmt.Fprintln(stdout, e.ID)
		fmt.Fprintln(stdout, e.Secret)
		return nil
	})
}

func WebhooksList(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	read := func(ctx context.Context, db store.Storage, env string) ([]domain.ListedEndpoint, error) {
		endpoints, err := db.WebhookEndpoints(ctx, env)
		return manage.ListedEndpoints(endpoints, time.Now()), err
	}
	return listCommand(ctx, "webhooks list", "webhook endpoints", args, getenv, stdout, read, "ID\tURL\tEVENTS\tENABLED\tCREATED\tLAST_STATUS", func(w io.Writer, e domain.ListedEndpoint) {
		last := "-"
		if e.LastStatus != nil {
			last = strconv.Itoa(*e.LastStatus)
			if e.LastError != "" {
				last += " (" + e.LastError + ")"
			}
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%t\t%s\t%s\n", e.ID, e.URL, eventsShown(e.Events), e.Enabled, e.Created.Format(time.RFC3339), last)
	})
}

func eventsShown(events []string) string {
	if len(events) == 0 {
		return "all events"
	}
	return strings.Join(events, ",")
}

// onEndpoint parses args for a command on one endpoint, runs check (when
// not nil) on its flags, and runs do on the endpoint's ID and the database.
func (c *command) onEndpoint(ctx context.Context, args []string, check func() error, do func(id int64, store store.Storage) error) error {
	rest, err := c.parseArgs(args)
	if err == nil && check != nil {
		err = check()
	}
	if err == nil && len(rest) != 1 {
		err = Usagef("%s takes one ID, an endpoint's id from petstore webhooks list", c.fs.Name())
	}
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(rest[0], 10, 64)
	if err != nil || id < 1 {
		return Usagef("ID must be an endpoint's numeric id from petstore webhooks list, not %q", rest[0])
	}
	return c.withStore(ctx, false, func(db store.Storage) error { return do(id, db) })
}

func WebhooksRemove(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	c := newCommand("webhooks remove", getenv, stdout).withDB()
	return c.onEndpoint(ctx, args, nil, func(id int64, db store.Storage) error {
		if err := db.RemoveWebhookEndpoint(ctx, id, CommandActor(), c.db.Env); err != nil {
			return commandError("remove webhook endpoint", id, err)
		}
		fmt.Fprintf(stdout, "removed webhook endpoint %d and its deliveries\n", id)
		return nil
	})
}

func WebhooksRotate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c := newCommand("webhooks rotate", getenv, stdout).withDB()
	overlapFlag := c.fs.String("overlap", "24h", "how long the old secret signs beside the new one: a duration (24h, 30m, 7d); 0 drops it at once")
	var overlap time.Duration
	check := func() (err error) {
		overlap, err = asUsage(manage.OverlapOf("--overlap", *overlapFlag, manage.SecretOverlapAtZero))
		return err
	}
	return c.onEndpoint(ctx, args, check, func(id int64, db store.Storage) error {
		e, err := db.RotateWebhookSecret(ctx, id, webhook.NewSecret(), overlap, CommandActor(), c.db.Env)
		if err != nil {
			return commandError("rotate the secret of webhook endpoint", id, err)
		}
		until := "now"
		if overlap > 0 {
			until = e.PreviousUntil.Format(time.RFC3339)
		}
		fmt.Fprintf(stderr, "rotated the secret of webhook endpoint %d; the old one signs beside it until %s.\nThe new secret is shown only now:\n", id, until)
		fmt.Fprintln(stdout, e.Secret)
		return nil
	})
}

func WebhooksEnable(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	c := newCommand("webhooks enable", getenv, stdout).withDB()
	return c.onEndpoint(ctx, args, nil, func(id int64, db store.Storage) error {
		if _, err := db.EnableWebhookEndpoint(ctx, id, CommandActor(), c.db.Env); err != nil {
			return commandError("enable webhook endpoint", id, err)
		}
		fmt.Fprintf(stdout, "webhook endpoint %d is enabled; its waiting deliveries go out again\n", id)
		return nil
	})
}

func WebhooksTest(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c := newCommand("webhooks test", getenv, stdout).withDB()
	return c.onEndpoint(ctx, args, nil, func(id int64, db store.Storage) error {
		ev, err := manage.QueueTest(ctx, db, c.db.Env, id, CommandActor(), time.Now())
		if err != nil {
			return commandError("test webhook endpoint", id, err)
		}
		fmt.Fprintf(stderr, "queued a webhook.test event for endpoint %d; a running server delivers it (see petstore webhooks deliveries). Its id:\n", id)
		fmt.Fprintln(stdout, ev.ID)
		return nil
	})
}

func WebhooksDeliveries(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	c := newCommand("webhooks deliveries", getenv, stdout).withDB()
	var f domain.DeliveryFilter
	c.fs.Int64Var(&f.EndpointID, "endpoint", 0, "only the deliveries to this endpoint id")
	c.fs.BoolVar(&f.Failed, "failed", false, "only the deliveries that failed (every attempt, or a 410)")
	c.fs.IntVar(&f.Limit, "limit", 100, "at most this many, newest first")
	asJSON := c.jsonFlag("a table")
	if err := c.parse(args); err != nil {
		return err
	}
	if given(c.fs, "endpoint") && f.EndpointID < 1 {
		return Usagef("--endpoint must be an endpoint's numeric id from petstore webhooks list")
	}
	if f.Limit < 1 {
		return Usagef("--limit must be 1 or more")
	}
	return c.withStore(ctx, false, func(db store.Storage) error {
		f.Env = c.db.Env
		deliveries, err := db.WebhookDeliveries(ctx, f)
		if err != nil {
			return fmt.Errorf("list webhook deliveries: %w", err)
		}
		rows := manage.Listed(deliveries, domain.WebhookDelivery.Listed)
		const header = "EVENT\tTYPE\tENDPOINT\tAT\tSTATE\tATTEMPTS\tNEXT\tLAST_STATUS\tLAST_ERROR"
		return writeRows(stdout, *asJSON, rows, header, deliveryLine)
	})
}

func deliveryLine(w io.Writer, d domain.ListedDelivery) {
	status := "-"
	if d.LastStatus != nil {
		status = strconv.Itoa(*d.LastStatus)
	}
	lastErr := d.LastError
	if lastErr == "" {
		lastErr = "-"
	}
	fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\n", d.EventID, d.Type, d.EndpointID, d.At.Format(time.RFC3339),
		d.State, d.Attempts, timeOrDash(d.NextAttempt), status, lastErr)
}

func WebhooksResend(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	c := newCommand("webhooks resend", getenv, stdout).withDB()
	var f domain.DeliveryFilter
	c.fs.Int64Var(&f.EndpointID, "endpoint", 0, "only the deliveries to this endpoint id")
	c.fs.BoolVar(&f.Failed, "failed", false, "send again every delivery that failed (instead of one EVENT_ID)")
	rest, err := c.parseArgs(args)
	if err != nil {
		return err
	}
	switch {
	case given(c.fs, "endpoint") && f.EndpointID < 1:
		return Usagef("--endpoint must be an endpoint's numeric id from petstore webhooks list")
	case f.Failed && len(rest) > 0:
		return Usagef("webhooks resend takes one EVENT_ID or --failed, not both")
	case !f.Failed && len(rest) != 1:
		return Usagef("webhooks resend takes one EVENT_ID (msg_..., from petstore webhooks deliveries) or --failed")
	case !f.Failed && !strings.HasPrefix(rest[0], "msg_"):
		return Usagef("EVENT_ID must be an event's id, msg_..., from petstore webhooks deliveries, not %q", rest[0])
	}
	if !f.Failed {
		f.EventID = rest[0]
	}
	return c.withStore(ctx, false, func(db store.Storage) error {
		f.Env = c.db.Env
		n, err := db.ResendWebhookDeliveries(ctx, f, time.Now())
		if err != nil {
			return fmt.Errorf("resend webhook deliveries: %w", err)
		}
		if n == 0 && f.EventID != "" {
			return fmt.Errorf("no delivery of event %s (see petstore webhooks deliveries)", f.EventID)
		}
		fmt.Fprintf(stdout, "queued %d deliveries again; a running server sends them\n", n)
		return nil
	})
}
