// Package keyring answers "which API key is this token?" from memory, so
// that a request costs no query: the keys by hash, reloaded when the
// database's keys version moves; each key's note of use (its last use, and
// its requests of the day by outcome, flushed into the usage history); and
// why a token is refused (Failure, with its Reason for the metrics).
//
// It imports the domain and the limits (for a budget's day).
package keyring
