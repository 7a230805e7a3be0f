package cli

import (
	"context"
	"errors"
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
	var events []string
	c.fs.Func("events", "the event types the endpoint takes, comma-separated or repeated: "+strings.Join(domain.WebhookEventTypes, ", ")+" (default all)",
		func(v string) error {
			events = append(events, v)
			return nil
		})
	rest, err := c.parseArgs(args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return Usagef("webhooks add takes one URL, the endpoint's http or https address")
	}
	terms, err := manage.NewEndpointTerms(rest[0], events)
	if err != nil {
		return Usagef("webhooks add: %s", errorMessage(err))
	}
	if problem := webhook.NewAddressGuard(false).URLProblem(ctx, terms.URL); problem != "" {
		fmt.Fprintf(stderr, "warning: the %s; added all the same, as this command cannot know how the servers run.\n", problem)
	}
	store, err := c.db.open(ctx, true)
	if err != nil {
		return err
	}
	defer store.Close()
	e, err := store.AddWebhookEndpoint(ctx, terms, CommandActor(), c.db.Env)
	if err != nil {
		return fmt.Errorf("add webhook endpoint: %w", err)
	}
	fmt.Fprintf(stderr, "added webhook endpoint %d for %s (%s) in %s.\nIts id, then its signing secret, shown only now:\n",
		e.ID, domain.ShownURL(e.URL), eventsShown(e.Events), c.db.Shown())
	fmt.Fprintln(stdout, e.ID)
	fmt.Fprintln(stdout, e.Secret)
	return nil
}

func WebhooksList(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	read := func(ctx context.Context, store store.Storage) ([]domain.ListedEndpoint, error) {
		endpoints, err := store.WebhookEndpoints(ctx)
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

// errorMessage is err's message as a user reads it: a domain error's own.
func errorMessage(err error) string {
	var e *domain.Error
	if errors.As(err, &e) && e.Kind != domain.KindUnavailable {
		return e.Message
	}
	return err.Error()
}

// endpointCommand is the preamble of a command on one endpoint: its flags
// (besides --env and --db, those flags adds, whose check runs after
// parsing), its ID argument, the database and the environment.
func endpointCommand(ctx context.Context, name string, args []string, getenv func(string) string, stdout io.Writer,
	flags func(*command) (check func() error)) (_ int64, _ store.Storage, env string, _ error) {
	c := newCommand(name, getenv, stdout).withDB()
	check := func() error { return nil }
	if flags != nil {
		check = flags(c)
	}
	rest, err := c.parseArgs(args)
	if err == nil {
		err = check()
	}
	if err != nil {
		return 0, nil, "", err
	}
	if len(rest) != 1 {
		return 0, nil, "", Usagef("%s takes one ID, an endpoint's id from petstore webhooks list", name)
	}
	id, err := strconv.ParseInt(rest[0], 10, 64)
	if err != nil || id < 1 {
		return 0, nil, "", Usagef("ID must be an endpoint's numeric id from petstore webhooks list, not %q", rest[0])
	}
	store, err := c.db.open(ctx, false)
	return id, store, c.db.Env, err
}

// endpointError is a store's refusal about endpoint id as one line.
func endpointError(verb string, id int64, err error) error {
	var e *domain.Error
	if errors.As(err, &e) && e.Kind != domain.KindUnavailable {
		return errors.New(e.Message)
	}
	return fmt.Errorf("%s webhook endpoint %d: %w", verb, id, err)
}

func WebhooksRemove(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	id, store, env, err := endpointCommand(ctx, "webhooks remove", args, getenv, stdout, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.RemoveWebhookEndpoint(ctx, id, CommandActor(), env); err != nil {
		return endpointError("remove", id, err)
	}
	fmt.Fprintf(stdout, "removed webhook endpoint %d and its deliveries\n", id)
	return nil
}

func WebhooksRotate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var overlapFlag string
	var overlap time.Duration
	id, store, env, err := endpointCommand(ctx, "webhooks rotate", args, getenv, stdout, func(c *command) func() error {
		c.fs.StringVar(&overlapFlag, "overlap", "24h", "how long the old secret signs beside the new one: a duration (24h, 30m, 7d); 0 drops it at once")
		return func() (err error) {
			overlap, err = parseOverlap(overlapFlag, manage.SecretOverlapAtZero)
			return err
		}
	})
	if err != nil {
		return err
	}
	defer store.Close()
	e, err := store.RotateWebhookSecret(ctx, id, webhook.NewSecret(), overlap, CommandActor(), env)
	if err != nil {
		return endpointError("rotate the secret of", id, err)
	}
	until := "now"
	if overlap > 0 {
		until = e.PreviousUntil.Format(time.RFC3339)
	}
	fmt.Fprintf(stderr, "rotated the secret of webhook endpoint %d; the old one signs beside it until %s.\nThe new secret is shown only now:\n", id, until)
	fmt.Fprintln(stdout, e.Secret)
	return nil
}

func WebhooksEnable(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	id, store, env, err := endpointCommand(ctx, "webhooks enable", args, getenv, stdout, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	if _, err := store.EnableWebhookEndpoint(ctx, id, CommandActor(), env); err != nil {
		return endpointError("enable", id, err)
	}
	fmt.Fprintf(stdout, "webhook endpoint %d is enabled; its waiting deliveries go out again\n", id)
	return nil
}

func WebhooksTest(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	id, store, _, err := endpointCommand(ctx, "webhooks test", args, getenv, stdout, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	ev, err := manage.QueueTest(ctx, store, id, CommandActor(), time.Now())
	if err != nil {
		return endpointError("test", id, err)
	}
	fmt.Fprintf(stderr, "queued a webhook.test event for endpoint %d; a running server delivers it (see petstore webhooks deliveries). Its id:\n", id)
	fmt.Fprintln(stdout, ev.ID)
	return nil
}

func WebhooksDeliveries(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
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
	store, err := c.db.open(ctx, false)
	if err != nil {
		return err
	}
	defer store.Close()
	deliveries, err := store.WebhookDeliveries(ctx, f)
	if err != nil {
		return fmt.Errorf("list webhook deliveries: %w", err)
	}
	rows := manage.Listed(deliveries, domain.WebhookDelivery.Listed)
	const header = "EVENT\tTYPE\tENDPOINT\tAT\tSTATE\tATTEMPTS\tNEXT\tLAST_STATUS\tLAST_ERROR"
	return writeRows(stdout, *asJSON, rows, header, func(w io.Writer, d domain.ListedDelivery) {
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
	})
}

func WebhooksResend(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
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
	store, err := c.db.open(ctx, false)
	if err != nil {
		return err
	}
	defer store.Close()
	n, err := store.ResendWebhookDeliveries(ctx, f, time.Now())
	if err != nil {
		return fmt.Errorf("resend webhook deliveries: %w", err)
	}
	if n == 0 && f.EventID != "" {
		return fmt.Errorf("no delivery of event %s (see petstore webhooks deliveries)", f.EventID)
	}
	fmt.Fprintf(stdout, "queued %d deliveries again; a running server sends them\n", n)
	return nil
}
