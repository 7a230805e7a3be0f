-- The marks of notices say when they may be forgotten (Unix
-- milliseconds): a quota mark two days after its notice, an expiry mark
-- a day after its key's expiry could last be announced; the hourly
-- prune deletes by the index. The marks stored before know only when
-- they were stored: they keep the longest either kind could need.
ALTER TABLE webhook_notices ADD COLUMN forget_at bigint NOT NULL DEFAULT 0;
UPDATE webhook_notices SET forget_at = at + CASE WHEN mark LIKE 'quota:%' THEN 172800000 ELSE 1296000000 END;
CREATE INDEX webhook_notices_forget ON webhook_notices (forget_at);
