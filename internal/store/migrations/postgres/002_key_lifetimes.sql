-- Keys over their lifetime: an expiry, the key whose rate-limit budget
-- a key spends (NULL: its own; a roll's new key spends the old one's),
-- the key it was rolled to, and the minute it was last used in.
ALTER TABLE api_keys ADD COLUMN expires_at   bigint; -- NULL: never
ALTER TABLE api_keys ADD COLUMN budget_id    bigint; -- NULL: its own id
ALTER TABLE api_keys ADD COLUMN rolled_to    bigint;
ALTER TABLE api_keys ADD COLUMN last_used_at bigint; -- the start of a minute
