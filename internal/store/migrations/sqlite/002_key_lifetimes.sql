-- Keys over their lifetime: an expiry, the key whose rate-limit budget
-- a key spends (NULL: its own; a roll's new key spends the old one's),
-- the key it was rolled to, and the minute it was last used in.
ALTER TABLE api_keys ADD COLUMN expires_at   INTEGER; -- NULL: never
ALTER TABLE api_keys ADD COLUMN budget_id    INTEGER; -- NULL: its own id
ALTER TABLE api_keys ADD COLUMN rolled_to    INTEGER;
ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER; -- the start of a minute
