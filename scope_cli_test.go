package main

// Restricted keys (docs/api.md, "Scopes"): the
// scopes a key is made with, kept and shown.

import (
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"petstore/internal/httpapi"
	"petstore/internal/servertest"
	"petstore/internal/testkit"
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
	viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				db := filepath.Join(t.TempDir(), "keys.db")
				res := petstore(t, tt.env, append([]string{"keys", "create", "--db", db, "--plan", "free"}, tt.args...)...)
				if res.Code != 0 {
					t.Fatalf("exit status %d\n%s", res.Code, res.Stderr)
				}
				if !strings.Contains(res.Stderr, strings.Join(tt.want, " and ")) {
					t.Errorf("standard error %q does not name the key's scopes %v", res.Stderr, tt.want)
				}
				if keys := listKeysJSON(t, petstore, db); !slices.Equal(keys[0].Scopes, tt.want) {
					t.Errorf("keys list --json: scopes %q, want %q", keys[0].Scopes, tt.want)
				}
				table := petstore(t, nil, "keys", "list", "--db", db)
				lines := strings.Split(strings.TrimSpace(table.Stdout), "\n")
				if f := strings.Fields(lines[len(lines)-1]); f[len(f)-1] != tt.table {
					t.Errorf("keys list: scopes column %q, want %q\n%s", f[len(f)-1], tt.table, table.Stdout)
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
			viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
				db := filepath.Join(t.TempDir(), "keys.db")
				res := petstore(t, nil, append([]string{"keys", "create", "--db", db, "--plan", "free"}, tt.args...)...)
				wantFailure(t, res, 2)
				for _, m := range tt.mentions {
					if !strings.Contains(res.Stderr, m) {
						t.Errorf("standard error %q does not name %s", res.Stderr, m)
					}
				}
				testkit.WantNoFile(t, db)
			})
		})
	}
}

func TestKeysRollKeepsTheScopes(t *testing.T) {
	t.Parallel()
	viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
		db := filepath.Join(t.TempDir(), "keys.db")
		mustCreateKeyCLI(t, petstore, "--db", db, "--plan", "free", "--scope", "pets:read")
		if res := petstore(t, nil, "keys", "roll", "--db", db, "1"); res.Code != 0 {
			t.Fatalf("keys roll: exit status %d\n%s", res.Code, res.Stderr)
		}
		keys := listKeysJSON(t, petstore, db)
		for _, k := range keys {
			if !slices.Equal(k.Scopes, []string{"pets:read"}) {
				t.Errorf("key %d (%s): scopes %q, want [pets:read]", k.ID, k.State, k.Scopes)
			}
		}
	})
}

// TestEachOperationWithEachScope drives every operation with a read-only, a
// write-only and a full key, made by keys create, through run() serving on
// a port, on each engine.
func TestEachOperationWithEachScope(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                      string
		method, path, body        string
		readOnly, writeOnly, full int
		scope                     string // the scope a 403 names
	}{
		{"listPets", "GET", "/v1/pets", "", 200, 403, 200, "pets:read"},
		{"listPets, HEAD", "HEAD", "/v1/pets", "", 200, 403, 200, "pets:read"},
		{"listPets, a bad limit", "GET", "/v1/pets?limit=0", "", 400, 403, 400, "pets:read"},
		{"createPet", "POST", "/v1/pets", `{"name":"Rex","categoryId":1}`, 403, 201, 201, "pets:write"},
		{"createPet, a bad body", "POST", "/v1/pets", `{"name":""}`, 403, 400, 400, "pets:write"},
		{"getPet", "GET", "/v1/pets/1", "", 200, 403, 200, "pets:read"},
		{"getPet, an unknown pet", "GET", "/v1/pets/999", "", 404, 403, 404, "pets:read"},
		{"getRateLimit", "GET", "/v1/rate_limit", "", 200, 403, 200, "pets:read"},
		{"listStoreOrders", "GET", "/v1/store/orders", "", 501, 501, 501, ""},
		{"getOpenAPI", "GET", "/v1/openapi.yaml", "", 200, 200, 200, ""},
		{"another method on /v1/pets", "DELETE", "/v1/pets", "", 405, 405, 405, ""},
		{"an unknown path", "GET", "/v1/owners", "", 404, 404, 404, ""},
	}
	servertest.EachStoreInDir(t, func(t *testing.T, _, db string) {
		p := runServing(t, nil, withTestRedis(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db})...)
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
		defer client.CloseIdleConnections()
		keys := make([]string, len(scopeKinds))
		for i, kind := range scopeKinds {
			keys[i] = mustCreateKeyCLI(t, viaRun, append([]string{"--db", db, "--plan", "pro"}, kind.args...)...)
		}
		if res := faultDo(client, "POST", p.url+"/v1/pets", keys[2], `{"name":"Bella","categoryId":1}`); res.status != 201 {
			t.Fatalf("create the first pet: %d %s %v", res.status, res.body, res.err)
		}
		for _, tt := range tests {
			for i, want := range []int{tt.readOnly, tt.writeOnly, tt.full} {
				t.Run(tt.name+" with a "+scopeKinds[i].name+" key", func(t *testing.T) {
					res := faultDo(client, tt.method, p.url+tt.path, keys[i], tt.body)
					if res.status != want {
						t.Fatalf("%s %s: %d %s %v, want %d", tt.method, tt.path, res.status, res.body, res.err, want)
					}
					challenge := res.header.Get("WWW-Authenticate")
					if want != http.StatusForbidden {
						if challenge != "" {
							t.Errorf("a %d with WWW-Authenticate: %s", want, challenge)
						}
						return
					}
					wantChallenge := `Bearer realm="petstore", error="insufficient_scope", scope="` + tt.scope + `"`
					if challenge != wantChallenge {
						t.Errorf("WWW-Authenticate: %s, want %s", challenge, wantChallenge)
					}
					if tt.method != "HEAD" {
						servertest.WantError(t, testkit.Recorded(&http.Response{StatusCode: res.status, Header: res.header}, string(res.body)), http.StatusForbidden, httpapi.CodeInsufficientScope, tt.scope)
					}
					if res.header.Get("X-RateLimit-Remaining") == "" {
						t.Error("a 403 without the rate-limit headers")
					}
				})
			}
		}
	})
}

// scopeKinds are the keys every operation is tried with.
var scopeKinds = []struct {
	name string
	args []string // keys create's --scope
}{
	{"read-only", []string{"--scope", "pets:read"}},
	{"write-only", []string{"--scope", "pets:write"}},
	{"full", nil},
}
