// Package keyring answers "which API key is this token?" from memory, so
// that a request costs no query: the keys by hash, reloaded when the
// database's keys version moves; each key's note of use (its last use, and
// its requests of the day by outcome, flushed into the usage history); and
// why a token is refused (Failure, with its Reason for the metrics).
//
// It imports the domain and the limits (for a budget's day).
package keyring

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"petstore/internal/domain"
	"petstore/internal/limits"
)

// KeyProblem says why a token cannot be a key of env, or nothing (the zero
// Failure) when its shape and checksum are right.
func KeyProblem(token, env string) Failure {
	if strings.HasPrefix(token, "psa_") {
		return authAdminToken
	}
	return SecretProblem(token, env, domain.KeyPrefixes)
}

// SecretProblem says why token cannot be a secret of env with one of
// prefixes (by environment), or nothing when its shape and checksum are
// right.
func SecretProblem(token, env string, prefixes map[string]string) Failure {
	prefix := prefixes[env]
	if !strings.HasPrefix(token, prefix) {
		for otherEnv, other := range prefixes {
			if strings.HasPrefix(token, other) {
				return Failure{WrongEnvironment,
					fmt.Sprintf("the API key belongs to the %s environment and this server is %s", otherEnv, env)}
			}
		}
		return NotAKey
	}
	if len(token) != len(prefix)+domain.KeyRandomLen+domain.KeyChecksumLen {
		return NotAKey
	}
	for i := len(prefix); i < len(token); i++ {
		if !domain.IsBase62[token[i]] {
			return NotAKey
		}
	}
	var sum [domain.KeyChecksumLen]byte
	var buf [64]byte // the key's body, without a heap copy
	body := token[:len(token)-domain.KeyChecksumLen]
	if string(domain.AppendChecksum(sum[:0], append(buf[:0], body...))) != token[len(body):] {
		return NotAKey
	}
	return Failure{}
}

// Ring holds the keys of its environment. It reloads every key when the
// database's keys_version moves (a key was created, revoked or rolled,
// possibly by another process), which refresh checks twice a second: a
// revocation or a roll takes effect within a second. An expiry is checked
// against the clock at each look-up, so an expired key is refused at once,
// on every server.
type Ring struct {
	store domain.KeyStore
	env   string
	now   func() time.Time

	mu        sync.RWMutex
	byHash    map[[sha256.Size]byte]*Held
	uses      map[int64]*Use // by key id; outlives the reloads
	version   int64
	checkedAt time.Time // when refresh last read the version

	sharedMu sync.Mutex // one refreshShared at a time
	flushMu  sync.Mutex // one FlushLastUsed at a time

	usageFlushMu sync.Mutex // one FlushUsage at a time, so that batches go in order
	usageBatches *domain.Batches
	// unconfirmedUsage is the batch of a flush whose outcome is not known:
	// sent again as it was by the next flush.
	unconfirmedUsage []domain.UsageDay
	waitingUsage     map[limits.KeyDay]*domain.UsageDay // counted, in no batch yet
}

// Held is a key as the keyring holds it, with its note of use.
type Held struct {
	Key domain.Key
	Use *Use
}

// Use is a key's note of its use: Lookup sets the flag, the first
// request after each flush only, so that a request costs no write and no
// allocation, and FlushLastUsed writes the minute out.
type Use struct {
	used   atomic.Bool
	stored int64 // the minute last written, in Unix seconds; FlushLastUsed's
	budget int64 // the key's budget, which its usage history counts against
	tally  [2]dayTally
}

const RefreshEvery = 500 * time.Millisecond

// SharedRefreshAge is how old the keyring's look at the version may be
// before a request from a limited sender with a key not held here reloads
// it (refreshShared): whatever their number, such requests check the
// version at most ten times a second and look no key up.
const SharedRefreshAge = 100 * time.Millisecond

func New(ctx context.Context, store domain.KeyStore, env string, now func() time.Time) (*Ring, error) {
	k := &Ring{store: store, env: env, now: now, version: -1, uses: make(map[int64]*Use), usageBatches: domain.NewBatches(),
		waitingUsage: make(map[limits.KeyDay]*domain.UsageDay)}
	return k, k.Refresh(ctx)
}

// Refresh reloads the keys when they changed since the last load.
func (k *Ring) Refresh(ctx context.Context) error {
	version, err := k.store.KeysVersion(ctx)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.checkedAt = k.now()
	same := version == k.version
	k.mu.Unlock()
	if same {
		return nil
	}
	keys, err := k.store.Keys(ctx)
	if err != nil {
		return err
	}
	held := make([]Held, len(keys))
	byHash := make(map[[sha256.Size]byte]*Held, len(keys))
	for i := range keys {
		// Lookup trusts what it finds here without checking the key's
		// prefix: hold only this environment's keys.
		if keys[i].Env == k.env {
			held[i].Key = keys[i]
			byHash[[sha256.Size]byte(keys[i].Hash)] = &held[i]
		}
	}
	k.mu.Lock()
	uses := make(map[int64]*Use, len(byHash))
	for _, h := range byHash {
		h.Use = k.useOf(&h.Key)
		uses[h.Key.ID] = h.Use
	}
	k.byHash, k.uses, k.version = byHash, uses, version
	k.mu.Unlock()
	return nil
}

// useOf is key's note of its use, the one it had before a reload; k.mu is
// held for writing.
func (k *Ring) useOf(key *domain.Key) *Use {
	if u := k.uses[key.ID]; u != nil {
		return u
	}
	u := &Use{stored: key.LastUsedAt.Unix(), budget: key.BudgetID}
	k.uses[key.ID] = u
	return u
}

// Lookup returns the active key for token, with its note of use, or why
// there is none. A key made since the last reload is found in the database
// and kept; but when senderLimited (nil: never) says the request's sender
// is limited or banned, the keys are reloaded if they changed
// (refreshShared) and no key is looked up: made-up keys with a valid
// checksum cost the database nothing once their sender is limited, and a
// key made a moment ago still works.
func (k *Ring) Lookup(ctx context.Context, token string, senderLimited func(context.Context) bool) (*Held, Failure, error) {
	hash := domain.HashKey(token)
	k.mu.RLock()
	h, known := k.byHash[hash]
	loaded := k.version
	k.mu.RUnlock()
	if !known {
		// A known key skips the shape check, which costs more than the
		// hash: it has the shape, as it was made by newKey for this env.
		if problem := KeyProblem(token, k.env); problem.Reason != 0 {
			return nil, problem, nil
		}
		if senderLimited != nil && senderLimited(ctx) {
			if err := k.refreshShared(ctx); err != nil {
				return nil, UnknownKey, err
			}
			k.mu.RLock()
			h, known = k.byHash[hash]
			k.mu.RUnlock()
			if !known {
				return nil, UnknownKey, nil
			}
			return k.active(h)
		}
		found, ok, err := k.store.KeyByHash(ctx, bytes.Clone(hash[:]))
		if err != nil || !ok {
			return nil, UnknownKey, err
		}
		h = &Held{Key: found}
		k.mu.Lock()
		h.Use = k.useOf(&h.Key)
		// A reload since our read may know better (a revocation): keep
		// this key only when no reload happened in between.
		if k.version == loaded {
			k.byHash[hash] = h
		}
		k.mu.Unlock()
	}
	return k.active(h)
}

// active returns h when its key works now, or why it does not.
func (k *Ring) active(h *Held) (*Held, Failure, error) {
	key := &h.Key
	if !key.RevokedAt.IsZero() {
		return nil, RevokedKey, nil
	}
	// Only a key with an expiry reads the clock.
	if !key.ExpiresAt.IsZero() && key.ExpiredAt(k.now()) {
		return nil, ExpiredKey, nil
	}
	if !h.Use.used.Load() {
		h.Use.used.Store(true)
	}
	return h, Failure{}, nil
}

// refreshShared is refresh for the requests of limited senders: one at a
// time, the others waiting for it and then finding the keyring fresh; none
// when the keyring read the version less than SharedRefreshAge ago.
func (k *Ring) refreshShared(ctx context.Context) error {
	k.sharedMu.Lock()
	defer k.sharedMu.Unlock()
	k.mu.RLock()
	fresh := k.now().Sub(k.checkedAt) < SharedRefreshAge
	k.mu.RUnlock()
	if fresh {
		return nil
	}
	return k.Refresh(ctx)
}

// FlushLastUsed writes the minute of now as the last use of every key used
// since the last flush, in one write: only the keys whose stored minute it
// changes. A key used at 12:04:59 and flushed at 12:05:01 is stored as
// used at 12:05, so the minute is that of the use or the one after it.
// What cannot be written is tried again at the next flush.
func (k *Ring) FlushLastUsed(ctx context.Context) error {
	k.flushMu.Lock()
	defer k.flushMu.Unlock()
	minute := k.now().UTC().Truncate(time.Minute)
	var uses []domain.LastUse
	var written []*Use
	k.mu.RLock()
	for id, u := range k.uses {
		if u.used.Swap(false) && u.stored != minute.Unix() {
			uses = append(uses, domain.LastUse{KeyID: id, Minute: minute})
			written = append(written, u)
		}
	}
	k.mu.RUnlock()
	if len(uses) == 0 {
		return nil
	}
	if err := k.store.SetLastUsed(ctx, uses); err != nil {
		for _, u := range written {
			u.used.Store(true)
		}
		return err
	}
	for _, u := range written {
		u.stored = minute.Unix()
	}
	return nil
}

// Failure is why a request has no valid API key: a reason, the label of
// petstore_auth_failures_total, and the message of the 401.
type Failure struct {
	Reason  Reason
	Message string
}

func (f Failure) String() string { return f.Message }

// Reason is a fixed, small set: never anything the client sent.
type Reason uint8

const (
	Missing          Reason = iota + 1 // no Authorization header, or nothing after Bearer
	Malformed                          // another scheme, or not the shape or checksum of a key
	Invalid                            // the shape of a key, and no such key
	Revoked                            // a revoked key
	WrongEnvironment                   // a key of the other environment (staging, production)
	expired                            // a key past its expiry
	Reasons                            // how many reasons there are, plus one
)

var ReasonNames = [Reasons]string{
	Missing:          "missing",
	Malformed:        "malformed",
	Invalid:          "invalid",
	Revoked:          "revoked",
	WrongEnvironment: "wrong_environment",
	expired:          "expired",
}

// The failures with a fixed message (the environment one names both).
var (
	NoHeader       = Failure{Missing, "the request has no API key: send Authorization: Bearer <key>"}
	NoToken        = Failure{Missing, "the Authorization header has no API key after Bearer"}
	NotBearer      = Failure{Malformed, "the Authorization header must use the Bearer scheme: Authorization: Bearer <key>"}
	NotAKey        = Failure{Malformed, "the API key is not valid"}
	authAdminToken = Failure{Malformed, "this is an admin token (psa_...), which works only on the admin listener (--admin-addr), under /admin/v1: /v1 takes an API key (psk_...)"}
	UnknownKey     = Failure{Invalid, "the API key is not valid"}
	RevokedKey     = Failure{Revoked, "the API key has been revoked"}
	ExpiredKey     = Failure{expired, "the API key has expired"}
)

// dayTally counts one key's requests of one UTC day by outcome.
type dayTally struct {
	day atomic.Int64 // days since 1970-01-01
	n   [domain.UsageOutcomes]atomic.Int64
}

// Count adds a request of the key on day (days since 1970-01-01) to its
// tally: no lock and no allocation. A key keeps two days, by the day's
// parity, so that the requests just before midnight and just after it
// stay apart until the next flush takes them. A slot still holding the day
// before yesterday (flushes failing for a day) takes the new day's counts
// over with them.
func (u *Use) Count(day int64, o domain.UsageOutcome) {
	t := &u.tally[day&1]
	if t.day.Load() != day {
		t.day.Store(day)
	}
	t.n[o].Add(1)
}

// FlushUsage writes the requests counted since the last flush, summed by
// budget and day, through add as one batch, after the batch of a flush
// whose outcome is not known, which goes again as it was and which the
// store adds once (limits.FlushInOrder). Each flush empties the tallies
// into waitingUsage, by budget and day, so that while a batch waits (the
// database away, for days even) every count keeps its day.
func (k *Ring) FlushUsage(ctx context.Context, add func(context.Context, []domain.UsageDay) error) error {
	k.usageFlushMu.Lock()
	defer k.usageFlushMu.Unlock()
	k.emptyTallies()
	return limits.FlushInOrder(ctx, nil, &k.unconfirmedUsage, k.takeUsage, add)
}

// emptyTallies adds the keys' tallies to waitingUsage and zeroes them.
func (k *Ring) emptyTallies() {
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, u := range k.uses {
		for i := range u.tally {
			t := &u.tally[i]
			var n [domain.UsageOutcomes]int64
			for o := range n {
				n[o] = t.n[o].Swap(0)
			}
			if n == ([domain.UsageOutcomes]int64{}) {
				continue
			}
			kd := limits.KeyDay{KeyID: u.budget, Day: t.day.Load()}
			row := k.waitingUsage[kd]
			if row == nil {
				row = &domain.UsageDay{BudgetID: kd.KeyID, Day: limits.DayString(kd.Day)}
				k.waitingUsage[kd] = row
			}
			for o, n := range n {
				row.Add(domain.UsageOutcome(o), n)
			}
		}
	}
}

// takeUsage makes the waiting counts into the next batch, one row a budget
// and day.
func (k *Ring) takeUsage() []domain.UsageDay {
	if len(k.waitingUsage) == 0 {
		return nil
	}
	batch := k.usageBatches.Next()
	taken := make([]domain.UsageDay, 0, len(k.waitingUsage))
	for _, row := range k.waitingUsage {
		row.Batch = batch
		taken = append(taken, *row)
	}
	clear(k.waitingUsage)
	return taken
}
