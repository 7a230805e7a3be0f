// What the servers' role needs on PostgreSQL, checked at start, so that a
// missing grant is named with the statement that gives it rather than met
// later as an odd error (docs/production.md, "Least privilege on
// PostgreSQL", lists the same grants; a test holds the two equal).

package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// tableGrant is a GRANT of privileges on tables, as the docs write it.
type tableGrant struct{ privileges, tables string }

// serverTableGrants are what the servers and the commands do to each table.
var serverTableGrants = []tableGrant{
	{"SELECT", "petstore_schema"},
	{"SELECT, INSERT", "audit_events, ban_events"},
	{"SELECT, INSERT, DELETE", "pets"},
	{"SELECT, INSERT, UPDATE", "api_keys, meta, admin_tokens"},
	{"SELECT, INSERT, UPDATE, DELETE", "usage, usage_streams, idempotency, usage_history, bans"},
	{"SELECT, INSERT, UPDATE, DELETE", "webhook_endpoints, webhook_events, webhook_deliveries, webhook_notices"},
	{"SELECT, INSERT, UPDATE, DELETE", "acme_storage, acme_locks"}, // --acme-domain's cache (acme.go)
	{"SELECT, INSERT, UPDATE, DELETE", "servers"},                  // the servers' check-ins (servers.go)
}

// ServerGrants are every GRANT the servers' role needs on schema, in the
// docs' order and words.
func ServerGrants(role, schema string) []string {
	out := []string{fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s;", schema, role)}
	for _, g := range serverTableGrants {
		out = append(out, fmt.Sprintf("GRANT %s ON %s TO %s;", g.privileges, g.tables, role))
	}
	return append(out,
		fmt.Sprintf("GRANT USAGE ON ALL SEQUENCES IN SCHEMA %s TO %s;", schema, role),
		fmt.Sprintf("GRANT UPDATE ON SEQUENCE pets_id_seq TO %s;", role))
}

// checkSchemaUsage refuses a search_path whose schema the role may not use:
// PostgreSQL skips such a schema without a word, so that the tables would
// be looked for, or made, elsewhere, or nowhere.
func (s *Postgres) checkSchemaUsage(ctx context.Context) error {
	var role, user, path string
	var current *string
	if err := s.pool.QueryRow(ctx, `SELECT quote_ident(current_user), current_user, current_setting('search_path'), current_schema()`).
		Scan(&role, &user, &path, &current); err != nil {
		return err
	}
	for _, name := range searchPathSchemas(path, user) {
		if current != nil && name == *current {
			return nil
		}
		var quoted string
		err := s.pool.QueryRow(ctx, `SELECT quote_ident(nspname) FROM pg_namespace WHERE nspname = $1 AND NOT has_schema_privilege(oid, 'USAGE')`, name).Scan(&quoted)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			continue // not there, or usable
		case err != nil:
			return err
		}
		return fmt.Errorf("role %s may not use schema %s of its search_path (%s): as the schema's owner, run GRANT USAGE ON SCHEMA %s TO %s; "+
			`(docs/production.md, "Least privilege on PostgreSQL")`, role, quoted, path, quoted, role)
	}
	if current == nil {
		return fmt.Errorf("no schema of search_path %s exists: set search_path in the URL to the schema of the tables, or create it", path)
	}
	return nil
}

// searchPathSchemas are the schema names of a search_path setting, in its
// order: "$user" is user, a quoted name is unquoted.
func searchPathSchemas(path, user string) []string {
	var names []string
	for part := range strings.SplitSeq(path, ",") {
		part = strings.TrimSpace(part)
		switch {
		case part == `"$user"` || part == "$user":
			part = user
		case len(part) >= 2 && part[0] == '"' && part[len(part)-1] == '"':
			part = strings.ReplaceAll(part[1:len(part)-1], `""`, `"`)
		default:
			part = strings.ToLower(part)
		}
		if part != "" {
			names = append(names, part)
		}
	}
	return names
}

// checkGrants names each grant of ServerGrants the role lacks, with the
// statements that give them: once the schema is current, or when the role
// may not read its version, on the tables there are (an older schema
// lacks the newer ones).
func (s *Postgres) checkGrants(ctx context.Context) error {
	var tables, privileges []string
	for _, g := range serverTableGrants {
		for table := range strings.SplitSeq(g.tables, ", ") {
			for p := range strings.SplitSeq(g.privileges, ", ") {
				tables, privileges = append(tables, table), append(privileges, p)
			}
		}
	}
	var role, schema string
	if err := s.pool.QueryRow(ctx, `SELECT quote_ident(current_user), quote_ident(current_schema())`).Scan(&role, &schema); err != nil {
		return err
	}
	rows, err := s.pool.Query(ctx, `SELECT need.t, string_agg(need.p, ', ' ORDER BY need.n)
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS need(t, p, n)
		WHERE CASE WHEN to_regclass(need.t) IS NULL THEN false ELSE NOT has_table_privilege(need.t, need.p) END
		GROUP BY need.t ORDER BY min(need.n)`, tables, privileges)
	if err != nil {
		return err
	}
	grants, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var table, missing string
		err := row.Scan(&table, &missing)
		return fmt.Sprintf("GRANT %s ON %s TO %s;", missing, table, role), err
	})
	if err != nil {
		return err
	}
	var usage, update bool
	if err := s.pool.QueryRow(ctx, `SELECT
		NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace
			AND CASE WHEN c.relkind = 'S' THEN NOT has_sequence_privilege(c.oid, 'USAGE') ELSE false END),
		has_sequence_privilege('pets_id_seq', 'UPDATE')`).Scan(&usage, &update); err != nil {
		return err
	}
	if !usage {
		grants = append(grants, fmt.Sprintf("GRANT USAGE ON ALL SEQUENCES IN SCHEMA %s TO %s;", schema, role))
	}
	if !update {
		grants = append(grants, fmt.Sprintf("GRANT UPDATE ON SEQUENCE pets_id_seq TO %s;", role))
	}
	if len(grants) == 0 {
		return nil
	}
	return fmt.Errorf("role %s lacks grants this petstore needs on schema %s: as the owner of the tables, run %s "+
		`(docs/production.md, "Least privilege on PostgreSQL")`, role, schema, strings.Join(grants, " "))
}
