package domain

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Budget is whom a key's requests are counted against, and its limits: the
// keys of one roll share one budget. A key stored before figures were
// capped is limited at the cap.
func (k *Key) Budget() (CallerID, Limits) {
	return CallerID{KeyID: k.BudgetID}, Limits{PerMinute: min(k.PerMinute, MaxLimit), PerDay: min(k.PerDay, MaxLimit)}
}

// KeyStore keeps the API keys. Each change of a key and its audit event by
// actor are stored as one change.
type KeyStore interface {
	// CreateKey stores k (its Hash set, its ExpiresAt when it has one)
	// and returns it with its id.
	CreateKey(ctx context.Context, k Key, actor string) (Key, error)
	// CreateFirstKey stores k as CreateKey does, but only when the store
	// holds no key at all, as one change: servers that start at once on an
	// empty database make one first key between them. created is false,
	// and nothing is stored, when a key exists. keep (nil: none) is given
	// the key inside the change, before it commits: when it fails, nothing
	// is stored and its error comes back, so that a key that could not be
	// handed over does not stay.
	CreateFirstKey(ctx context.Context, k Key, actor string, keep func(Key) error) (_ Key, created bool, err error)
	// RevokeKey marks key id revoked. Revoking a revoked key changes
	// nothing (revoked is false) and leaves no event; an unknown id is
	// not_found.
	RevokeKey(ctx context.Context, id int64, actor string) (revoked bool, err error)
	// RollKey replaces key id by Successor(old, hash) as one change, the
	// old key ending at RollEnd. A key Rollable refuses is invalid_request,
	// an unknown id is not_found.
	RollKey(ctx context.Context, id int64, hash []byte, overlap time.Duration, actor string) (old, rolled Key, err error)
	// UpdateKey changes key id in place to what change makes of it (the
	// same secret), as one change with its key.updated event; an unknown id
	// is not_found, and change's refusal comes back as it is.
	UpdateKey(ctx context.Context, id int64, change func(Key) (Key, error), actor string) (before, after Key, err error)
	Keys(ctx context.Context) ([]Key, error)
	KeyByHash(ctx context.Context, hash []byte) (Key, bool, error)
	// KeysVersion changes whenever a key is created or changed, by any
	// process sharing the database.
	KeysVersion(ctx context.Context) (int64, error)
	// SetLastUsed records the minute each key was last used in, in one
	// write, never moving a key's last use back. It is not a key change:
	// KeysVersion stays.
	SetLastUsed(ctx context.Context, uses []LastUse) error
}

// UsageStore keeps each key's requests a day, which the limiters add to.
type UsageStore interface {
	Usage(ctx context.Context, keyID int64, day string) (int64, error)
	// AddUsage adds the counts in one write, each batch's once: counts of
	// a batch the store added before are left out.
	AddUsage(ctx context.Context, counts []UsageCount) error
}

// AuditStore reads the audit trail, which is append only: each change
// writes its events, and queues their webhooks, in its own transaction
// (recordActions, in the store).
type AuditStore interface {
	// AuditEvents returns the events filter picks, oldest first.
	AuditEvents(ctx context.Context, filter AuditFilter) ([]AuditEvent, error)
	AuditCounts(ctx context.Context) (map[string]int64, error)
}

// BanStore keeps the bans the servers started, and their lifts.
type BanStore interface {
	// AddBans stores bans the server started, each with its key.banned
	// event, in one write.
	AddBans(ctx context.Context, started []StartedBan) error
	// LiftBan ends subject's ban now, with its ban.lifted event by actor,
	// as one change; a key names its budget's ban. No ban in force is
	// not_found, as is a key of another environment than env.
	LiftBan(ctx context.Context, subject CallerID, actor, env string) (Ban, error)
	// Bans returns the bans in force, those that began first first.
	Bans(ctx context.Context) ([]Ban, error)
	// BanChanges returns the bans stored or lifted after version (0: every
	// one the table holds), in the order of their writes.
	BanChanges(ctx context.Context, version int64) ([]Ban, error)
}

// UsageHistoryStore keeps the usage history (docs/admin.md): each budget's
// requests by UTC day and outcome.
type UsageHistoryStore interface {
	// AddUsageHistory adds each row's counts to its budget's day, in one
	// write, each batch's once, as AddUsage does.
	AddUsageHistory(ctx context.Context, rows []UsageDay) error
	// UsageHistory returns budgetID's days from day from on, oldest first,
	// only those it has.
	UsageHistory(ctx context.Context, budgetID int64, from string) ([]UsageDay, error)
	PruneUsageHistory(ctx context.Context, before string) (int64, error)
}

// AdminTokenStore keeps the admin tokens (docs/admin.md), each change with its
// audit event by actor.
type AdminTokenStore interface {
	CreateAdminToken(ctx context.Context, t AdminToken, actor string) (AdminToken, error)
	AdminTokens(ctx context.Context) ([]AdminToken, error)
	AdminTokenByHash(ctx context.Context, hash []byte) (AdminToken, bool, error)
	// RevokeAdminToken marks token id revoked; revoked is false, and
	// nothing changes, when it was already; an unknown id is not_found.
	RevokeAdminToken(ctx context.Context, id int64, actor string) (revoked bool, err error)
}

// Key is a stored API key. The key itself is never kept, only its hash.
type Key struct {
	ID        int64
	Hash      []byte
	Name      string
	Plan      string
	PerMinute int64
	PerDay    int64
	Env       string
	Scopes    ScopeSet
	CreatedAt time.Time
	RevokedAt time.Time // zero while the key is active
	ExpiresAt time.Time // zero: the key never expires
	// BudgetID is the key whose rate-limit budget this key spends: its own
	// id, or after a roll the first key of the chain, so that the old and
	// the new key share one minute bucket, one day count and one ban.
	BudgetID   int64
	RolledTo   int64     // the key this one was rolled to; 0 when none
	LastUsedAt time.Time // the minute it was last used in; zero: never
	// ExternalID is a portal's own reference for the key (its customer,
	// its account), unique among the keys not revoked; "" when none.
	ExternalID string
}

func (k *Key) ExpiredAt(now time.Time) bool {
	return !k.ExpiresAt.IsZero() && !now.Before(k.ExpiresAt)
}

// LastUse says that key KeyID was used in the minute that starts at Minute.
type LastUse struct {
	KeyID  int64
	Minute time.Time
}

// UsageCount is the number of requests a key made on one UTC day, counted
// in one flush of a server.
type UsageCount struct {
	KeyID int64
	Day   string // YYYY-MM-DD
	Count int64
	Batch Batch // the flush that counted them
}

// Batch names one flush of counts (UsageCount, UsageDay): its stream, one
// flusher of one process, and its number in that stream, from 1 up. A
// flush whose outcome is not known (a commit whose answer was lost) is
// sent again as it was, before any later one of its stream, so the store
// adds a stream's batches once and in order: one numbered no higher than
// the last it added is left out.
type Batch struct {
	Stream string
	N      int64
}

// Batches numbers the flushes of one stream, one flush at a time.
type Batches struct {
	stream string
	last   int64
}

// NewBatches starts a stream of a random name.
func NewBatches() *Batches { return &Batches{stream: rand.Text()} }

// Next is the batch of the next flush.
func (b *Batches) Next() Batch {
	b.last++
	return Batch{Stream: b.stream, N: b.last}
}

// AdminToken is a stored admin token: never the token, only its hash.
type AdminToken struct {
	ID        int64
	Hash      []byte
	Name      string
	Scopes    ScopeSet
	Env       string
	CreatedAt time.Time
	RevokedAt time.Time // zero while the token works
}

func (t *AdminToken) Actor() string { return "admin:" + t.Name }

// ListedAdminToken is a token as admin list shows it (--json: these fields).
type ListedAdminToken struct {
	ID      int64      `json:"id"`
	Name    string     `json:"name"`
	Scopes  []string   `json:"scopes"`
	Created time.Time  `json:"created"`
	Revoked *time.Time `json:"revoked"`
}

func (t *AdminToken) Listed() ListedAdminToken {
	return ListedAdminToken{ID: t.ID, Name: t.Name, Scopes: t.Scopes.Names(), Created: t.CreatedAt, Revoked: TimeOrNil(t.RevokedAt)}
}

func AdminEvent(action string, t AdminToken, actor string, at time.Time) AuditEvent {
	return AuditEvent{At: AuditTime(at), Action: action, Actor: actor, Env: t.Env,
		Details: AuditDetails{AdminID: t.ID, Name: t.Name, Scopes: t.Scopes.Names()}}
}

type Ban struct {
	Subject  CallerID // a key's budget, or a client address (an IPv6 /64)
	Since    time.Time
	Until    time.Time
	LiftedAt time.Time // zero unless lifted
	Version  int64     // the bans_version of the write that stored or lifted it
}

// StartedBan is a ban the server started, with its key.banned event: they
// are stored together.
type StartedBan struct {
	Ban   Ban
	Event AuditEvent
}

// LimitedAddr is the part of a client address that is limited and banned:
// the address itself, or for IPv6 its /64, which one customer (a home, a
// virtual machine) usually holds whole.
func LimitedAddr(addr netip.Addr) netip.Addr {
	addr = addr.Unmap().WithZone("")
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.Addr()
	}
	return addr
}

// String is id as a ban's subject: key:ID (a budget's id) or address:IP,
// an IPv6 /64 as address:PREFIX/64.
func (id CallerID) String() string {
	if id.KeyID != 0 {
		return "key:" + strconv.FormatInt(id.KeyID, 10)
	}
	return "address:" + id.AddressText()
}

// AddressText is the client address of id as bans and their events name
// it: an IPv6 one as its /64.
func (id CallerID) AddressText() string {
	if id.Addr.Is6() {
		return netip.PrefixFrom(id.Addr, 64).Masked().String()
	}
	return id.Addr.String()
}

// Kind is what a subject bans, as the bans table's kind column says.
func (id CallerID) Kind() string {
	if id.KeyID != 0 {
		return "key"
	}
	return "address"
}

// ParseBanSubject reads a subject: key:ID, or address:IP where an IPv6
// address (or its /64, PREFIX/64) names its /64. What it refuses is
// invalid, saying why.
func ParseBanSubject(s string) (CallerID, error) {
	if rest, ok := strings.CutPrefix(s, "key:"); ok {
		id, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || id < 1 {
			return CallerID{}, Invalid("subject %q: a key is key:ID, with the numeric id from petstore keys list", s)
		}
		return CallerID{KeyID: id}, nil
	}
	if rest, ok := strings.CutPrefix(s, "address:"); ok {
		if addr, err := netip.ParseAddr(rest); err == nil {
			return CallerID{Addr: LimitedAddr(addr)}, nil
		}
		if p, err := netip.ParsePrefix(rest); err == nil && p.Addr().Is6() && !p.Addr().Is4In6() && p.Bits() == 64 {
			return CallerID{Addr: p.Masked().Addr()}, nil
		}
		return CallerID{}, Invalid("subject %q: an address is address:IP (an IPv6 address, or its /64, names its /64)", s)
	}
	return CallerID{}, Invalid("subject %q: want key:ID or address:IP", s)
}

// LiftEvent is the ban.lifted event of b, lifted by actor on env at now;
// named is the subject the lift named (a key of the budget banned).
func LiftEvent(b Ban, named CallerID, actor, env string, now time.Time) AuditEvent {
	until := b.Until
	e := AuditEvent{At: AuditTime(now), Action: AuditBanLifted, Actor: actor, Env: env,
		Details: AuditDetails{BannedUntil: &until}}
	if named.KeyID != 0 {
		e.KeyID = named.KeyID
		if b.Subject.KeyID != named.KeyID {
			e.Details.Budget = b.Subject.KeyID
		}
	} else {
		e.Address = named.AddressText()
	}
	return e
}

type Limits struct {
	PerMinute int64
	PerDay    int64
}

// Plans are the published figures (README, "Plans and limits"). Enterprise
// has none: each Enterprise key carries its own.
var Plans = map[string]Limits{
	"free":     {PerMinute: 60, PerDay: 1_000},
	"pro":      {PerMinute: 300, PerDay: 10_000},
	"business": {PerMinute: 1_000, PerDay: 100_000},
}

// AnonymousLimits throttle requests without a valid key, per client address.
var AnonymousLimits = Plans["free"]

// CallerID names whom a request is counted against: an API key, or for a
// request without a valid key, the client's address.
type CallerID struct {
	KeyID int64
	Addr  netip.Addr
}

// UsageOutcome is the column a request is counted in.
type UsageOutcome uint8

const (
	UsageAllowed       UsageOutcome = iota // passed the limiter and had the scope
	UsageRateLimited                       // 429 rate_limited, for the minute
	UsageQuotaExceeded                     // 429 rate_limited, for the day
	UsageBanned                            // 429 temporarily_banned
	UsageForbidden                         // passed the limiter, 403 for want of a scope
	UsageOutcomes                          // how many outcomes there are
)

// UsageDay is one row of the usage history: the requests of a budget on one
// UTC day by outcome. It is the JSON object of petstore usage --json and
// GET /admin/v1/keys/{id}/usage.
type UsageDay struct {
	BudgetID      int64  `json:"-"`
	Day           string `json:"day"` // YYYY-MM-DD
	Allowed       int64  `json:"allowed"`
	RateLimited   int64  `json:"rateLimited"`
	QuotaExceeded int64  `json:"quotaExceeded"`
	Banned        int64  `json:"banned"`
	Forbidden     int64  `json:"forbidden"`
	Batch         Batch  `json:"-"` // the flush that counted them
}

func (u *UsageDay) Add(o UsageOutcome, n int64) {
	switch o {
	case UsageAllowed:
		u.Allowed += n
	case UsageRateLimited:
		u.RateLimited += n
	case UsageQuotaExceeded:
		u.QuotaExceeded += n
	case UsageBanned:
		u.Banned += n
	case UsageForbidden:
		u.Forbidden += n
	}
}

// maxLifetimeDays bounds the days of a duration flag: a key that lives a
// century, at most.
const maxLifetimeDays = 36_500

// ParseLifetime reads a duration as Go's time.ParseDuration does (12h,
// 30m, 1h30m), with whole days before it as a "d" (90d, 1d12h).
func ParseLifetime(s string) (time.Duration, error) {
	days, rest, found := strings.Cut(s, "d")
	if !found {
		return time.ParseDuration(s)
	}
	n, err := strconv.Atoi(days)
	var r time.Duration // what follows the days
	if err == nil && rest != "" {
		r, err = time.ParseDuration(rest)
	}
	if err != nil || !IsDigits(days) || n > maxLifetimeDays || r < 0 {
		return 0, fmt.Errorf("%q is not a duration", s)
	}
	return time.Duration(n)*24*time.Hour + r, nil
}

// appendRandomBase62 appends n random base62 characters to b: the random
// part of a key, an admin token and a webhook event's id.
func appendRandomBase62(b []byte, n int) []byte {
	var buf [64]byte
	for n > 0 {
		rand.Read(buf[:])
		for _, c := range buf {
			// 248 = 4*62: dropping the bytes above it keeps every character equally likely.
			if c < 248 && n > 0 {
				b = append(b, Base62[c%62])
				n--
			}
		}
	}
	return b
}
