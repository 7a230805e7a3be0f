package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"petstore/internal/domain"
	"petstore/internal/keyring"
	"petstore/internal/limits"
	"petstore/internal/metrics"
	"petstore/internal/tracing"
)

// The request's record: what the steps of a request learn about it, for the
// handlers (the caller's key), the request's log line, its count in the
// key's usage history and its metrics. It rides on the ResponseWriter that
// LogRequests passes on (statusWriter), in the one allocation a request's
// tracking costs, and a step finds it by walking Unwrap, the rule
// http.ResponseController follows (RecordOf).
//
// Each step writes its part through one method below, in the order routes.go
// runs the steps. Each method first checks the stage the request reached
// (reach): steps wired in another order fail at their first request, a 500
// whose log line names the two steps, instead of, say, counting a keyed
// request against its client address.

// stage is how far a request came through the steps, in routes.go's order.
// A route takes some of them (routes.go, access): withKey all of logged to
// scoped, peeksKey logged, authenticated and peeked (or withKey's), keyless
// logged to limited, withAdminToken logged and admitted.
type stage uint8

const (
	stageNone          stage = iota
	stageLogged              // logRequests: the record made, the request's id chosen
	stageAuthenticated       // authenticate: the key, or why the request has none
	stagePeeked              // handleRateLimit: the key's windows read, nothing spent
	stageLimited             // limit: counted against the key or the client address
	stageKeyed               // requireKey: the request has a valid key
	stageScoped              // requireScope: the key holds the route's scope, or not (403)
	stageAdmitted            // adminGate.require: a valid admin token with the route's scope
	stageFinished            // logRequests, once the handler returned: counted and logged
	stages
)

// stageSteps name the step that reaches each stage, for the failure of
// steps out of order.
var stageSteps = [stages]string{
	stageNone: "nothing", stageLogged: "logRequests", stageAuthenticated: "authenticate",
	stagePeeked: "handleRateLimit", stageLimited: "limit", stageKeyed: "requireKey",
	stageScoped: "requireScope", stageAdmitted: "adminGate.require", stageFinished: "logRequests' end",
}

// stageAfter is the stage each stage follows, as routes.go chains the
// steps (stageFinished follows any).
var stageAfter = [stages]stage{
	stageLogged:        stageNone,
	stageAuthenticated: stageLogged,
	stagePeeked:        stageAuthenticated,
	stageLimited:       stageAuthenticated,
	stageKeyed:         stageLimited,
	stageScoped:        stageKeyed,
	stageAdmitted:      stageLogged,
}

// Record is the request's record.
type Record struct {
	stage stage
	id    string
	// The caller: an API key (and its note of use, where its usage history
	// is counted) or an admin token; for a request without a key, why not.
	key       *domain.Key
	use       *keyring.Use
	admin     *domain.AdminToken
	auth      keyring.Failure
	authErr   error // the key could not be looked up
	sentToken bool
	// rateLimit is the limiter's decision (0: not limited, as /healthz);
	// today and usage, the day and column of the key's usage history it is
	// counted in at the end.
	rateLimit metrics.Decision
	today     int64
	usage     domain.UsageOutcome
	// err is an internal error or panic, for the log; db, why the database
	// could not serve the request (a 503), for the metrics.
	err error
	db  domain.DBFailure

	// span is the request's server span when it is sampled; the zero Span
	// otherwise (LogRequests).
	span tracing.Span

	// values backs the response's header values (see HeaderValue).
	values  [6]string
	nvalues int
}

var errRecordHidden = errors.New("the request's record is not found by walking the ResponseWriter's Unwrap: " +
	"a wrapper between logRequests and this step has no Unwrap method (http.TimeoutHandler's has none), or the request did not pass logRequests")

// findRecord is the record on w or on a writer it wraps; nil when none is.
func findRecord(w http.ResponseWriter) *Record {
	for {
		switch t := w.(type) {
		case *statusWriter:
			return &t.record
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return nil
		}
	}
}

// RecordOf is the record of the request answered through w; a request
// whose record cannot be found fails (errRecordHidden) rather than go on
// without its key. Written for the usual case, w LogRequests' own writer,
// to be inlined in each step.
func RecordOf(w http.ResponseWriter) *Record {
	if sw, ok := w.(*statusWriter); ok {
		return &sw.record
	}
	return recordBehind(w)
}

func recordBehind(w http.ResponseWriter) *Record {
	info := findRecord(w)
	if info == nil {
		panic(errRecordHidden)
	}
	return info
}

// reach moves the request to stage s, which must follow the stage it is at.
func (info *Record) reach(s stage) {
	if info.stage != stageAfter[s] {
		outOfOrder(s, info.stage)
	}
	info.stage = s
}

// outOfOrder fails a request whose step s came at stage at. Kept out of
// reach, so that reach is inlined into each step.
//
//go:noinline
func outOfOrder(s, at stage) {
	panic(fmt.Sprintf("the request's steps ran out of order: %s after %s; routes.go runs it after %s",
		stageSteps[s], stageSteps[at], stageSteps[stageAfter[s]]))
}

// The steps' parts, in routes.go's order.

// logged (LogRequests) starts the record with the request's id.
func (info *Record) logged(id string) {
	info.reach(stageLogged)
	info.id = id
}

// Authenticated (authenticate) notes the request's key and its note of use
// (h nil: none), or why it has none: auth, or authErr when the key could
// not be looked up.
func (info *Record) Authenticated(h *keyring.Held, sentToken bool, auth keyring.Failure, authErr error) {
	info.reach(stageAuthenticated)
	if h != nil {
		info.key, info.use = &h.Key, h.Use
	}
	info.sentToken, info.auth, info.authErr = sentToken, auth, authErr
}

// Peeking (handleRateLimit) is the key whose state the request reads
// without spending any; it is counted in the usage history as limit counts
// a request (decided).
func (info *Record) Peeking() *domain.Key {
	info.reach(stagePeeked)
	return info.key
}

// Limiting (limit) is the key the request is counted against; nil: its
// client address.
func (info *Record) Limiting() *domain.Key {
	info.reach(stageLimited)
	return info.key
}

// Decided (limit, handleRateLimit) notes the limiter's decision on the
// request, and the day and column of the usage history it is counted in.
func (info *Record) Decided(d *limits.Decision) {
	info.rateLimit, info.today, info.usage = decisionOf(d), d.Today, domain.UsageAllowed
	if !d.Allowed {
		info.usage = outcomeOf(d)
	}
}

// decisionOf is how d counts in petstore_ratelimit_decisions_total.
func decisionOf(d *limits.Decision) metrics.Decision {
	switch {
	case d.Allowed:
		return metrics.Allowed
	case d.Code == CodeTemporarilyBanned:
		return metrics.Banned
	}
	return metrics.Limited
}

// Keyed (requireKey) is the request's valid key, or nil when it has none.
func (info *Record) Keyed() *domain.Key {
	info.reach(stageKeyed)
	return info.key
}

// Scoped (requireScope) tells whether the request's key holds need; a
// request whose key does not is counted as forbidden.
func (info *Record) Scoped(need domain.ScopeSet) bool {
	info.reach(stageScoped)
	if !info.key.Scopes.Has(need) {
		info.usage = domain.UsageForbidden
		return false
	}
	return true
}

// Admitted (adminGate.require) notes the request's admin token.
func (info *Record) Admitted(t *domain.AdminToken) {
	info.reach(stageAdmitted)
	info.admin = t
}

// Failed (WriteError, at any stage) notes what only the log and the
// metrics may see of an error answered: its cause, and why the database
// failed.
func (info *Record) Failed(cause error, db domain.DBFailure) {
	if cause != nil {
		info.err = cause
	}
	if db != 0 {
		info.db = db
	}
}

// finished (LogRequests, once the handler returned) counts the request in
// its key's usage history, once, in the column its record ended in: a
// request with a valid key that the limiter decided on (limit or
// handleRateLimit).
func (info *Record) finished() {
	info.stage = stageFinished
	if info.use != nil && info.rateLimit != 0 {
		info.use.Count(info.today, info.usage)
	}
}

// HeaderValue returns v as a header value, a one-element slice taken from
// the request's own store: the request's header values cost one allocation
// (its record) instead of one each.
func (info *Record) HeaderValue(v string) []string {
	if info.nvalues == len(info.values) {
		return []string{v}
	}
	s := info.values[info.nvalues : info.nvalues+1 : info.nvalues+1]
	s[0] = v
	info.nvalues++
	return s
}

// What the steps and handlers read of the record, each part written only
// by the step's method above: the caller's API key (nil: none), its admin
// token (nil off the admin API), why it has no key (the zero Failure when it
// has one), the error that kept the key from being looked up, and whether
// it sent a bearer token at all.

func (info *Record) Key() *domain.Key { return info.key }

// keyID is the caller's key's id for its server span; 0: no key.
func (info *Record) keyID() int64 {
	if info.key == nil {
		return 0
	}
	return info.key.ID
}

func (info *Record) Admin() *domain.AdminToken { return info.admin }
func (info *Record) Auth() keyring.Failure     { return info.auth }
func (info *Record) AuthErr() error            { return info.authErr }
func (info *Record) SentToken() bool           { return info.sentToken }
