// The SQL both engines speak alike: the columns of a key and how its
// nullable times and ids travel, and the tables petstore copy moves.

package main

import (
	"database/sql"
	"time"
)

// keyColumns are the columns scanKey reads, in its order.
const keyColumns = `id, hash, name, plan, rpm, rpd, env, scopes, created_at, revoked_at, expires_at, coalesce(budget_id, id), rolled_to, last_used_at`

// scanKey reads one key row of keyColumns.
func scanKey(scan func(...any) error) (apiKey, error) {
	var k apiKey
	var created int64
	var scopes string
	var revoked, expires, rolledTo, lastUsed sql.NullInt64
	if err := scan(&k.ID, &k.Hash, &k.Name, &k.Plan, &k.PerMinute, &k.PerDay, &k.Env, &scopes, &created, &revoked,
		&expires, &k.BudgetID, &rolledTo, &lastUsed); err != nil {
		return apiKey{}, err
	}
	k.Scopes = storedScopes(scopes)
	k.CreatedAt = time.Unix(created, 0).UTC()
	k.RevokedAt = unixOrZero(revoked)
	k.ExpiresAt = unixOrZero(expires)
	k.RolledTo = rolledTo.Int64
	k.LastUsedAt = unixOrZero(lastUsed)
	return k, nil
}

func unixOrZero(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(n.Int64, 0).UTC()
}

// nullUnix is t in Unix seconds, or NULL for the zero time.
func nullUnix(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.Unix()
}

// nullID is id, or NULL for 0.
func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// copied counts the rows of each table a copy moved.
type copied struct {
	Pets, Keys, Usage, Idempotency int64
}

// copyTables are the tables copy moves, with their columns, in both schemas.
var copyTables = []struct {
	name    string
	columns []string
	count   func(*copied) *int64
}{
	{"pets", []string{"id", "name", "category_id", "status"}, func(c *copied) *int64 { return &c.Pets }},
	{"api_keys", []string{"id", "hash", "name", "plan", "rpm", "rpd", "env", "scopes", "created_at", "revoked_at",
		"expires_at", "budget_id", "rolled_to", "last_used_at"}, func(c *copied) *int64 { return &c.Keys }},
	{"usage", []string{"key_id", "day", "count"}, func(c *copied) *int64 { return &c.Usage }},
	{"idempotency", []string{"key_id", "idem_key", "request_hash", "pet_id", "created_at"}, func(c *copied) *int64 { return &c.Idempotency }},
}
