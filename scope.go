package main

import (
	"net/http"
	"strings"
)

// scopeSet is what an API key may do, a bit for each scope. A restricted
// key (keys create --scope pets:read) holds fewer than all; a key made
// without --scope, or before scopes existed, holds all. As the need of an
// operation, the empty set means any valid key will do.
type scopeSet uint8

const (
	scopePetsRead  scopeSet = 1 << iota // list and read pets, and the key's own rate limits
	scopePetsWrite                      // add pets
	// The scopes of admin tokens (admin.go), never of a key.
	scopeKeysRead  // read keys and their usage
	scopeKeysWrite // create, change, roll and revoke keys
	scopeAuditRead // read the audit trail
	scopeWebhooks  // manage webhook endpoints
	allScopes      = scopePetsRead | scopePetsWrite
	allAdminScopes = scopeKeysRead | scopeKeysWrite | scopeAuditRead | scopeWebhooks
	noScope        = scopeSet(0) // as a need: any valid key
)

// scopeNames are the scopes by name, in the order they are shown.
var scopeNames = []struct {
	scope scopeSet
	name  string
}{
	{scopePetsRead, "pets:read"},
	{scopePetsWrite, "pets:write"},
	{scopeKeysRead, "keys:read"},
	{scopeKeysWrite, "keys:write"},
	{scopeAuditRead, "audit:read"},
	{scopeWebhooks, "webhooks"},
}

// knownScopes lists the scopes for a message: "pets:read and pets:write".
const knownScopes = "pets:read and pets:write"

func (s scopeSet) has(need scopeSet) bool { return s&need == need }

// names are the scopes of s, in the order of scopeNames.
func (s scopeSet) names() []string {
	names := make([]string, 0, len(scopeNames))
	for _, n := range scopeNames {
		if s.has(n.scope) {
			names = append(names, n.name)
		}
	}
	return names
}

// appendJSON appends s as a JSON array of scope names.
func (s scopeSet) appendJSON(b []byte) []byte {
	b = append(b, '[')
	first := true
	for _, n := range scopeNames {
		if s.has(n.scope) {
			if !first {
				b = append(b, ',')
			}
			b = appendJSONString(b, n.name)
			first = false
		}
	}
	return append(b, ']')
}

// String is the scopes of s separated by spaces, as OAuth writes a scope
// list and as the database keeps it; "" for none.
func (s scopeSet) String() string { return strings.Join(s.names(), " ") }

// scopeNamed is the scope of a key called name, or ok false.
func scopeNamed(name string) (s scopeSet, ok bool) { return scopeWithin(name, allScopes) }

// scopeWithin is the scope called name among those of within, or ok false.
func scopeWithin(name string, within scopeSet) (s scopeSet, ok bool) {
	for _, n := range scopeNames {
		if n.name == name && within.has(n.scope) {
			return n.scope, true
		}
	}
	return 0, false
}

// storedScopes reads the scopes column. A name this version does not know
// (written by a later one) grants nothing here: a key never gains a right
// by being read by an older server.
func storedScopes(column string, within scopeSet) scopeSet {
	var s scopeSet
	for _, name := range strings.Fields(column) {
		if scope, ok := scopeWithin(name, within); ok {
			s |= scope
		}
	}
	return s
}

// requireScope answers 403 insufficient_scope to a request whose key lacks
// need; it runs after requireKey, so the request has a key and has been
// counted against its rate limit.
func requireScope(need scopeSet) middleware {
	if need == 0 {
		return func(next http.Handler) http.Handler { return next }
	}
	challenge := []string{`Bearer realm="petstore", error="insufficient_scope", scope="` + need.String() + `"`}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			info := recordOf(w)
			if !info.scoped(need) {
				insufficientScope(w, r, challenge, "this API key", "the key", need, info.key.Scopes)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// insufficientScope is the 403 to a credential that has scopes has and
// lacks need; holder and it name the credential ("this API key", "the
// key").
func insufficientScope(w http.ResponseWriter, r *http.Request, challenge []string, holder, it string, need, has scopeSet) {
	w.Header()["Www-Authenticate"] = challenge
	writeError(w, r, errorf(codeInsufficientScope, "%s lacks the %s scope, which %s %s needs; %s has %s",
		holder, need, r.Method, r.URL.Path, it, has.described()))
}

// described is s for a message: its scopes, or "no scope".
func (s scopeSet) described() string {
	if s == 0 {
		return "no scope"
	}
	return strings.Join(s.names(), " and ")
}
