-- Webhooks: the endpoints, the outbox (an event, and its delivery to
-- each endpoint that took it when it happened), and the marks that make
-- a notice (a quota threshold of a day, an expiry) sent once by all the
-- servers together. Times of deliveries are Unix milliseconds.
CREATE TABLE webhook_endpoints (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	url             TEXT    NOT NULL,
	events          TEXT    NOT NULL, -- the types it takes, separated by commas; '' for all
	enabled         INTEGER NOT NULL, -- 1 or 0
	created_at      INTEGER NOT NULL,
	secret          TEXT    NOT NULL, -- whsec_..., which signs: never shown again, logged or audited
	previous_secret TEXT,             -- after a rotation, signs beside it until previous_until
	previous_until  INTEGER,
	failing_since   INTEGER,          -- the first failed attempt since the last delivery; NULL: none
	last_attempt_at INTEGER,
	last_status     INTEGER,          -- 0: no answer
	last_error      TEXT
);
CREATE TABLE webhook_events (
	id   TEXT    PRIMARY KEY, -- msg_..., the webhook-id of every attempt
	type TEXT    NOT NULL,
	at   INTEGER NOT NULL,
	body TEXT    NOT NULL     -- {"type", "timestamp", "data"}, as sent
);
CREATE TABLE webhook_deliveries (
	event_id        TEXT    NOT NULL,
	endpoint_id     INTEGER NOT NULL,
	state           TEXT    NOT NULL, -- pending, delivered or failed
	attempts        INTEGER NOT NULL DEFAULT 0,
	next_at         INTEGER NOT NULL, -- pending: when the next attempt is due
	claimed_until   INTEGER NOT NULL DEFAULT 0, -- a server's attempt is under way until then
	last_attempt_at INTEGER,
	last_status     INTEGER,
	last_error      TEXT,
	PRIMARY KEY (event_id, endpoint_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id);
CREATE TABLE webhook_notices (
	mark TEXT    PRIMARY KEY, -- quota:BUDGET:DAY:THRESHOLD, expiring:KEY:EXPIRES:DAYS, expired:KEY:EXPIRES
	at   INTEGER NOT NULL
) WITHOUT ROWID;
