-- expand: a new table, which servers before it never read (their flushes add as before)
-- The last batch of usage counts or usage history each stream added: a
-- stream is one flusher of one server process, and numbers its batches
-- from 1. A batch whose answer was lost (a commit the connection or the
-- deadline cut off) is sent again, before any later one, so a batch
-- numbered no higher than its stream's last is one already added, and is
-- left out (docs/design.md, "Usage counts"). Pruned with the days of
-- usage, a week after a stream's last batch.
CREATE TABLE usage_streams (
	stream     TEXT    PRIMARY KEY,
	last_batch INTEGER NOT NULL,
	added_at   INTEGER NOT NULL -- Unix seconds
) WITHOUT ROWID;
