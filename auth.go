package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"petstore/internal/domain"
	"petstore/internal/limits"
)

// keyProblem says why a token cannot be a key of env, or nothing (the zero
// authFailure) when its shape and checksum are right.
func keyProblem(token, env string) authFailure {
	if strings.HasPrefix(token, "psa_") {
		return authAdminToken
	}
	return secretProblem(token, env, domain.KeyPrefixes)
}

// secretProblem says why token cannot be a secret of env with one of
// prefixes (by environment), or nothing when its shape and checksum are
// right.
func secretProblem(token, env string, prefixes map[string]string) authFailure {
	prefix := prefixes[env]
	if !strings.HasPrefix(token, prefix) {
		for otherEnv, other := range prefixes {
			if strings.HasPrefix(token, other) {
				return authFailure{authWrongEnvironment,
					fmt.Sprintf("the API key belongs to the %s environment and this server is %s", otherEnv, env)}
			}
		}
		return authNotAKey
	}
	if len(token) != len(prefix)+domain.KeyRandomLen+domain.KeyChecksumLen {
		return authNotAKey
	}
	for i := len(prefix); i < len(token); i++ {
		if !domain.IsBase62[token[i]] {
			return authNotAKey
		}
	}
	var sum [domain.KeyChecksumLen]byte
	var buf [64]byte // the key's body, without a heap copy
	body := token[:len(token)-domain.KeyChecksumLen]
	if string(domain.AppendChecksum(sum[:0], append(buf[:0], body...))) != token[len(body):] {
		return authNotAKey
	}
	return authFailure{}
}

// keyring answers "which key is this?" from memory, so a request costs no
// query. It reloads every key when the database's keys_version moves (a key
// was created, revoked or rolled, possibly by another process), which
// refresh checks twice a second: a revocation or a roll takes effect within
// a second. An expiry is checked against the clock at each look-up, so an
// expired key is refused at once, on every server.
type keyring struct {
	store domain.KeyStore
	env   string
	now   func() time.Time

	mu        sync.RWMutex
	byHash    map[[sha256.Size]byte]*heldKey
	uses      map[int64]*keyUse // by key id; outlives the reloads
	version   int64
	checkedAt time.Time // when refresh last read the version

	sharedMu sync.Mutex // one refreshShared at a time

	flushMu sync.Mutex // one flushLastUsed at a time
}

// heldKey is a key as the keyring holds it, with its note of use.
type heldKey struct {
	key domain.Key
	use *keyUse
}

// keyUse is a key's note of its use: lookup sets the flag, the first
// request after each flush only, so that a request costs no write and no
// allocation, and flushLastUsed writes the minute out.
type keyUse struct {
	used   atomic.Bool
	stored int64 // the minute last written, in Unix seconds; flushLastUsed's
	budget int64 // the key's budget, which its usage history counts against
	tally  [2]dayTally
}

const keyRefreshEvery = 500 * time.Millisecond

// sharedRefreshAge is how old the keyring's look at the version may be
// before a request from a limited sender with a key not held here reloads
// it (refreshShared): whatever their number, such requests check the
// version at most ten times a second and look no key up.
const sharedRefreshAge = 100 * time.Millisecond

func newKeyring(ctx context.Context, store domain.KeyStore, env string, now func() time.Time) (*keyring, error) {
	k := &keyring{store: store, env: env, now: now, version: -1, uses: make(map[int64]*keyUse)}
	return k, k.refresh(ctx)
}

// refresh reloads the keys when they changed since the last load.
func (k *keyring) refresh(ctx context.Context) error {
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
	held := make([]heldKey, len(keys))
	byHash := make(map[[sha256.Size]byte]*heldKey, len(keys))
	for i := range keys {
		// lookup trusts what it finds here without checking the key's
		// prefix: hold only this environment's keys.
		if keys[i].Env == k.env {
			held[i].key = keys[i]
			byHash[[sha256.Size]byte(keys[i].Hash)] = &held[i]
		}
	}
	k.mu.Lock()
	uses := make(map[int64]*keyUse, len(byHash))
	for _, h := range byHash {
		h.use = k.useOf(&h.key)
		uses[h.key.ID] = h.use
	}
	k.byHash, k.uses, k.version = byHash, uses, version
	k.mu.Unlock()
	return nil
}

// useOf is key's note of its use, the one it had before a reload; k.mu is
// held for writing.
func (k *keyring) useOf(key *domain.Key) *keyUse {
	if u := k.uses[key.ID]; u != nil {
		return u
	}
	u := &keyUse{stored: key.LastUsedAt.Unix(), budget: key.BudgetID}
	k.uses[key.ID] = u
	return u
}

// lookup returns the active key for token, with its note of use, or why
// there is none. A key made
// since the last reload is found in the database and kept; but when
// senderLimited (nil: never) says the request's sender is limited or banned,
// the keys are reloaded if they changed (refreshShared) and no key is looked
// up: made-up keys with a valid checksum cost the database nothing once
// their sender is limited, and a key made a moment ago still works.
func (k *keyring) lookup(ctx context.Context, token string, senderLimited func(context.Context) bool) (*heldKey, authFailure, error) {
	hash := domain.HashKey(token)
	k.mu.RLock()
	h, known := k.byHash[hash]
	loaded := k.version
	k.mu.RUnlock()
	if !known {
		// A known key skips the shape check, which costs more than the
		// hash: it has the shape, as it was made by newKey for this env.
		if problem := keyProblem(token, k.env); problem.reason != 0 {
			return nil, problem, nil
		}
		if senderLimited != nil && senderLimited(ctx) {
			if err := k.refreshShared(ctx); err != nil {
				return nil, authUnknownKey, err
			}
			k.mu.RLock()
			h, known = k.byHash[hash]
			k.mu.RUnlock()
			if !known {
				return nil, authUnknownKey, nil
			}
			return k.active(h)
		}
		found, ok, err := k.store.KeyByHash(ctx, bytes.Clone(hash[:]))
		if err != nil || !ok {
			return nil, authUnknownKey, err
		}
		h = &heldKey{key: found}
		k.mu.Lock()
		h.use = k.useOf(&h.key)
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
func (k *keyring) active(h *heldKey) (*heldKey, authFailure, error) {
	key := &h.key
	if !key.RevokedAt.IsZero() {
		return nil, authRevokedKey, nil
	}
	// Only a key with an expiry reads the clock.
	if !key.ExpiresAt.IsZero() && key.ExpiredAt(k.now()) {
		return nil, authExpiredKey, nil
	}
	if !h.use.used.Load() {
		h.use.used.Store(true)
	}
	return h, authFailure{}, nil
}

// refreshShared is refresh for the requests of limited senders: one at a
// time, the others waiting for it and then finding the keyring fresh; none
// when the keyring read the version less than sharedRefreshAge ago.
func (k *keyring) refreshShared(ctx context.Context) error {
	k.sharedMu.Lock()
	defer k.sharedMu.Unlock()
	k.mu.RLock()
	fresh := k.now().Sub(k.checkedAt) < sharedRefreshAge
	k.mu.RUnlock()
	if fresh {
		return nil
	}
	return k.refresh(ctx)
}

// flushLastUsed writes the minute of now as the last use of every key used
// since the last flush, in one write: only the keys whose stored minute it
// changes. A key used at 12:04:59 and flushed at 12:05:01 is stored as
// used at 12:05, so the minute is that of the use or the one after it.
// What cannot be written is tried again at the next flush.
func (k *keyring) flushLastUsed(ctx context.Context) error {
	k.flushMu.Lock()
	defer k.flushMu.Unlock()
	minute := k.now().UTC().Truncate(time.Minute)
	var uses []domain.LastUse
	var written []*keyUse
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

// authFailure is why a request has no valid API key: a reason, the label of
// petstore_auth_failures_total, and the message of the 401.
type authFailure struct {
	reason  authReason
	message string
}

func (f authFailure) String() string { return f.message }

// authReason is a fixed, small set: never anything the client sent.
type authReason uint8

const (
	authMissing          authReason = iota + 1 // no Authorization header, or nothing after Bearer
	authMalformed                              // another scheme, or not the shape or checksum of a key
	authInvalid                                // the shape of a key, and no such key
	authRevoked                                // a revoked key
	authWrongEnvironment                       // a key of the other environment (staging, production)
	authExpired                                // a key past its expiry
	authReasons                                // how many reasons there are, plus one
)

var authReasonNames = [authReasons]string{
	authMissing:          "missing",
	authMalformed:        "malformed",
	authInvalid:          "invalid",
	authRevoked:          "revoked",
	authWrongEnvironment: "wrong_environment",
	authExpired:          "expired",
}

// The failures with a fixed message (the environment one names both).
var (
	authNoHeader   = authFailure{authMissing, "the request has no API key: send Authorization: Bearer <key>"}
	authNoToken    = authFailure{authMissing, "the Authorization header has no API key after Bearer"}
	authNotBearer  = authFailure{authMalformed, "the Authorization header must use the Bearer scheme: Authorization: Bearer <key>"}
	authNotAKey    = authFailure{authMalformed, "the API key is not valid"}
	authAdminToken = authFailure{authMalformed, "this is an admin token (psa_...), which works only on the admin listener (--admin-addr), under /admin/v1: /v1 takes an API key (psk_...)"}
	authUnknownKey = authFailure{authInvalid, "the API key is not valid"}
	authRevokedKey = authFailure{authRevoked, "the API key has been revoked"}
	authExpiredKey = authFailure{authExpired, "the API key has expired"}
)

// bearerToken returns the credential of an "Authorization: Bearer <token>"
// header. The scheme is case-insensitive and may be followed by several
// spaces. hasBearer is false when the header is absent or of another scheme.
func bearerToken(header string) (token string, hasBearer bool) {
	scheme, rest, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.Trim(rest, " "), true
}

// unauthorized is the 401 answer, with the challenge RFC 6750 asks for.
func unauthorized(w http.ResponseWriter, r *http.Request, sentToken bool, message string) {
	challenge := `Bearer realm="petstore"`
	if sentToken {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	writeError(w, r, &Error{Code: codeUnauthorized, Message: message})
}

// authenticate finds the request's API key, if it sends a valid one. It
// refuses nothing itself: the rate limit comes first, then requireKey. A
// key this server does not hold is looked up in the database only when its
// sender's address is neither limited nor banned by limiter.
func authenticate(keys *keyring, limiter limits.Limiter, trustProxy bool) middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			header := firstHeader(r.Header, "Authorization")
			token, isBearer := bearerToken(header)
			var (
				h    *heldKey
				auth authFailure
				err  error
			)
			switch {
			case header == "":
				auth = authNoHeader
			case !isBearer:
				auth = authNotBearer
			case token == "":
				auth = authNoToken
			default:
				// A failed look-up is answered by requireKey, after the
				// address limit has set its headers.
				h, auth, err = keys.lookup(r.Context(), token, func(ctx context.Context) bool {
					return addressLimited(ctx, limiter, clientAddr(r, trustProxy))
				})
			}
			recordOf(w).authenticated(h, isBearer && token != "", auth, err)
			next.ServeHTTP(w, r)
		})
	}
}

// addressLimited tells whether a request without a key from addr would be
// refused now: the address is banned, or one of its windows is spent. When
// the limiter cannot tell, it is not.
func addressLimited(ctx context.Context, limiter limits.Limiter, addr netip.Addr) bool {
	s, err := limiter.Peek(ctx, domain.CallerID{Addr: addr}, domain.AnonymousLimits)
	return err == nil && (!s.Allowed || s.Minute.Remaining < 1 || s.Day.Remaining < 1)
}

// requireKey answers 401 to a request without a valid API key.
func requireKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := recordOf(w)
		key := info.keyed()
		if key == nil && info.authErr != nil {
			writeError(w, r, info.authErr)
			return
		}
		if key == nil {
			unauthorized(w, r, info.sentToken, info.auth.message)
			return
		}
		next.ServeHTTP(w, r)
	})
}
