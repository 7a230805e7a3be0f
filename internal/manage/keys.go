package manage

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"petstore/internal/domain"
	"petstore/internal/limits"
)

// CreateKey stores a new key on terms (its environment, name, plan,
// figures, scopes and expiry; a zero ExpiresAt never expires), made by
// actor, and returns it with its token, which exists only here: the
// database keeps its hash.
func CreateKey(ctx context.Context, store domain.KeyStore, terms domain.Key, actor string) (domain.Key, string, error) {
	k, token := NewAPIKey(terms)
	k, err := store.CreateKey(ctx, k, actor)
	return k, token, err
}

// NewAPIKey is a new token for a key on terms, and the record of it that is
// stored: the token's hash, never the token.
func NewAPIKey(terms domain.Key) (domain.Key, string) {
	token := domain.NewKeyToken(terms.Env)
	hash := domain.HashKey(token)
	terms.Hash = hash[:]
	return terms, token
}

// ExpiresOf reads an expiry given as field (--expires, expires): an RFC
// 3339 time or a duration from now, which must end after now, rounded up
// to a whole second. A refusal is invalid_request naming field, and every
// form it takes: never too, when it is not "".
func ExpiresOf(field, s, never string, now time.Time) (time.Time, error) {
	want := "an RFC 3339 time (2027-01-31T00:00:00Z) or a duration from now (90d, 12h, 30m)"
	if never != "" {
		want = "an RFC 3339 time (2027-01-31T00:00:00Z), a duration from now (90d, 12h, 30m) or " + never
	}
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		d, err := domain.ParseLifetime(s)
		if err != nil {
			return time.Time{}, domain.Invalid("%s must be %s, not %q", field, want, s)
		}
		if d <= 0 {
			return time.Time{}, domain.Invalid("%s must be a duration above zero, not %q", field, s)
		}
		at = now.Add(d)
	}
	at = domain.CeilSecond(at).UTC()
	if !at.After(now) {
		return time.Time{}, domain.Invalid("%s %s is not in the future", field, s)
	}
	return at, nil
}

// OverlapOf reads the overlap of a key's roll or a webhook secret's
// rotation given as field: a duration of 0 or more. A refusal is
// invalid_request naming field and saying what 0 does (atZero).
func OverlapOf(field, s, atZero string) (time.Duration, error) {
	d, err := domain.ParseLifetime(s)
	if err != nil || d < 0 {
		return 0, domain.Invalid("%s must be a duration of 0 or more (24h, 30m, 7d; %s), not %q", field, atZero, s)
	}
	return d, nil
}

// What an overlap of 0 does, for the refusal of a bad overlap.
const (
	KeyOverlapAtZero    = "0 stops the old key at once"
	SecretOverlapAtZero = "0 drops the old secret at once"
)

// CheckLabel is checkName for the name of a key or an admin token, which
// is shown in lists and kept in the audit trail: it must not be where the
// text of a key or token ends up either. A refusal is invalid_request.
func CheckLabel(field, name string) error {
	if err := domain.CheckName(field, name); err != nil {
		return domain.Invalid("%s", err.Error())
	}
	return refuseSecret(field, name)
}

// ListedKey is a key as keys list shows it (--json: these fields).
type ListedKey struct {
	ID        int64      `json:"id"`
	Name      string     `json:"name"`
	Plan      string     `json:"plan"`
	PerMinute int64      `json:"perMinute"`
	PerDay    int64      `json:"perDay"`
	Created   time.Time  `json:"created"`
	Revoked   *time.Time `json:"revoked"`
	Expires   *time.Time `json:"expires"`
	LastUsed  *time.Time `json:"lastUsed"` // to the minute
	// Today counts the requests of this UTC day against the key's budget,
	// which the keys of one roll share.
	Today      int64    `json:"today"`
	State      string   `json:"state"` // active, rolled, expired or revoked
	RolledTo   *int64   `json:"rolledTo"`
	RolledFrom *int64   `json:"rolledFrom"`
	Scopes     []string `json:"scopes"`
	ExternalID *string  `json:"externalId"` // a portal's reference (admin API); null when none
}

// Key states in keys list.
const (
	stateActive  = "active"
	stateRolled  = "rolled" // still working until it expires, the end of the roll's overlap
	stateExpired = "expired"
	StateRevoked = "revoked"
)

// ListedKeys are the keys of env among those shown, of all the keys there
// are, as keys list shows them at now, with today's usage of each budget.
// Another environment's key is never shown.
func ListedKeys(ctx context.Context, store domain.UsageStore, env string, all, shown []domain.Key, now time.Time) ([]ListedKey, error) {
	today := now.UTC().Format(time.DateOnly)
	usage := make(map[int64]int64)
	rolledFrom := make(map[int64]int64)
	for _, k := range all {
		if k.RolledTo != 0 && k.Env == env {
			rolledFrom[k.RolledTo] = k.ID
		}
	}
	rows := make([]ListedKey, 0, len(shown))
	for _, k := range shown {
		if k.Env != env {
			continue
		}
		if _, ok := usage[k.BudgetID]; !ok {
			n, err := store.Usage(ctx, k.BudgetID, today)
			if err != nil {
				return nil, err
			}
			usage[k.BudgetID] = n
		}
		row := ListedKey{
			ID: k.ID, Name: k.Name, Plan: k.Plan, PerMinute: k.PerMinute, PerDay: k.PerDay, Created: k.CreatedAt,
			Revoked: domain.TimeOrNil(k.RevokedAt), Expires: domain.TimeOrNil(k.ExpiresAt), LastUsed: domain.TimeOrNil(k.LastUsedAt),
			Today: usage[k.BudgetID], State: stateActive, Scopes: k.Scopes.Names(),
		}
		if k.ExternalID != "" {
			row.ExternalID = &k.ExternalID
		}
		switch {
		case !k.RevokedAt.IsZero():
			row.State = StateRevoked
		case k.ExpiredAt(now):
			row.State = stateExpired
		case k.RolledTo != 0:
			row.State = stateRolled
		}
		if k.RolledTo != 0 {
			row.RolledTo = &k.RolledTo
		}
		if from, ok := rolledFrom[k.ID]; ok {
			row.RolledFrom = &from
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// maxExternalIDLen bounds an externalId, in characters.
const maxExternalIDLen = 255

// CheckText: field is 1 to 255 printable characters of valid UTF-8, as an
// externalId and the keys' search q are.
func CheckText(field, s string) error {
	if s == "" || !utf8.ValidString(s) || utf8.RuneCountInString(s) > maxExternalIDLen ||
		strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return domain.Invalid("%s must be 1 to %d printable characters", field, maxExternalIDLen)
	}
	return nil
}

// CheckExternalID is the rule of a key's externalId given as field
// (externalId, --external-id): CheckText's, without U+FFFD (where
// encoding/json put bytes that were not UTF-8), and never the text of a key
// or token (refuseSecret). A refusal is invalid_request.
func CheckExternalID(field, id string) error {
	if CheckText(field, id) != nil || strings.ContainsRune(id, utf8.RuneError) {
		return domain.Invalid("%s must be 1 to %d printable characters of valid UTF-8 (no invalid bytes, lone surrogates or U+FFFD)", field, maxExternalIDLen)
	}
	return refuseSecret(field, id)
}

// FindKey is key id of env, with every key of env; an unknown id is
// not_found, and so is the id of another environment's key: the admin API
// and the commands of one environment never see the other's keys, even on
// a database they share.
func FindKey(ctx context.Context, store KeyLister, env string, id int64) (domain.Key, []domain.Key, error) {
	all, err := EnvKeys(ctx, store, env)
	if err != nil {
		return domain.Key{}, nil, err
	}
	i := slices.IndexFunc(all, func(k domain.Key) bool { return k.ID == id })
	if i < 0 {
		return domain.Key{}, nil, notFoundKey(id)
	}
	return all[i], all, nil
}

func notFoundKey(id int64) error { return domain.NotFound("no API key has id %d", id) }

// KeyLister lists every key, as FindKey and EnvKeys read them.
type KeyLister interface {
	Keys(ctx context.Context) ([]domain.Key, error)
}

// EnvKeys are the keys of env, revoked ones too, oldest first.
func EnvKeys(ctx context.Context, store KeyLister, env string) ([]domain.Key, error) {
	all, err := store.Keys(ctx)
	if err != nil {
		return nil, err
	}
	keys := make([]domain.Key, 0, len(all))
	for _, k := range all {
		if k.Env == env {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// UpdateKey changes key id of env by change, as one change with its
// event; a key of another environment is not_found, checked in the
// change's own transaction.
func UpdateKey(ctx context.Context, store domain.KeyStore, env string, id int64, change func(domain.Key) (domain.Key, error),
	actor string) (domain.Key, error) {
	_, after, err := store.UpdateKey(ctx, id, func(k domain.Key) (domain.Key, error) {
		if k.Env != env {
			return k, notFoundKey(id)
		}
		return change(k)
	}, actor)
	return after, err
}

// RevokeKey revokes key id of env (revoked is false when it was already);
// a key of another environment is not_found. A key never changes its
// environment, so the look first holds for the change.
func RevokeKey(ctx context.Context, store domain.KeyStore, env string, id int64, actor string) (revoked bool, err error) {
	if _, _, err := FindKey(ctx, store, env, id); err != nil {
		return false, err
	}
	return store.RevokeKey(ctx, id, actor)
}

// RollKey replaces key id of env by a new key of env, made here, with the
// old one working on for overlap, and returns both and the new key's
// token. A key of another environment is not_found, and nothing is made.
func RollKey(ctx context.Context, store domain.KeyStore, env string, id int64, overlap time.Duration, actor string) (old, rolled domain.Key, token string, err error) {
	if _, _, err := FindKey(ctx, store, env, id); err != nil {
		return old, rolled, "", err
	}
	k, token := NewAPIKey(domain.Key{Env: env})
	old, rolled, err = store.RollKey(ctx, id, k.Hash, overlap, actor)
	return old, rolled, token, err
}

// Listed is each of items as show shows it, for --json and the admin API.
func Listed[T, S any](items []T, show func(T) S) []S {
	rows := make([]S, len(items))
	for i, item := range items {
		rows[i] = show(item)
	}
	return rows
}

// ListedBan is a ban as bans list --json and GET /admin/v1/bans show it.
type ListedBan struct {
	Subject string    `json:"subject"`
	Since   time.Time `json:"since"`
	Until   time.Time `json:"until"`
}

// EnvBans are the bans in force that env sees: an address's, which every
// server applies whatever its environment, and those of env's keys.
func EnvBans(ctx context.Context, store interface {
	KeyLister
	Bans(ctx context.Context) ([]domain.Ban, error)
}, env string) ([]domain.Ban, error) {
	bans, err := store.Bans(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := EnvKeys(ctx, store, env)
	if err != nil {
		return nil, err
	}
	ours := make(map[int64]bool, len(keys))
	for _, k := range keys {
		ours[k.ID] = true
	}
	return slices.DeleteFunc(bans, func(b domain.Ban) bool { return b.Subject.KeyID != 0 && !ours[b.Subject.KeyID] }), nil
}

func ListedBans(bans []domain.Ban) []ListedBan {
	return Listed(bans, func(b domain.Ban) ListedBan {
		return ListedBan{Subject: b.Subject.String(), Since: b.Since, Until: b.Until}
	})
}

// UsageDays reads how many days a usage report covers, given as field: 1
// to maxUsageDays.
func UsageDays(field, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxUsageDays || !domain.IsDigits(s) {
		return 0, domain.Invalid("%s must be an integer from 1 to %d", field, maxUsageDays)
	}
	return n, nil
}

// KeyUsage is the usage history of key id's budget over the days days
// ending today: one row a day, oldest first. An unknown id, or a key of
// another environment than env, is not_found.
func KeyUsage(ctx context.Context, store interface {
	KeyLister
	UsageHistory(ctx context.Context, budgetID int64, from string) ([]domain.UsageDay, error)
}, env string, id int64, days int, now time.Time) ([]domain.UsageDay, error) {
	k, _, err := FindKey(ctx, store, env, id)
	if err != nil {
		return nil, err
	}
	first := limits.UnixDay(now) - int64(days-1)
	history, err := store.UsageHistory(ctx, k.BudgetID, limits.DayString(first))
	if err != nil {
		return nil, err
	}
	return usageWindow(k.BudgetID, history, first, days), nil
}

const (
	UsageHistoryDays       = 400 // days kept
	maxUsageDays           = 400 // the most a report asks for: those kept
	DefaultUsageDays       = 30
	UsageHistoryPruneEvery = time.Hour
)

// usageWindow is the days of a report of days days from the Unix day first,
// oldest first: one row each, zeros where history has none.
func usageWindow(budgetID int64, history []domain.UsageDay, first int64, days int) []domain.UsageDay {
	byDay := make(map[string]domain.UsageDay, len(history))
	for _, h := range history {
		byDay[h.Day] = h
	}
	rows := make([]domain.UsageDay, days)
	for i := range rows {
		day := limits.DayString(first + int64(i))
		row, ok := byDay[day]
		if !ok {
			row = domain.UsageDay{BudgetID: budgetID, Day: day}
		}
		rows[i] = row
	}
	return rows
}

// UsageHistoryCutoff is the first day the history keeps at now.
func UsageHistoryCutoff(now time.Time) string {
	return limits.DayString(limits.UnixDay(now) - UsageHistoryDays + 1)
}
