package main

// Restricted keys (DESIGN.md "Restricted keys and the audit trail"): the
// scopes a key is made with, kept and shown.

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestKeysCreateScopes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		want  []string
		table string
	}{
		{"without --scope", nil, nil, []string{"pets:read", "pets:write"}, "pets:read,pets:write"},
		{"read only", []string{"--scope", "pets:read"}, nil, []string{"pets:read"}, "pets:read"},
		{"write only", []string{"--scope=pets:write"}, nil, []string{"pets:write"}, "pets:write"},
		{"repeated", []string{"--scope", "pets:write", "--scope", "pets:read"}, nil, []string{"pets:read", "pets:write"}, "pets:read,pets:write"},
		{"comma-separated", []string{"--scope", "pets:write, pets:read"}, nil, []string{"pets:read", "pets:write"}, "pets:read,pets:write"},
		{"named twice", []string{"--scope", "pets:read,pets:read"}, nil, []string{"pets:read"}, "pets:read"},
		{"PETSTORE_SCOPE", nil, map[string]string{"PETSTORE_SCOPE": "pets:read"}, []string{"pets:read"}, "pets:read"},
		{"the flag over PETSTORE_SCOPE", []string{"--scope", "pets:write"}, map[string]string{"PETSTORE_SCOPE": "pets:read"}, []string{"pets:write"}, "pets:write"},
	}
	bothWays(t, func(t *testing.T, petstore cliRunner) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				db := filepath.Join(t.TempDir(), "keys.db")
				res := petstore(t, tt.env, append([]string{"keys", "create", "--db", db, "--plan", "free"}, tt.args...)...)
				if res.code != 0 {
					t.Fatalf("exit status %d\n%s", res.code, res.stderr)
				}
				if !strings.Contains(res.stderr, strings.Join(tt.want, " and ")) {
					t.Errorf("standard error %q does not name the key's scopes %v", res.stderr, tt.want)
				}
				if keys := listKeysJSON(t, petstore, db); !slices.Equal(keys[0].Scopes, tt.want) {
					t.Errorf("keys list --json: scopes %q, want %q", keys[0].Scopes, tt.want)
				}
				table := petstore(t, nil, "keys", "list", "--db", db)
				lines := strings.Split(strings.TrimSpace(table.stdout), "\n")
				if f := strings.Fields(lines[len(lines)-1]); f[len(f)-1] != tt.table {
					t.Errorf("keys list: scopes column %q, want %q\n%s", f[len(f)-1], tt.table, table.stdout)
				}
			})
		}
	})
}

func TestKeysCreateRefusesABadScope(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		mentions []string
	}{
		{"an unknown scope", []string{"--scope", "pets:admin"}, []string{"--scope", `"pets:admin"`, "pets:read", "pets:write"}},
		{"an unknown scope among known ones", []string{"--scope", "pets:read,admin"}, []string{"--scope", `"admin"`, "pets:read", "pets:write"}},
		{"an empty --scope", []string{"--scope", ""}, []string{"--scope", "pets:read", "pets:write"}},
		{"an empty --scope beside a good one", []string{"--scope", "pets:read", "--scope="}, []string{"--scope", "pets:read", "pets:write"}},
		{"an empty scope in a list", []string{"--scope", "pets:read,"}, []string{"--scope", "pets:read", "pets:write"}},
		{"a scope's name in another case", []string{"--scope", "PETS:READ"}, []string{"--scope", `"PETS:READ"`}},
		{"--scope without its value", []string{"--scope"}, []string{"scope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bothWays(t, func(t *testing.T, petstore cliRunner) {
				db := filepath.Join(t.TempDir(), "keys.db")
				res := petstore(t, nil, append([]string{"keys", "create", "--db", db, "--plan", "free"}, tt.args...)...)
				wantFailure(t, res, 2)
				for _, m := range tt.mentions {
					if !strings.Contains(res.stderr, m) {
						t.Errorf("standard error %q does not name %s", res.stderr, m)
					}
				}
				wantNoFile(t, db)
			})
		})
	}
}

func TestRollKeepsTheScopes(t *testing.T) {
	eachStore(t, func(t *testing.T, opts testOptions) {
		s := newTestServerWith(t, opts)
		for _, scopes := range []scopeSet{scopePetsRead, scopePetsWrite, allScopes} {
			terms := s.keyTerms("pro")
			terms.Scopes = scopes
			k, _ := s.mustCreate(terms)
			_, rolled, _ := s.roll(k.ID, time.Hour)
			if rolled.Scopes != scopes {
				t.Errorf("a key of %q rolled to one of %q", scopes, rolled.Scopes)
			}
			stored, err := s.store.Keys(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, sk := range stored {
				if (sk.ID == k.ID || sk.ID == rolled.ID) && sk.Scopes != scopes {
					t.Errorf("key %d stored with %q, want %q", sk.ID, sk.Scopes, scopes)
				}
			}
		}
	})
}

func TestKeysRollKeepsTheScopes(t *testing.T) {
	t.Parallel()
	bothWays(t, func(t *testing.T, petstore cliRunner) {
		db := filepath.Join(t.TempDir(), "keys.db")
		mustCreateKeyCLI(t, petstore, "--db", db, "--plan", "free", "--scope", "pets:read")
		if res := petstore(t, nil, "keys", "roll", "--db", db, "1"); res.code != 0 {
			t.Fatalf("keys roll: exit status %d\n%s", res.code, res.stderr)
		}
		keys := listKeysJSON(t, petstore, db)
		for _, k := range keys {
			if !slices.Equal(k.Scopes, []string{"pets:read"}) {
				t.Errorf("key %d (%s): scopes %q, want [pets:read]", k.ID, k.State, k.Scopes)
			}
		}
	})
}

func TestStoredScopesGrantOnlyWhatTheyName(t *testing.T) {
	tests := []struct {
		column string
		want   scopeSet
	}{
		{"pets:read pets:write", allScopes},
		{"pets:write pets:read", allScopes},
		{"pets:read", scopePetsRead},
		{"pets:write", scopePetsWrite},
		{"", 0},
		{"pets:read orders:read", scopePetsRead}, // a later version's scope grants nothing here
		{"  pets:write  ", scopePetsWrite},
	}
	for _, tt := range tests {
		if got := storedScopes(tt.column); got != tt.want {
			t.Errorf("storedScopes(%q) = %q, want %q", tt.column, got, tt.want)
		}
	}
	for s := range allScopes + 1 {
		if got := storedScopes(s.String()); got != s {
			t.Errorf("scopes %q stored and read back as %q", s, got)
		}
	}
}
