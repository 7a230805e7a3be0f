package main

import (
	"context"
	"maps"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Bans in the database (DESIGN.md "The API's owner"): the server that
// starts a ban stores it with its key.banned event (auditLog, within the
// usage batch's 2 s). Redis holds the truth while it is up; the database is
// a floor under it: every server reads the table at start and what changed
// in it every keyRefreshEvery (banFollower) into a banFloor, which the
// limit rules take in each run (limitRun.banFloor), in process, in the
// fallback and in the script, so that neither a restart nor a Redis outage
// nor an empty Redis lifts a ban early. A ban a server sees in Redis's
// answer goes on its floor at once (banFloor.hold), so that a Redis outage
// right after the ban does not lose it on that server. A lift (bans lift, DELETE
// /admin/v1/bans/{subject}) is stored with its time and ban.lifted event;
// each server takes it off its floor and runs it through the rules
// (limitRun.lift), in process and in Redis.

// ban is one ban as the database keeps it.
type ban struct {
	Subject  callerID // a key's budget, or a client address (an IPv6 /64)
	Since    time.Time
	Until    time.Time
	LiftedAt time.Time // zero unless lifted
	version  int64     // the bans_version of the write that stored or lifted it
}

// startedBan is a ban the server started, with its key.banned event: they
// are stored together.
type startedBan struct {
	Ban   ban
	Event auditEvent
}

// limitedAddr is the part of a client address that is limited and banned:
// the address itself, or for IPv6 its /64, which one customer (a home, a
// virtual machine) usually holds whole.
func limitedAddr(addr netip.Addr) netip.Addr {
	addr = addr.Unmap().WithZone("")
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.Addr()
	}
	return addr
}

// String is id as a ban's subject: key:ID (a budget's id) or address:IP,
// an IPv6 /64 as address:PREFIX/64.
func (id callerID) String() string {
	if id.keyID != 0 {
		return "key:" + strconv.FormatInt(id.keyID, 10)
	}
	return "address:" + id.addressText()
}

// addressText is the client address of id as bans and their events name
// it: an IPv6 one as its /64.
func (id callerID) addressText() string {
	if id.addr.Is6() {
		return netip.PrefixFrom(id.addr, 64).Masked().String()
	}
	return id.addr.String()
}

// kind is what a subject bans, as the bans table's kind column says.
func (id callerID) kind() string {
	if id.keyID != 0 {
		return "key"
	}
	return "address"
}

// parseBanSubject reads a subject: key:ID, or address:IP where an IPv6
// address (or its /64, PREFIX/64) names its /64. What it refuses is
// invalid, saying why.
func parseBanSubject(s string) (callerID, error) {
	if rest, ok := strings.CutPrefix(s, "key:"); ok {
		id, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || id < 1 {
			return callerID{}, errInvalid("subject %q: a key is key:ID, with the numeric id from petstore keys list", s)
		}
		return callerID{keyID: id}, nil
	}
	if rest, ok := strings.CutPrefix(s, "address:"); ok {
		if addr, err := netip.ParseAddr(rest); err == nil {
			return callerID{addr: limitedAddr(addr)}, nil
		}
		if p, err := netip.ParsePrefix(rest); err == nil && p.Addr().Is6() && !p.Addr().Is4In6() && p.Bits() == 64 {
			return callerID{addr: p.Masked().Addr()}, nil
		}
		return callerID{}, errInvalid("subject %q: an address is address:IP (an IPv6 address, or its /64, names its /64)", s)
	}
	return callerID{}, errInvalid("subject %q: want key:ID or address:IP", s)
}

// liftEvent is the ban.lifted event of b, lifted by actor on env at now;
// named is the subject the lift named (a key of the budget banned).
func liftEvent(b ban, named callerID, actor, env string, now time.Time) auditEvent {
	until := b.Until
	e := auditEvent{At: auditTime(now), Action: auditBanLifted, Actor: actor, Env: env,
		Details: auditDetails{BannedUntil: &until}}
	if named.keyID != 0 {
		e.KeyID = named.keyID
		if b.Subject.keyID != named.keyID {
			e.Details.Budget = b.Subject.keyID
		}
	} else {
		e.Address = named.addressText()
	}
	return e
}

// banFloor is the bans a server knows, by subject: those the database
// holds, and those this server saw in Redis's answers (hold). The limit
// rules take each as a floor under their own state. Looking one up costs
// nothing while none is held.
type banFloor struct {
	held  atomic.Bool
	mu    sync.RWMutex
	until map[callerID]time.Time
	// lifted are the ends of the bans lifted, by subject, until they
	// pass: an answer that read such a ban before its lift does not hold
	// it again.
	lifted map[callerID]time.Time
}

func newBanFloor() *banFloor {
	return &banFloor{until: make(map[callerID]time.Time), lifted: make(map[callerID]time.Time)}
}

// at is the end of id's ban as the floor knows it; zero for none. A nil
// floor knows none.
func (f *banFloor) at(id callerID) time.Time {
	if f == nil || !f.held.Load() {
		return time.Time{}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.until[id]
}

// hold raises id's floor to until at once: a ban this server saw in
// Redis's answer, which its fallback then keeps should Redis go away
// before the ban is stored and read back (docs/replicas.md). A ban lifted
// that ends as late is not held again.
func (f *banFloor) hold(id callerID, until, now time.Time) {
	if !f.at(id).Before(until) {
		return // held already: the ban's every later answer
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if until.After(now) && until.After(f.until[id]) && until.After(f.lifted[id]) {
		f.until[id] = until
		f.held.Store(true)
	}
}

// apply takes changes, read from the bans table, in: bans in force raise
// their subject's floor, lifted ones take it away. Floors and lifts that
// ended by now go.
func (f *banFloor) apply(changes []ban, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range changes {
		switch {
		case !b.LiftedAt.IsZero():
			delete(f.until, b.Subject)
			if b.Until.After(f.lifted[b.Subject]) {
				f.lifted[b.Subject] = b.Until
			}
		case b.Until.After(f.until[b.Subject]):
			f.until[b.Subject] = b.Until
		}
	}
	for _, m := range []map[callerID]time.Time{f.until, f.lifted} {
		maps.DeleteFunc(m, func(_ callerID, until time.Time) bool { return !until.After(now) })
	}
	f.held.Store(len(f.until) > 0)
}

// banFollower keeps a server's limiter in step with the bans table: it
// reads what changed since it last looked, raises or takes away floors,
// and runs each lift through the limiter. A lift the limiter could not
// apply (Redis away) is tried again at the next look, until its ban ends.
type banFollower struct {
	store    banStore
	floor    *banFloor
	limiter  rateLimiter
	now      func() time.Time
	version  int64
	unlifted []ban
}

// refresh reads the changes and applies them: first to the floor, so that
// no run raises a lifted ban again, then the lifts to the limiter.
func (f *banFollower) refresh(ctx context.Context) error {
	changes, err := f.store.BanChanges(ctx, f.version)
	if err != nil {
		return err
	}
	now := f.now()
	if len(changes) > 0 || f.floor.held.Load() {
		f.floor.apply(changes, now) // floors that ended go too
	}
	if len(changes) > 0 {
		f.version = changes[len(changes)-1].version
	}
	lifts := f.unlifted
	f.unlifted = nil
	for _, b := range changes {
		if !b.LiftedAt.IsZero() {
			lifts = append(lifts, b)
		}
	}
	for _, b := range lifts {
		if err := f.limiter.lift(ctx, b.Subject, b.Until); err != nil && b.Until.After(now) {
			f.unlifted = append(f.unlifted, b) // Redis is away: its outage is logged once, by the limiter
		}
	}
	return nil
}
