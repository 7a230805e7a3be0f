package domain

import "strings"

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

// KnownScopes lists the scopes for a message: "pets:read and pets:write".
const KnownScopes = "pets:read and pets:write"

func (s ScopeSet) Has(need ScopeSet) bool { return s&need == need }

// Names are the scopes of s, in the order of scopeNames.
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

// scopeWithin is the scope called name among those of within, or ok false.
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

// Described is s for a message: its scopes, or "no scope".
func (s ScopeSet) Described() string {
	if s == 0 {
		return "no scope"
	}
	return strings.Join(s.Names(), " and ")
}
