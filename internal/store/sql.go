// The SQL both engines speak alike: the columns of a key and how its
// nullable times and ids travel, and the tables petstore copy moves.

package store

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"petstore/internal/domain"
)

// keyColumns are the columns scanKey reads, in its order.
const keyColumns = `id, hash, name, plan, rpm, rpd, env, scopes, created_at, revoked_at, expires_at, coalesce(budget_id, id), rolled_to, last_used_at, external_id`

// scanKey reads one key row of keyColumns.
func scanKey(scan func(...any) error) (domain.Key, error) {
	var k domain.Key
	var created int64
	var scopes string
	var revoked, expires, rolledTo, lastUsed sql.NullInt64
	var externalID sql.NullString
	if err := scan(&k.ID, &k.Hash, &k.Name, &k.Plan, &k.PerMinute, &k.PerDay, &k.Env, &scopes, &created, &revoked,
		&expires, &k.BudgetID, &rolledTo, &lastUsed, &externalID); err != nil {
		return domain.Key{}, err
	}
	k.ExternalID = externalID.String
	k.Scopes = domain.StoredScopes(scopes, domain.AllScopes)
	k.CreatedAt = time.Unix(created, 0).UTC()
	k.RevokedAt = unixOrZero(revoked)
	k.ExpiresAt = unixOrZero(expires)
	k.RolledTo = rolledTo.Int64
	k.LastUsedAt = unixOrZero(lastUsed)
	return k, nil
}

// unixOrZero and milliOrZero are a time in Unix seconds or milliseconds,
// or the zero time for NULL.
func unixOrZero(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(n.Int64, 0).UTC()
}

func milliOrZero(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.UnixMilli(n.Int64).UTC()
}

// nullUnix is t in Unix seconds, or NULL for the zero time.
func nullUnix(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.Unix()
}

// nullText is s, or NULL for "".
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullID is id, or NULL for 0.
func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// copyTables are the tables copy moves, with their columns, in both schemas.
var copyTables = []struct {
	name    string
	columns []string
	count   func(*domain.Copied) *int64
}{
	{"pets", []string{"id", "name", "category_id", "status"}, func(c *domain.Copied) *int64 { return &c.Pets }},
	{"api_keys", []string{"id", "hash", "name", "plan", "rpm", "rpd", "env", "scopes", "created_at", "revoked_at",
		"expires_at", "budget_id", "rolled_to", "last_used_at", "external_id"}, func(c *domain.Copied) *int64 { return &c.Keys }},
	{"usage", []string{"key_id", "day", "count"}, func(c *domain.Copied) *int64 { return &c.Usage }},
	{"idempotency", []string{"key_id", "idem_key", "request_hash", "pet_id", "created_at"}, func(c *domain.Copied) *int64 { return &c.Idempotency }},
	{"audit_events", append([]string{"id"}, strings.Split(auditColumns, ", ")...), func(c *domain.Copied) *int64 { return &c.AuditEvents }},
	{"admin_tokens", []string{"id", "hash", "name", "scopes", "env", "created_at", "revoked_at"}, func(c *domain.Copied) *int64 { return &c.AdminTokens }},
	{"usage_history", []string{"budget_id", "day", "allowed", "rate_limited", "quota_exceeded", "banned", "forbidden"},
		func(c *domain.Copied) *int64 { return &c.UsageHistory }},
	{"webhook_endpoints", []string{"id", "url", "events", "enabled", "created_at", "secret", "previous_secret", "previous_until",
		"failing_since", "last_attempt_at", "last_status", "last_error"}, func(c *domain.Copied) *int64 { return &c.WebhookEndpoints }},
	{"webhook_events", []string{"id", "type", "at", "body"}, func(c *domain.Copied) *int64 { return &c.WebhookEvents }},
	{"webhook_deliveries", []string{"event_id", "endpoint_id", "state", "attempts", "next_at", "claimed_until",
		"last_attempt_at", "last_status", "last_error"}, func(c *domain.Copied) *int64 { return &c.WebhookDeliveries }},
	{"webhook_notices", []string{"mark", "at", "forget_at"}, func(c *domain.Copied) *int64 { return &c.WebhookNotices }},
	{"bans", []string{"subject", "kind", "started_at", "ends_at", "lifted_at", "version"}, func(c *domain.Copied) *int64 { return &c.Bans }},
}

// auditColumns are the columns of an event as AuditRow gives them and
// scanAuditEvent reads them (after id), in their order.
const auditColumns = `at, action, actor, key_id, new_key_id, address, env, details`

// AuditRow is e's values for auditColumns: times in Unix milliseconds, the
// details as a JSON object.
func AuditRow(e domain.AuditEvent) ([]any, error) {
	details, err := json.Marshal(e.Details)
	if err != nil {
		return nil, err
	}
	return []any{e.At.UnixMilli(), e.Action, e.Actor, nullID(e.KeyID), nullID(e.NewKeyID), nullText(e.Address), e.Env, string(details)}, nil
}

// scanAuditEvent reads one row of id and auditColumns.
func scanAuditEvent(scan func(...any) error) (domain.AuditEvent, error) {
	var e domain.AuditEvent
	var at int64
	var keyID, newKeyID sql.NullInt64
	var address sql.NullString
	var details string
	if err := scan(&e.ID, &at, &e.Action, &e.Actor, &keyID, &newKeyID, &address, &e.Env, &details); err != nil {
		return domain.AuditEvent{}, err
	}
	e.At = time.UnixMilli(at).UTC()
	e.KeyID, e.NewKeyID, e.Address = keyID.Int64, newKeyID.Int64, address.String
	if err := json.Unmarshal([]byte(details), &e.Details); err != nil {
		return domain.AuditEvent{}, fmt.Errorf("audit event %d: details: %w", e.ID, err)
	}
	return e, nil
}

// auditQuery is the query of the events f picks, oldest first, and its
// arguments.
func auditQuery(f domain.AuditFilter) (string, []any) {
	var where []string
	var args []any
	if !f.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, f.Since.UnixMilli())
	}
	if f.KeyID != 0 {
		where, args = append(where, "(key_id = ? OR new_key_id = ?)"), append(args, f.KeyID, f.KeyID)
	}
	if f.Action != "" {
		where, args = append(where, "action = ?"), append(args, f.Action)
	}
	if f.After != 0 {
		// The page after event After, in the order of the trail.
		where, args = append(where, "(at, id) > (SELECT at, id FROM audit_events WHERE id = ?)"), append(args, f.After)
	}
	query := `SELECT id, ` + auditColumns + ` FROM audit_events`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY at, id`
	if f.Limit > 0 {
		query, args = query+` LIMIT ?`, append(args, f.Limit)
	}
	return query, args
}
