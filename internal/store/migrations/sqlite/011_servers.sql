-- expand: a new table, and the schema's level, which servers before it never read
-- The servers that use this database, each as it last checked in (every
-- few seconds, pruned after ten minutes): GET /admin/v1/servers lists
-- them, and petstore migrate --contract refuses while one that knows
-- fewer migrations than a contract step checked in during the last
-- minute. On SQLite the one server keeps its own row.
CREATE TABLE servers (
	address    TEXT    PRIMARY KEY, -- HOST:PORT of its API listener
	version    TEXT    NOT NULL,    -- petstore version, (devel) for a local build
	revision   TEXT    NOT NULL,    -- the commit it was built from, unknown without one
	migrations INTEGER NOT NULL,    -- how many migrations it knows
	started_at INTEGER NOT NULL,    -- Unix seconds
	last_seen  INTEGER NOT NULL     -- Unix seconds
) WITHOUT ROWID;
-- The schema's level: the lowest migration count a server must know to
-- run on it (docs/design.md, "Migrations"). PRAGMA user_version keeps
-- the count of migrations done.
CREATE TABLE petstore_schema (level INTEGER NOT NULL);
INSERT INTO petstore_schema (level) VALUES (0);
