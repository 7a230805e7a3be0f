package limits

import (
	_ "embed"
	"fmt"
	"time"

	"petstore/internal/domain"

	"github.com/redis/go-redis/v9"
)

//go:embed limit.lua
var limitScriptText string

var LimitScript = redis.NewScript(limitScriptText)

// figures are what a caller's figures make: the RateLimit-Policy header,
// and the script's arguments, boxed once.
type figures struct {
	policy                              string
	perMinute, perDay, banAfter, banFor any
}

func newFigures(lim domain.Limits, banAfter int, banFor time.Duration) *figures {
	return &figures{policyHeader(lim), lim.PerMinute, lim.PerDay, banAfter, banFor.Milliseconds()}
}

// scriptArgs are one run's arguments (limit.lua names each).
type scriptArgs struct {
	key   any   // the Redis key of the caller's state, boxed once
	nowMs int64 // 0: Redis TIME
	fig   *figures
	Cost  int64 // 1 counts a request, 0 only looks
	// durable: an API key; seed its stored count of today (-1: not read).
	durable               bool
	Seed, floor, floorDay int64
	owner                 any // this server's name, boxed, when lease.owner is set
	lease                 leaseAsk
	// banFloor is the end (ms) of the caller's ban as the database knows
	// it, 0 for none; lift, above 0, makes the run a lift of the ban that
	// ends then (limitRun names both).
	banFloor, lift int64
}

// The arguments that are the same in every run, boxed once: a number
// beyond 255 or a string made an argument costs an allocation.
var (
	scriptHash      any = LimitScript.Hash()
	scriptLeaseKeep any = leaseKeep.Milliseconds()
	scriptNone      any = int64(-1)
	scriptUnknown   any = int64(spentUnknown)
	scriptNoOwner   any = ""
)

func scriptArg(n int64) any {
	switch n {
	case -1:
		return scriptNone
	case spentUnknown:
		return scriptUnknown
	}
	return n
}

// Encode is the EVALSHA command of the run, in limit.lua's ARGV order.
func (a scriptArgs) Encode() []any {
	durable, owner := int64(0), scriptNoOwner
	if a.durable {
		durable = 1
	}
	if a.lease.owner != "" {
		owner = a.owner
	}
	return []any{"evalsha", scriptHash, 1, a.key,
		a.nowMs, a.fig.perMinute, a.fig.perDay, a.Cost, a.fig.banAfter, a.fig.banFor,
		durable, scriptArg(a.Seed), scriptArg(a.floor), a.floorDay,
		owner, a.lease.giveBack, scriptArg(a.lease.spentBy), a.lease.want, scriptLeaseKeep, LeaseShare, a.banFloor, a.lift}
}

// scriptAnswer is what limit.lua answers.
type scriptAnswer struct {
	Status int64 // Allowed, limited, ... (limit_model.go)
	NowMs  int64 // Redis's time of the run
	debt   int64 // how far the bucket's TAT is ahead of now, in 1/pm ms (tokenDebt a request)
	Count  int64 // the day count
	Day    int64 // the UTC day of now
	extra  int64 // limited: Retry-After in seconds; banned: the ban's end (ms)
	leased int64 // tokens beyond the request's own leased to the asking server
}

func decodeScriptAnswer(v []int64) (scriptAnswer, error) {
	if len(v) != 7 {
		return scriptAnswer{}, fmt.Errorf("rate-limit script returned %d numbers, want 7", len(v))
	}
	return scriptAnswer{Status: v[0], NowMs: v[1], debt: v[2], Count: v[3], Day: v[4], extra: v[5], leased: v[6]}, nil
}

// limitAnswer is a as limitRules would answer it under lim.
func (a scriptAnswer) limitAnswer(lim domain.Limits) limitAnswer {
	l := limitAnswer{
		status: a.Status, now: time.UnixMilli(a.NowMs), day: a.Day, dayCount: a.Count, leased: a.leased,
		tokens: float64(lim.PerMinute) - float64(a.debt)/tokenDebt,
	}
	switch a.Status {
	case limited:
		l.retryAfter = time.Duration(a.extra) * time.Second
	case banned, banStarted:
		l.bannedUntil = time.UnixMilli(a.extra)
	}
	return l
}
