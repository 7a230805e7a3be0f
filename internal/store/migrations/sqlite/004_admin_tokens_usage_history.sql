-- The API's owner: admin tokens (hashes, like keys), a portal's own
-- reference of a key (unique among the keys not revoked), and the usage
-- history of each budget and UTC day by outcome, pruned by day.
CREATE TABLE admin_tokens (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	hash       BLOB    NOT NULL UNIQUE, -- SHA-256 of the token; the token itself is never stored
	name       TEXT    NOT NULL,
	scopes     TEXT    NOT NULL, -- admin scope names separated by spaces
	env        TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	revoked_at INTEGER
);
ALTER TABLE api_keys ADD COLUMN external_id TEXT;
CREATE UNIQUE INDEX api_keys_external_id ON api_keys (external_id) WHERE external_id IS NOT NULL AND revoked_at IS NULL;
CREATE TABLE usage_history (
	budget_id      INTEGER NOT NULL,
	day            TEXT    NOT NULL, -- UTC date, YYYY-MM-DD
	allowed        INTEGER NOT NULL,
	rate_limited   INTEGER NOT NULL,
	quota_exceeded INTEGER NOT NULL,
	banned         INTEGER NOT NULL,
	forbidden      INTEGER NOT NULL,
	PRIMARY KEY (budget_id, day)
) WITHOUT ROWID;
CREATE INDEX usage_history_day ON usage_history (day);
