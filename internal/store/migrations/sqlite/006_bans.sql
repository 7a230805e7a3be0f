-- Bans, as the server that started each stored it: of a key's budget
-- (subject key:ID) or of a client address (address:IP, an IPv6 /64 as
-- address:PREFIX/64). The limiters take them as a floor. version is the
-- bans_version of the write that stored or lifted the row, so that a
-- server reads only what changed since it last looked.
CREATE TABLE bans (
	subject    TEXT    PRIMARY KEY,
	kind       TEXT    NOT NULL, -- key or address
	started_at INTEGER NOT NULL, -- Unix milliseconds
	ends_at    INTEGER NOT NULL, -- Unix milliseconds
	lifted_at  INTEGER,          -- NULL unless lifted
	version    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX bans_version ON bans (version);
CREATE INDEX bans_kind_ends ON bans (kind, ends_at);
INSERT INTO meta (name, value) VALUES ('bans_version', 0);
