-- expand: a new table, and the schema's level, which servers before it never read
-- The servers that use this database, each as it last checked in (every
-- few seconds, pruned after ten minutes): GET /admin/v1/servers lists
-- them, and petstore migrate --contract refuses while one that knows
-- fewer migrations than a contract step checked in during the last
-- minute.
CREATE TABLE servers (
	address    text    PRIMARY KEY, -- HOST:PORT of its API listener
	version    text    NOT NULL,    -- petstore version, (devel) for a local build
	revision   text    NOT NULL,    -- the commit it was built from, unknown without one
	migrations integer NOT NULL,    -- how many migrations it knows
	started_at bigint  NOT NULL,    -- Unix seconds
	last_seen  bigint  NOT NULL     -- Unix seconds
);
-- The schema's level: the lowest migration count a server must know to
-- run on it (docs/design.md, "Migrations"), beside the count of
-- migrations done.
ALTER TABLE petstore_schema ADD COLUMN level integer NOT NULL DEFAULT 0;
