package main

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"petstore/internal/store"
	"petstore/internal/testkit"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// leastPrivilegeGrants are the GRANT statements of docs/production.md's
// "Least privilege on PostgreSQL", for role on schema.
func leastPrivilegeGrants(t *testing.T, role, schema string) []string {
	t.Helper()
	_, section, ok := strings.Cut(docPages(t)["docs/production.md"], "## Least privilege on PostgreSQL")
	if !ok {
		t.Fatal("docs/production.md has no section Least privilege on PostgreSQL")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	grants := regexp.MustCompile(`(?m)^    (GRANT .*;)$`).FindAllStringSubmatch(section, -1)
	if len(grants) == 0 {
		t.Fatal("the Least privilege section shows no GRANT")
	}
	ownRole, ownSchema := regexp.MustCompile(`\bpetstore\b`), regexp.MustCompile(`\bpublic\b`)
	var out []string
	for _, g := range grants {
		out = append(out, ownSchema.ReplaceAllString(ownRole.ReplaceAllString(g[1], role), schema))
	}
	return out
}

// twoRoles are an owner role, the servers' role and a schema the owner
// owns, made for a test on the tests' PostgreSQL and dropped after it.
type twoRoles struct {
	owner, app, schema string
	admin              *pgx.Conn // as the tests' superuser
}

func newTwoRoles(t *testing.T) twoRoles {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, testkit.PostgresServer(t))
	if err != nil {
		t.Fatal(err)
	}
	suffix := strings.ToLower(rand.Text()[:10])
	r := twoRoles{owner: "petstore_owner_" + suffix, app: "petstore_app_" + suffix, schema: "petstore_lp_" + suffix, admin: admin}
	for _, role := range []string{r.owner, r.app} {
		mustExecPG(t, admin, "CREATE ROLE "+role+" LOGIN PASSWORD 'pw-"+role+"'") // not the name, which a message shows
	}
	t.Cleanup(func() {
		for _, sql := range []string{"DROP SCHEMA IF EXISTS " + r.schema + " CASCADE", "DROP OWNED BY " + r.app, "DROP OWNED BY " + r.owner,
			"DROP ROLE " + r.app, "DROP ROLE " + r.owner} {
			if _, err := admin.Exec(ctx, sql); err != nil {
				t.Errorf("%s: %v", sql, err)
			}
		}
		admin.Close(ctx)
	})
	mustExecPG(t, admin, "CREATE SCHEMA "+r.schema+" AUTHORIZATION "+r.owner)
	return r
}

// as is the URL of the database as role, its search_path the schema.
func (r twoRoles) as(t *testing.T, role string) string {
	u, err := url.Parse(testkit.PostgresServer(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, "pw-"+role)
	q := u.Query()
	q.Set("search_path", r.schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func mustExecPG(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// An owner role migrates, the servers' role gets the documented grants and
// nothing else: a server and the key commands work as that role, and it
// cannot disable the audit trail's trigger, change, delete or truncate an
// event. On a schema that is behind, such a server refuses to start,
// naming petstore migrate.
func TestLeastPrivilegeRoleCannotRewriteTheTrail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	roles := newTwoRoles(t)
	owner, app, schema := roles.owner, roles.app, roles.schema
	mustExec := func(conn *pgx.Conn, sql string) {
		t.Helper()
		mustExecPG(t, conn, sql)
	}
	// As public is: everyone may use it, the owner alone create in it.
	mustExec(roles.admin, "GRANT USAGE ON SCHEMA "+schema+" TO "+app)
	as := func(role string) string { return roles.as(t, role) }
	redis := testkit.RedisURL(t)
	serveAs := func(role string) cliResult {
		return testkit.RunPetstore(t, t.TempDir(), nil, "serve", "--addr", "127.0.0.1:0", "--db", as(role), "--redis", redis)
	}
	wantRefusedToMigrate := func(when string) {
		t.Helper()
		res := serveAs(app)
		wantFailure(t, res, 1)
		if !strings.Contains(res.Stderr, "petstore migrate") {
			t.Errorf("serve as the servers' role %s: %s, want it to name petstore migrate", when, res.Stderr)
		}
	}

	wantRefusedToMigrate("on an empty schema")
	if res := viaRun(t, nil, "migrate", "--db", as(owner)); res.Code != 0 || !strings.Contains(res.Stdout, "up to date") {
		t.Fatalf("petstore migrate as the owner: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
	ownerConn, err := pgx.Connect(ctx, as(owner))
	if err != nil {
		t.Fatal(err)
	}
	defer ownerConn.Close(ctx)
	for _, grant := range leastPrivilegeGrants(t, app, schema) {
		mustExec(ownerConn, grant)
	}

	// The servers' role runs the commands and a server.
	id, _ := addWebhookCLI(t, viaRun, as(app), "http://127.0.0.1:9/in")                     // refused: loopback
	key := mustCreateKeyCLI(t, viaRun, "--db", as(app), "--plan", "pro", "--name", "least") // queues key.created
	if res := viaRun(t, nil, "webhooks", "rotate", "--db", as(app), id); res.Code != 0 {
		t.Errorf("webhooks rotate as the servers' role: exit %d %s", res.Code, res.Stderr)
	}
	if res := viaRun(t, nil, "admin", "create", "--db", as(app), "--name", "least"); res.Code != 0 {
		t.Errorf("admin create as the servers' role: exit %d %s", res.Code, res.Stderr)
	}
	p := runServing(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", as(app), "--redis", redis)
	client := &http.Client{}
	if res := faultDo(client, "POST", p.url+"/v1/pets", key, `{"name":"Rex","categoryId":1}`); res.status != http.StatusCreated {
		t.Errorf("create as the servers' role: %d %s %v\n%s", res.status, res.body, res.err, p.stderr)
	}
	if res := faultDo(client, "POST", p.url+"/v1/pets", key, `{"name":"Max","categoryId":1}`, "Idempotency-Key", "least-1"); res.status != http.StatusCreated {
		t.Errorf("create with an Idempotency-Key as the servers' role: %d %s", res.status, res.body)
	}
	for _, target := range []string{"/v1/pets", "/v1/pets/1"} {
		if res := faultDo(client, "GET", p.url+target, key, ""); res.status != http.StatusOK {
			t.Errorf("GET %s as the servers' role: %d %s", target, res.status, res.body)
		}
	}
	p.stop(t) // writes the usage and the keys' last use
	if strings.Contains(p.stderr.String(), "permission denied") {
		t.Errorf("the server as the servers' role was refused something:\n%s", p.stderr)
	}
	if res := viaRun(t, nil, "keys", "list", "--db", as(app)); res.Code != 0 {
		t.Errorf("keys list as the servers' role: exit %d %s", res.Code, res.Stderr)
	}

	// The trail, as the servers' role: only added to.
	appConn, err := pgx.Connect(ctx, as(app))
	if err != nil {
		t.Fatal(err)
	}
	defer appConn.Close(ctx)
	var before int
	if err := appConn.QueryRow(ctx, "SELECT count(*) FROM audit_events").Scan(&before); err != nil || before == 0 {
		t.Fatalf("audit events seen by the servers' role: %d, %v", before, err)
	}
	for _, sql := range []string{
		"ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only",
		"ALTER TABLE audit_events DISABLE TRIGGER ALL",
		"UPDATE audit_events SET actor = 'someone else'",
		"DELETE FROM audit_events",
		"TRUNCATE audit_events",
		"DROP TABLE audit_events",
	} {
		_, err := appConn.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" /* insufficient_privilege */ {
			t.Errorf("%s as the servers' role: %v, want permission denied", sql, err)
		}
	}
	var after int
	if err := appConn.QueryRow(ctx, "SELECT count(*) FROM audit_events").Scan(&after); err != nil || after != before {
		t.Errorf("audit events after the attempts: %d (%v), want the %d there were", after, err, before)
	}

	// The ACME cache of a fleet (--acme-domain on PostgreSQL): kept,
	// read, locked and cleared as the servers' role.
	appStore, err := store.OpenPostgres(ctx, as(app), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer appStore.Close()
	acme := appStore.ACMEStorage()
	for _, step := range []error{acme.Lock(ctx, "issue_cert_lp.test"), acme.Store(ctx, "certificates/lp.test/lp.test.crt", []byte("pem")),
		func() error { _, err := acme.Load(ctx, "certificates/lp.test/lp.test.crt"); return err }(),
		func() error { _, err := acme.List(ctx, "certificates", true); return err }(),
		acme.Delete(ctx, "certificates/lp.test"), acme.Unlock(ctx, "issue_cert_lp.test")} {
		if step != nil {
			t.Errorf("the ACME cache as the servers' role: %v", step)
		}
	}

	// A schema behind this petstore: the servers' role may not bring it up.
	mustExec(ownerConn, "UPDATE petstore_schema SET version = version - 1")
	wantRefusedToMigrate("on a schema that is behind")
	mustExec(ownerConn, "UPDATE petstore_schema SET version = version + 1")
}
