package domain

import (
	"errors"
	"fmt"
)

// ErrIdempotencyTaken: a live record holds the Idempotency-Key already.
var ErrIdempotencyTaken = &Error{Kind: KindConflict, Message: "idempotency key already used"}

// Error is what went wrong, in the domain's terms and free of HTTP (the
// package doc): each edge decides what to say of it.
type Error struct {
	Kind    Kind
	Message string    // says it to a person ("no pet has id 7"); unavailable has none
	Cause   error     // what went wrong underneath, for the log
	DB      DBFailure // unavailable: why
	Unsure  bool      // unavailable: a create reached the database, which may have stored it
}

type Kind uint8

const (
	KindNotFound    Kind = iota + 1 // no such pet or key
	KindInvalid                     // the rules refuse it: a revoked key cannot be rolled; a field of a body out of its range (the message names it)
	KindMalformed                   // it cannot be read at all: a body that is not JSON, or not one object
	KindConflict                    // it clashes with what is stored: an Idempotency-Key taken
	KindUnavailable                 // the database cannot serve it now, for the reason in db
)

func (e *Error) Error() string {
	if e.Kind == KindUnavailable {
		return "the database is unavailable (" + DBFailureNames[e.DB] + "): " + e.Cause.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

func NotFound(format string, args ...any) error  { return newError(KindNotFound, format, args) }
func Conflict(format string, args ...any) error  { return newError(KindConflict, format, args) }
func Invalid(format string, args ...any) error   { return newError(KindInvalid, format, args) }
func Malformed(format string, args ...any) error { return newError(KindMalformed, format, args) }

func newError(kind Kind, format string, args []any) error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// DBFailure is why the database could not serve a request: the cause label
// of petstore_database_unavailable_total.
type DBFailure uint8

const (
	DBTimeout       DBFailure = iota + 1 // no answer by the deadline (--db-timeout)
	DBPoolExhausted                      // no connection free by the deadline, or too many creates already waiting
	DBRefused                            // the database refused or cut the connection, or the disk refused the write
	DBFailures                           // how many causes there are, plus one
)

var DBFailureNames = [DBFailures]string{DBTimeout: "timeout", DBPoolExhausted: "pool_exhausted", DBRefused: "refused"}

func Unavailable(failure DBFailure, cause error) error {
	return &Error{Kind: KindUnavailable, DB: failure, Cause: cause}
}

// OutcomeUnknown is a create that reached the database, which then
// failed to say whether it committed: the pet may be stored.
func OutcomeUnknown(failure DBFailure, cause error) error {
	return &Error{Kind: KindUnavailable, DB: failure, Cause: cause, Unsure: true}
}

// DBFailureOf is why err says the database could not serve a request, or 0
// when it does not.
func DBFailureOf(err error) DBFailure {
	// AsType, not As, whose target escapes: an allocation on each call
	// with an error, and dbHealth.saw calls this with every store call's.
	if e, ok := errors.AsType[*Error](err); ok {
		return e.DB
	}
	return 0
}
