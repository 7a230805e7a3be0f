package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"petstore/internal/domain"
	"petstore/internal/manage"
	"petstore/internal/store"
)

func KeysCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c := newCommand("keys create", getenv, stdout).withDB()
	var plan, name, expiresFlag string
	var rpm, rpd int64
	fs := c.fs
	fs.StringVar(&plan, "plan", "", "plan: free, pro, business or enterprise (required)")
	fs.StringVar(&name, "name", "", "a name to recognise the key by in keys list")
	fs.Int64Var(&rpm, "rpm", 0, "requests per minute (enterprise only, required there)")
	fs.Int64Var(&rpd, "rpd", 0, "requests per day (enterprise only, required there)")
	fs.StringVar(&expiresFlag, "expires", "", "when the key stops working: an RFC 3339 time (2027-01-31T00:00:00Z) or a duration from now (90d, 12h, 30m); default never")
	externalID := externalIDFlag(fs, "your own reference for the key (a customer, an account), held by one key at a time that is not revoked")
	scopeFlags := repeatedFlag(fs, "scope", "what the key may do: pets:read (list and read pets, GET /v1/rate_limit), pets:write (add pets); repeat the flag or separate scopes by commas (default both)")
	if err := c.parse(args); err != nil {
		return err
	}
	plan = domain.PlanName(plan)
	lim, err := asUsage(domain.LimitsOf(plan, rpm, rpd, domain.FlagFields))
	if err != nil {
		return err
	}
	scopes, err := parseScopes(*scopeFlags)
	if err != nil {
		return err
	}
	if err := manage.CheckLabel("--name", name); err != nil {
		return Usagef("%v", err)
	}
	if err := checkExternalID(fs, *externalID, false); err != nil {
		return err
	}
	var expires time.Time
	if expiresFlag != "" || given(fs, "expires") {
		if expires, err = asUsage(manage.ExpiresOf("--expires", expiresFlag, "", time.Now())); err != nil {
			return err
		}
	}
	store, err := c.db.create(ctx, stderr)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := refuseSecrets(ctx, store, &name, externalID); err != nil {
		return err
	}
	k, token, err := manage.CreateKey(ctx, store, domain.Key{
		Env: c.db.Env, Name: name, Plan: plan, PerMinute: lim.PerMinute, PerDay: lim.PerDay, Scopes: scopes, ExpiresAt: expires,
		ExternalID: *externalID,
	}, CommandActor())
	if err != nil {
		return fmt.Errorf("create key: %w", err)
	}
	fmt.Fprintf(stderr, "created key %d (%s plan, %d/minute, %d/day, %s%s) in %s; it is shown only now:\n",
		k.ID, plan, lim.PerMinute, lim.PerDay, k.Scopes.Described(), expiryNote(k.ExpiresAt), c.db.Shown())
	fmt.Fprintln(stdout, token)
	return nil
}

// externalIDFlag is --external-id of keys create and keys update.
func externalIDFlag(fs *flag.FlagSet, usage string) *string {
	return fs.String("external-id", "", usage+": 1 to 255 printable characters, never a key or token")
}

// checkExternalID refuses a --external-id id that breaks the rule of an
// externalId (exit status 2, naming the flag); with clear, "" is allowed:
// it removes the one held.
func checkExternalID(fs *flag.FlagSet, id string, clear bool) error {
	if !given(fs, "external-id") || (clear && id == "") {
		return nil
	}
	if err := manage.CheckExternalID("--external-id", id); err != nil {
		return Usagef("%v", err)
	}
	return nil
}

// refuseSecrets refuses, as a usage error (exit status 2), a --name or
// --external-id (nil: not given) that holds a secret of store's database.
func refuseSecrets(ctx context.Context, db manage.SecretStore, name, externalID *string) error {
	err := manage.RefuseSecrets(ctx, db, manage.FlagTexts, name, externalID)
	if e := (*domain.Error)(nil); errors.As(err, &e) && e.Kind == domain.KindInvalid {
		return Usagef("%v", err)
	}
	return err
}

// parseScopes reads the --scope flags of a key. None given: every scope.
func parseScopes(flags []string) (domain.ScopeSet, error) {
	return parseScopeFlags(flags, domain.AllScopes, func(flag, name string) error {
		if name == "" {
			return Usagef("--scope %q names no scope: give pets:read, pets:write or both (pets:read,pets:write)", flag)
		}
		return Usagef("--scope: unknown scope %q; the scopes are %s", name, domain.KnownScopes)
	})
}

// expiryNote is ", expires at TIME" for a key that expires.
func expiryNote(expires time.Time) string {
	if expires.IsZero() {
		return ""
	}
	return ", expires at " + expires.Format(time.RFC3339)
}

func KeysRoll(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c := newCommand("keys roll", getenv, stdout).withDB()
	overlapFlag := c.fs.String("overlap", "24h", "how long the old key keeps working beside the new one: a duration (24h, 30m, 7d); 0 stops it at once")
	id, err := c.parseKeyID(args)
	if err != nil {
		return err
	}
	overlap, err := asUsage(manage.OverlapOf("--overlap", *overlapFlag, manage.KeyOverlapAtZero))
	if err != nil {
		return err
	}
	return c.withStore(ctx, false, func(db store.Storage) error {
		// Only a key of --env's environment, and the new key is of it.
		old, rolled, token, err := manage.RollKey(ctx, db, c.db.Env, id, overlap, CommandActor())
		if err != nil {
			return commandError("roll key", id, err)
		}
		fmt.Fprintf(stderr, "rolled key %d to key %d (%s plan, %d/minute, %d/day%s) in %s; key %d stops at %s.\nThe new key is shown only now:\n",
			old.ID, rolled.ID, rolled.Plan, rolled.PerMinute, rolled.PerDay, expiryNote(rolled.ExpiresAt), c.db.Shown(),
			old.ID, old.ExpiresAt.Format(time.RFC3339))
		fmt.Fprintln(stdout, token)
		return nil
	})
}

// parseKeyID is parseArgs for a command on one key: it returns its KEY_ID.
func (c *command) parseKeyID(args []string) (int64, error) {
	arg, err := c.parseOne(args, "KEY_ID (see petstore keys list)")
	if err != nil {
		return 0, err
	}
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || id < 1 {
		return 0, Usagef("KEY_ID must be a key's numeric id from petstore keys list, not %q", arg)
	}
	return id, nil
}

// commandError is a store's refusal of what id (key 7, webhook endpoint
// 3) as one line: its own message when it is one a user should read (no
// such key, a key that cannot be rolled).
func commandError(what string, id int64, err error) error {
	var e *domain.Error
	if errors.As(err, &e) && e.Kind != domain.KindUnavailable {
		return errors.New(e.Message)
	}
	return fmt.Errorf("%s %d: %w", what, id, err)
}

func KeysList(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	c := newCommand("keys list", getenv, stdout).withDB()
	var idle, expiring string
	asJSON := c.jsonFlag("a table")
	c.fs.StringVar(&idle, "idle", "", "only keys not used for at least this long, a duration (30d, 12h); a key never used counts from its creation")
	c.fs.StringVar(&expiring, "expiring", "", "only keys not yet expired that expire within this long, a duration (7d, 24h)")
	if err := c.parse(args); err != nil {
		return err
	}
	var filter domain.KeyFilter
	var err error
	if filter.Idle, err = domain.ReportSpan("--idle", idle, given(c.fs, "idle")); err != nil {
		return Usagef("%s", err.Error())
	}
	if filter.Expiring, err = domain.ReportSpan("--expiring", expiring, given(c.fs, "expiring")); err != nil {
		return Usagef("%s", err.Error())
	}
	return c.withStore(ctx, false, func(db store.Storage) error {
		keys, err := manage.EnvKeys(ctx, db, c.db.Env)
		if err != nil {
			return fmt.Errorf("list keys: %w", err)
		}
		now := time.Now()
		rows, err := manage.ListedKeys(ctx, db, c.db.Env, keys, filter.Pick(keys, now), now)
		if err != nil {
			return fmt.Errorf("list keys: %w", err)
		}
		const header = "ID\tNAME\tPLAN\tPER_MINUTE\tPER_DAY\tCREATED\tREVOKED\tEXPIRES\tLAST_USED\tTODAY\tSTATE\tSCOPES"
		return writeRows(stdout, *asJSON, rows, header, keyLine)
	})
}

func keyLine(w io.Writer, k manage.ListedKey) {
	name := k.Name
	switch {
	case name == "":
		name = "-"
	case domain.CheckName("", name) != nil:
		// made before names were checked: shown quoted, never raw
		// into the operator's terminal
		name = strconv.Quote(name)
	}
	scopes := strings.Join(k.Scopes, ",")
	if scopes == "" {
		scopes = "-"
	}
	fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", k.ID, name, k.Plan, k.PerMinute, k.PerDay,
		k.Created.Format(time.RFC3339), timeOrDash(k.Revoked), timeOrDash(k.Expires), timeOrDash(k.LastUsed), k.Today, k.State, scopes)
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func KeysRevoke(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	c := newCommand("keys revoke", getenv, stdout).withDB()
	id, err := c.parseKeyID(args)
	if err != nil {
		return err
	}
	return c.withStore(ctx, false, func(db store.Storage) error {
		revoked, err := manage.RevokeKey(ctx, db, c.db.Env, id, CommandActor())
		if err != nil {
			return commandError("revoke key", id, err)
		}
		sayRevoked(stdout, "key", id, revoked, "running servers refuse it within a second")
		return nil
	})
}

// sayRevoked tells that what id (key 7, admin token 2) is revoked now, and
// what that does, or that it was revoked already.
func sayRevoked(w io.Writer, what string, id int64, revoked bool, effect string) {
	if !revoked {
		fmt.Fprintf(w, "%s %d was revoked already; nothing changed\n", what, id)
		return
	}
	fmt.Fprintf(w, "revoked %s %d; %s\n", what, id, effect)
}

func KeysUpdate(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	c := newCommand("keys update", getenv, stdout).withDB()
	var u keyUpdate
	u.register(c.fs)
	id, err := c.parseKeyID(args)
	if err != nil {
		return err
	}
	now := time.Now()
	change, err := u.change(c.fs, now)
	if err != nil {
		return err
	}
	return c.withStore(ctx, false, func(db store.Storage) error {
		if err := refuseSecrets(ctx, db, change.Name, change.ExternalID); err != nil {
			return err
		}
		apply := func(k domain.Key) (domain.Key, error) { return change.Apply(k, now, domain.FlagFields) }
		after, err := manage.UpdateKey(ctx, db, c.db.Env, id, apply, CommandActor())
		if err != nil {
			return commandError("update key", id, err)
		}
		fmt.Fprintf(stdout, "updated key %d: %s plan, %d/minute, %d/day, %s%s; running servers apply it within a second\n",
			after.ID, after.Plan, after.PerMinute, after.PerDay, after.Scopes.Described(), expiryNote(after.ExpiresAt))
		return nil
	})
}

// keyUpdate holds the flags of keys update; each one given is a change.
type keyUpdate struct {
	plan, name, expires string
	rpm, rpd            int64
	scopes              *[]string
	externalID          *string
}

func (u *keyUpdate) register(fs *flag.FlagSet) {
	fs.StringVar(&u.plan, "plan", "", "the new plan: free, pro, business or enterprise (with --rpm and --rpd)")
	fs.Int64Var(&u.rpm, "rpm", 0, "new requests per minute (enterprise only)")
	fs.Int64Var(&u.rpd, "rpd", 0, "new requests per day (enterprise only)")
	fs.StringVar(&u.name, "name", "", "the new name")
	u.scopes = repeatedFlag(fs, "scope", "the new scopes: pets:read, pets:write; repeat the flag or separate scopes by commas")
	fs.StringVar(&u.expires, "expires", "", "when the key stops working: an RFC 3339 time or a duration from now (90d); never for no expiry")
	u.externalID = externalIDFlag(fs, "the new reference for the key (a customer, an account); \"\" removes it")
}

// change is the change the flags given on fs ask for, or the usage mistake
// in them.
func (u *keyUpdate) change(fs *flag.FlagSet, now time.Time) (domain.KeyChange, error) {
	var change domain.KeyChange
	if err := u.limitsChange(fs, &change); err != nil {
		return change, err
	}
	if given(fs, "name") {
		if err := manage.CheckLabel("--name", u.name); err != nil {
			return change, Usagef("%v", err)
		}
		change.Name = &u.name
	}
	if len(*u.scopes) > 0 {
		scopes, err := parseScopes(*u.scopes)
		if err != nil {
			return change, err
		}
		change.Scopes = &scopes
	}
	if given(fs, "expires") {
		var at time.Time
		if u.expires != "never" {
			var err error
			if at, err = asUsage(manage.ExpiresOf("--expires", u.expires, "never (no expiry)", now)); err != nil {
				return change, err
			}
		}
		change.Expires = &at
	}
	if given(fs, "external-id") {
		if err := checkExternalID(fs, *u.externalID, true); err != nil {
			return change, err
		}
		change.ExternalID = u.externalID
	}
	if change == (domain.KeyChange{}) {
		return change, Usagef("keys update changes nothing: give --plan, --rpm, --rpd, --name, --scope, --expires or --external-id")
	}
	return change, nil
}

// limitsChange puts the change of --plan, --rpm and --rpd in change.
func (u *keyUpdate) limitsChange(fs *flag.FlagSet, change *domain.KeyChange) error {
	if given(fs, "plan") {
		u.plan = domain.PlanName(u.plan)
		if !domain.KnownPlan(u.plan) {
			return Usagef("unknown plan %q: choose free, pro, business or enterprise", u.plan)
		}
		if u.plan != "enterprise" && (given(fs, "rpm") || given(fs, "rpd")) {
			return Usagef("--rpm and --rpd are for the enterprise plan only; %s has fixed limits", u.plan)
		}
		change.Plan = &u.plan
	}
	for _, f := range []struct {
		flag string
		v    *int64
		dst  **int64
	}{{"rpm", &u.rpm, &change.PerMinute}, {"rpd", &u.rpd, &change.PerDay}} {
		if given(fs, f.flag) {
			if *f.v < 1 {
				return Usagef("--%s must be 1 or more", f.flag)
			}
			if *f.v > domain.MaxLimit {
				return Usagef("--%s must be at most %d, not %d", f.flag, domain.MaxLimit, *f.v)
			}
			*f.dst = f.v
		}
	}
	return nil
}

// UsageReport is petstore usage: a key's usage history, a day a line or a
// JSON array, oldest first.
func UsageReport(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
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
	return c.withStore(ctx, false, func(db store.Storage) error {
		rows, err := manage.KeyUsage(ctx, db, c.db.Env, keyID, days, time.Now())
		if err != nil {
			return commandError("read the usage of key", keyID, err)
		}
		return writeRows(stdout, *asJSON, rows, "DAY\tALLOWED\tRATE_LIMITED\tQUOTA_EXCEEDED\tBANNED\tFORBIDDEN", func(w io.Writer, r domain.UsageDay) {
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\n", r.Day, r.Allowed, r.RateLimited, r.QuotaExceeded, r.Banned, r.Forbidden)
		})
	})
}
