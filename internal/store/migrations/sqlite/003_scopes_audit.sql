-- Restricted keys: what a key may do, scope names separated by spaces;
-- keys made before scopes existed may do everything. The audit trail:
-- every change to a key, who made it and when, append only.
ALTER TABLE api_keys ADD COLUMN scopes TEXT NOT NULL DEFAULT 'pets:read pets:write';
CREATE TABLE audit_events (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	at         INTEGER NOT NULL, -- Unix milliseconds
	action     TEXT    NOT NULL, -- key.created, key.revoked, key.rolled, key.banned, keys.copied
	actor      TEXT    NOT NULL, -- user@host of a command, or server
	key_id     INTEGER,          -- NULL for the ban of a client address, and for a copy
	new_key_id INTEGER,          -- key.rolled: the key the roll made
	address    TEXT,             -- key.banned of a client address
	env        TEXT    NOT NULL,
	details    TEXT    NOT NULL  -- a JSON object; never a key or its hash
);
CREATE INDEX audit_events_at ON audit_events (at);
CREATE INDEX audit_events_key ON audit_events (key_id);
CREATE INDEX audit_events_new_key ON audit_events (new_key_id);
CREATE INDEX audit_events_action ON audit_events (action);
CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit events are append only'); END;
CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit events are append only'); END;
