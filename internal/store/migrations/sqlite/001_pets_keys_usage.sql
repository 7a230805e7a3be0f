CREATE TABLE pets (
	id          INTEGER PRIMARY KEY AUTOINCREMENT, -- AUTOINCREMENT: ids are never reused
	name        TEXT    NOT NULL,
	category_id INTEGER NOT NULL,
	status      TEXT    -- NULL when the client gave none
);
CREATE INDEX pets_status_id ON pets (status, id);
CREATE TABLE api_keys (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	hash       BLOB    NOT NULL UNIQUE, -- SHA-256 of the key; the key itself is never stored
	name       TEXT    NOT NULL,
	plan       TEXT    NOT NULL,
	rpm        INTEGER NOT NULL,
	rpd        INTEGER NOT NULL,
	env        TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	revoked_at INTEGER
);
-- keys_version grows on every key change, so a server notices a revocation
-- by reading one row instead of every key.
CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO meta (name, value) VALUES ('keys_version', 0);
CREATE TABLE usage (
	key_id INTEGER NOT NULL,
	day    TEXT    NOT NULL, -- UTC date, YYYY-MM-DD
	count  INTEGER NOT NULL,
	PRIMARY KEY (key_id, day)
) WITHOUT ROWID;
CREATE TABLE idempotency (
	key_id       INTEGER NOT NULL,
	idem_key     TEXT    NOT NULL,
	request_hash BLOB    NOT NULL,
	pet_id       INTEGER NOT NULL,
	created_at   INTEGER NOT NULL,
	PRIMARY KEY (key_id, idem_key)
) WITHOUT ROWID;
CREATE INDEX idempotency_created_at ON idempotency (created_at);
