package domain

import "testing"

func TestStoredScopesGrantOnlyWhatTheyName(t *testing.T) {
	tests := []struct {
		column string
		want   ScopeSet
	}{
		{"pets:read pets:write", AllScopes},
		{"pets:write pets:read", AllScopes},
		{"pets:read", ScopePetsRead},
		{"pets:write", ScopePetsWrite},
		{"", 0},
		{"pets:read orders:read", ScopePetsRead}, // a later version's scope grants nothing here
		{"  pets:write  ", ScopePetsWrite},
	}
	for _, tt := range tests {
		if got := StoredScopes(tt.column, AllScopes); got != tt.want {
			t.Errorf("storedScopes(%q) = %q, want %q", tt.column, got, tt.want)
		}
	}
	for s := range AllScopes + 1 {
		if got := StoredScopes(s.String(), AllScopes); got != s {
			t.Errorf("scopes %q stored and read back as %q", s, got)
		}
	}
}
