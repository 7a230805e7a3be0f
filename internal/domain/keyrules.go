// The rules of a key's life, format, name and scopes that hold whoever
// changes it (the CLI, the admin API) and whichever engine stores it.

package domain

import (
	"crypto/sha256"
	"fmt"
	"hash/crc32"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Rollable refuses to roll a key that no longer works, or that was rolled
// already (its successor is the one to roll).
func Rollable(k Key, now time.Time) error {
	switch {
	case !k.RevokedAt.IsZero():
		return Invalid("key %d was revoked at %s: a revoked key cannot be rolled; create a new one",
			k.ID, k.RevokedAt.Format(time.RFC3339))
	case k.ExpiredAt(now):
		return Invalid("key %d expired at %s: an expired key cannot be rolled; create a new one",
			k.ID, k.ExpiresAt.Format(time.RFC3339))
	case k.RolledTo != 0:
		return Invalid("key %d was rolled to key %d already: roll key %d instead", k.ID, k.RolledTo, k.RolledTo)
	}
	return nil
}

// Successor is the key that replaces old in a roll: the same name, plan,
// figures, environment, scopes and expiry (a roll changes the secret, not
// the terms), spending old's rate-limit budget.
func Successor(old Key, hash []byte) Key {
	return Key{
		Hash: hash, Name: old.Name, Plan: old.Plan, PerMinute: old.PerMinute, PerDay: old.PerDay, Env: old.Env,
		Scopes: old.Scopes, ExpiresAt: old.ExpiresAt, BudgetID: old.BudgetID,
	}
}

// RollEnd is when the old key of a roll stops: overlap from now, rounded up
// to a second, or at once for no overlap; its own expiry when that is sooner.
func RollEnd(old Key, now time.Time, overlap time.Duration) time.Time {
	end := now.UTC().Truncate(time.Second)
	if overlap > 0 {
		end = CeilSecond(now.Add(overlap)).UTC()
	}
	if !old.ExpiresAt.IsZero() && old.ExpiresAt.Before(end) {
		return old.ExpiresAt
	}
	return end
}

// keyFields name the fields of a key's terms in messages: the flags of the
// commands, or the JSON names of the admin API.
type keyFields struct{ plan, perMinute, perDay string }

var (
	FlagFields = keyFields{"--plan", "--rpm", "--rpd"}
	JSONFields = keyFields{"plan", "perMinute", "perDay"}
)

// MaxLimit caps an enterprise key's requests per minute and per day (README.md,
// "Plans and Limits"): far above any plan, and low enough that every figure
// the limiters work out from it (tokens in 1/60000 parts, in a double in
// Redis's script) stays exact and every header stays a count of 0 or more.
const MaxLimit = 1_000_000_000

// LimitsOf are the Limits of plan: its published figures, or for
// enterprise perMinute and perDay, which only enterprise takes (0: not
// given). A refusal is invalid_request naming the field by f.
func LimitsOf(plan string, perMinute, perDay int64, f keyFields) (Limits, error) {
	if plan == "enterprise" {
		switch {
		case perMinute < 1 || perDay < 1:
			return Limits{}, Invalid("the enterprise plan needs %s and %s, each 1 or more", f.perMinute, f.perDay)
		case perMinute > MaxLimit:
			return Limits{}, Invalid("%s must be at most %d, not %d", f.perMinute, MaxLimit, perMinute)
		case perDay > MaxLimit:
			return Limits{}, Invalid("%s must be at most %d, not %d", f.perDay, MaxLimit, perDay)
		}
		return Limits{PerMinute: perMinute, PerDay: perDay}, nil
	}
	lim, ok := Plans[plan]
	switch {
	case plan == "":
		return Limits{}, Invalid("%s is required: free, pro, business or enterprise", f.plan)
	case !ok:
		return Limits{}, Invalid("unknown plan %q: choose free, pro, business or enterprise", plan)
	case perMinute != 0 || perDay != 0:
		return Limits{}, Invalid("%s and %s are for the enterprise plan only; %s has fixed limits", f.perMinute, f.perDay, plan)
	}
	return lim, nil
}

// PlanName is the plan a client or operator wrote, in any case (the
// README's table writes "Pro"), as it is kept.
func PlanName(written string) string { return strings.ToLower(written) }

func KnownPlan(plan string) bool {
	_, ok := Plans[plan]
	return ok || plan == "enterprise"
}

// KeyChange is a change of a key in place (PATCH /admin/v1/keys/{id}, keys
// update): each field set is changed, the others kept.
type KeyChange struct {
	Plan              *string
	PerMinute, PerDay *int64
	Name              *string
	Scopes            *ScopeSet
	Expires           *time.Time // the zero time: never
	ExternalID        *string    // "": none
}

// Apply is k changed at now; a revoked key, or terms that break the rules
// of keys create, are refused, naming the field by f.
func (c KeyChange) Apply(k Key, now time.Time, f keyFields) (Key, error) {
	if !k.RevokedAt.IsZero() {
		return k, Invalid("key %d was revoked at %s: a revoked key cannot be changed", k.ID, k.RevokedAt.Format(time.RFC3339))
	}
	plan := k.Plan
	setIfGiven(&plan, c.Plan)
	var perMinute, perDay int64
	if plan == "enterprise" {
		// An enterprise key keeps its figures unless given new ones.
		if k.Plan == "enterprise" {
			perMinute, perDay = k.PerMinute, k.PerDay
		}
		setIfGiven(&perMinute, c.PerMinute)
		setIfGiven(&perDay, c.PerDay)
	} else if c.PerMinute != nil || c.PerDay != nil {
		return k, Invalid("%s and %s are for the enterprise plan only; %s has fixed limits", f.perMinute, f.perDay, plan)
	}
	lim, err := LimitsOf(plan, perMinute, perDay, f)
	if err != nil {
		return k, err
	}
	k.Plan, k.PerMinute, k.PerDay = plan, lim.PerMinute, lim.PerDay
	setIfGiven(&k.Name, c.Name)
	setIfGiven(&k.Scopes, c.Scopes)
	if c.Expires != nil {
		if !c.Expires.IsZero() && !c.Expires.After(now) {
			return k, Invalid("expires %s is not in the future", c.Expires.Format(time.RFC3339))
		}
		k.ExpiresAt = *c.Expires
	}
	setIfGiven(&k.ExternalID, c.ExternalID)
	return k, nil
}

func setIfGiven[T any](dst, given *T) {
	if given != nil {
		*dst = *given
	}
}

// KeyFilter picks the keys of a report (keys list --idle --expiring, GET
// /admin/v1/keys): each field set narrows it.
type KeyFilter struct {
	Plan       string
	Idle       time.Duration // not used for at least this long; a key never used counts from its creation
	Expiring   time.Duration // not yet expired, and expires within this long
	Revoked    *bool
	ExternalID string
	// Search: the name or the externalId holds it, in any case (the
	// admin API's q).
	Search string
}

func (f KeyFilter) Picks(k Key, now time.Time) bool {
	switch {
	case f.Plan != "" && k.Plan != f.Plan:
		return false
	case f.ExternalID != "" && k.ExternalID != f.ExternalID:
		return false
	case f.Search != "" && !containsFold(k.Name, f.Search) && !containsFold(k.ExternalID, f.Search):
		return false
	case f.Revoked != nil && *f.Revoked == k.RevokedAt.IsZero():
		return false
	case f.Expiring > 0 && (k.ExpiresAt.IsZero() || k.ExpiredAt(now) || k.ExpiresAt.After(now.Add(f.Expiring))):
		return false
	}
	if f.Idle > 0 {
		last := k.LastUsedAt
		if last.IsZero() {
			last = k.CreatedAt
		}
		if now.Sub(last) < f.Idle {
			return false
		}
	}
	return true
}

func (f KeyFilter) Pick(keys []Key, now time.Time) []Key {
	var picked []Key
	for _, k := range keys {
		if f.Picks(k, now) {
			picked = append(picked, k)
		}
	}
	return picked
}

// ReportSpan reads a duration of a report's filter (--idle, idle=): a
// duration above zero (30d, 12h); "" not given is none. A refusal is
// invalid_request naming field.
func ReportSpan(field, value string, given bool) (time.Duration, error) {
	if value == "" && !given {
		return 0, nil
	}
	d, err := ParseLifetime(value)
	if err != nil || d <= 0 || strings.TrimSpace(value) != value {
		return 0, Invalid("%s must be a duration above zero (30d, 7d, 12h), not %q", field, value)
	}
	return d, nil
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// API keys look like psk_live_<32 random base62 chars><6-char checksum>
// (psk_test_ on staging). The checksum is the CRC32 of everything before it,
// in base62: a mistyped or made-up key is refused without a database look-up,
// and secret scanners can tell a real leaked key from noise.
const (
	KeyRandomLen   = 32
	KeyChecksumLen = 6
	Base62         = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

var KeyPrefixes = map[string]string{"production": "psk_live_", "staging": "psk_test_"}

// AdminPrefixes begin admin tokens: the same shape as a key,
// another prefix, so that neither is ever taken for the other.
var AdminPrefixes = map[string]string{"production": "psa_live_", "staging": "psa_test_"}

func NewKeyToken(env string) string { return NewSecret(KeyPrefixes[env]) }

// NewSecret returns a fresh random secret that begins with prefix: a key,
// or an admin token.
func NewSecret(prefix string) string {
	b := make([]byte, 0, len(prefix)+KeyRandomLen+KeyChecksumLen)
	b = appendRandomBase62(append(b, prefix...), KeyRandomLen)
	return string(AppendChecksum(b, b))
}

func AppendChecksum(dst, body []byte) []byte {
	sum := crc32.ChecksumIEEE(body)
	var c [KeyChecksumLen]byte
	for i := KeyChecksumLen - 1; i >= 0; i-- {
		c[i] = Base62[sum%62]
		sum /= 62
	}
	return append(dst, c[:]...)
}

var IsBase62 = func() (table [256]bool) {
	for i := range len(Base62) {
		table[Base62[i]] = true
	}
	return table
}()

// HashKey is what the database keeps of a key or a token: its SHA-256.
func HashKey(token string) [sha256.Size]byte {
	// A key is longer than the 32 bytes Go converts a string into on the
	// stack: copy it into a larger stack buffer instead of the heap.
	var buf [64]byte
	return sha256.Sum256(append(buf[:0], token...))
}

// maxNameLen bounds a name (of a key, of an admin token), in characters.
const maxNameLen = 64

// hiddenCharacters are what a name may not hold: controls (C0 and C1, which
// can move a terminal's cursor or recolour it), format characters (bidi
// overrides, zero-width characters, the BOM, which make a name look like
// another) and the line and paragraph separators.
var hiddenCharacters = []*unicode.RangeTable{unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp}

// CheckName is the rule for a name a person gives something (field says
// where it came from, such as "--name"): printable text, valid UTF-8, at
// most 64 characters, so that keys list, the audit trail and a terminal
// show it as it is. The error names the rule; callers make it a usage
// error or a 400.
func CheckName(field, value string) error {
	const rule = "printable text of at most %d characters (valid UTF-8, no control, format or line-separator characters)"
	// encoding/json turns invalid UTF-8 and lone surrogates into U+FFFD
	// without a word, as /v1 refuses in a pet's name: refused alike.
	if !utf8.ValidString(value) || strings.ContainsRune(value, utf8.RuneError) {
		return fmt.Errorf("%s must be "+rule+": it is not valid UTF-8 (invalid bytes, a lone surrogate or U+FFFD)", field, maxNameLen)
	}
	if n := utf8.RuneCountInString(value); n > maxNameLen {
		return fmt.Errorf("%s must be "+rule+": it has %d", field, maxNameLen, n)
	}
	for _, r := range value {
		if unicode.IsOneOf(hiddenCharacters, r) {
			return fmt.Errorf("%s must be "+rule+": it holds %U", field, maxNameLen, r)
		}
	}
	return nil
}

// ScopeSet is what an API key may do, a bit for each scope. A restricted
// key (keys create --scope pets:read) holds fewer than all; a key made
// without --scope, or before scopes existed, holds all. As the need of an
// operation, the empty set means any valid key will do.
type ScopeSet uint8

const (
	ScopePetsRead  ScopeSet = 1 << iota // list and read pets, and the key's own rate limits
	ScopePetsWrite                      // add pets
	// The scopes of admin tokens (docs/admin.md), never of a key.
	ScopeKeysRead  // read keys and their usage
	ScopeKeysWrite // create, change, roll and revoke keys
	ScopeAuditRead // read the audit trail
	ScopeWebhooks  // manage webhook endpoints
	AllScopes      = ScopePetsRead | ScopePetsWrite
	AllAdminScopes = ScopeKeysRead | ScopeKeysWrite | ScopeAuditRead | ScopeWebhooks
	NoScope        = ScopeSet(0) // as a need: any valid key
)

// scopeNames are the scopes by name, in the order they are shown.
var scopeNames = []struct {
	scope ScopeSet
	name  string
}{
	{ScopePetsRead, "pets:read"},
	{ScopePetsWrite, "pets:write"},
	{ScopeKeysRead, "keys:read"},
	{ScopeKeysWrite, "keys:write"},
	{ScopeAuditRead, "audit:read"},
	{ScopeWebhooks, "webhooks"},
}

// KnownScopes lists a key's scopes for a message.
const KnownScopes = "pets:read and pets:write"

func (s ScopeSet) Has(need ScopeSet) bool { return s&need == need }

func (s ScopeSet) Names() []string {
	names := make([]string, 0, len(scopeNames))
	for _, n := range scopeNames {
		if s.Has(n.scope) {
			names = append(names, n.name)
		}
	}
	return names
}

// String is the scopes of s separated by spaces, as OAuth writes a scope
// list and as the database keeps it; "" for none.
func (s ScopeSet) String() string { return strings.Join(s.Names(), " ") }

func scopeWithin(name string, within ScopeSet) (s ScopeSet, ok bool) {
	for _, n := range scopeNames {
		if n.name == name && within.Has(n.scope) {
			return n.scope, true
		}
	}
	return 0, false
}

// ParseScopes is the set of the scopes named, each one of within, or the
// first name that is none of them with ok false. It is the one reader of
// scope names given by a user: the --scope flags and the admin API's scopes.
func ParseScopes(names []string, within ScopeSet) (s ScopeSet, unknown string, ok bool) {
	for _, name := range names {
		scope, found := scopeWithin(name, within)
		if !found {
			return 0, name, false
		}
		s |= scope
	}
	return s, "", true
}

// StoredScopes reads the scopes column. A name this version does not know
// (written by a later one) grants nothing here: a key never gains a right
// by being read by an older server.
func StoredScopes(column string, within ScopeSet) ScopeSet {
	var s ScopeSet
	for _, name := range strings.Fields(column) {
		if scope, ok := scopeWithin(name, within); ok {
			s |= scope
		}
	}
	return s
}

func (s ScopeSet) Described() string {
	if s == 0 {
		return "no scope"
	}
	return strings.Join(s.Names(), " and ")
}
