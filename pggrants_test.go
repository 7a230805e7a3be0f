package main

import (
	"petstore/internal/store"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"petstore/internal/testkit"
)

// The grants a server checks at start are those docs/production.md gives.
func TestTheGrantsCheckedAreTheDocumentedOnes(t *testing.T) {
	documented := leastPrivilegeGrants(t, "petstore", "public")
	if checked := store.ServerGrants("petstore", "public"); !slices.Equal(checked, documented) {
		t.Errorf("the grants checked at start:\n%s\nthe grants of docs/production.md:\n%s",
			strings.Join(checked, "\n"), strings.Join(documented, "\n"))
	}
}

// A role that may not use the schema of its search_path, or lacks a grant
// on a table or a sequence, is told at start which grant, with the
// statement that gives it; run as the owner, that statement is enough.
func TestARoleLackingAGrantIsToldTheStatementThatGivesIt(t *testing.T) {
	t.Parallel() // its roles and schema are its own
	roles := newTwoRoles(t)
	app, schema := roles.app, roles.schema
	if res := viaRun(t, nil, "migrate", "--db", roles.as(t, roles.owner)); res.Code != 0 {
		t.Fatalf("petstore migrate as the owner: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
	owner, err := pgx.Connect(t.Context(), roles.as(t, roles.owner))
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(t.Context())
	for _, grant := range leastPrivilegeGrants(t, app, schema)[1:] { // all but USAGE on the schema
		mustExecPG(t, owner, grant)
	}
	redis := withTestRedis(t, []string{"serve", "--db", roles.as(t, app)})[3:]
	for _, c := range []struct {
		name, revoke, want string
	}{
		{"no USAGE on the schema", "", "GRANT USAGE ON SCHEMA " + schema + " TO " + app + ";"},
		{"no SELECT on the schema's version", "REVOKE SELECT ON petstore_schema FROM " + app, "GRANT SELECT ON petstore_schema TO " + app + ";"},
		{"no INSERT on the audit trail", "REVOKE INSERT ON audit_events FROM " + app, "GRANT INSERT ON audit_events TO " + app + ";"},
		{"nothing on bans", "REVOKE ALL ON bans FROM " + app, "GRANT SELECT, INSERT, UPDATE, DELETE ON bans TO " + app + ";"},
		{"no UPDATE on the pets' sequence", "REVOKE UPDATE ON SEQUENCE pets_id_seq FROM " + app, "GRANT UPDATE ON SEQUENCE pets_id_seq TO " + app + ";"},
		{"no USAGE on a sequence", "REVOKE USAGE ON SEQUENCE api_keys_id_seq FROM " + app, "GRANT USAGE ON ALL SEQUENCES IN SCHEMA " + schema + " TO " + app + ";"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.revoke != "" {
				mustExecPG(t, owner, c.revoke)
			}
			res := testkit.RunPetstore(t, t.TempDir(), nil, append([]string{"serve", "--addr", "127.0.0.1:0", "--db", roles.as(t, app)}, redis...)...)
			wantFailure(t, res, 1)
			if !strings.Contains(res.Stderr, c.want) || strings.Contains(res.Stderr, "NULL") {
				t.Errorf("serve as a role with %s: %q, want it to name %s", c.name, res.Stderr, c.want)
			}
			mustExecPG(t, owner, c.want)
			if res := viaRun(t, nil, "keys", "list", "--db", roles.as(t, app)); res.Code != 0 {
				t.Errorf("keys list after %s: exit %d %s", c.want, res.Code, res.Stderr)
			}
		})
	}
}
