-- expand: a new table; servers before it never read it (and may audit a ban twice meanwhile)
-- The bans whose key.banned event is written: one row a ban, keyed on its
-- subject (as in bans) and its start (Unix milliseconds). A server writes
-- the row before the event, in the same transaction, and writes neither
-- the event nor its webhook when the row was there: a ban written again
-- (its first write committed although its caller heard it fail) is
-- audited once. The events written before this table may hold such twins;
-- they stay, since the trail is append only.
CREATE TABLE ban_events (
	subject    TEXT    NOT NULL,
	started_at INTEGER NOT NULL, -- Unix milliseconds
	PRIMARY KEY (subject, started_at)
) WITHOUT ROWID;
