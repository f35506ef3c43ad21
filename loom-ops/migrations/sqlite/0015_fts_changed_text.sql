-- The full-text queue takes a row's text only when an update changed it.
--
-- Why: an update fires `AFTER UPDATE OF memory_key, content, labels` when
-- its SET names one of them, whatever the value, and every update of a
-- memory writes the whole row back (`memory::store::save`). So a pin, an
-- unpin, a lock, an unlock, a delete (a flag) or a set that changed only
-- the kind queued the old text to remove and the same text to add: two
-- copies of the text in the queue, and FTS5 tokenizing it twice to leave
-- its index as it was. A bulk `memory.apply` locking a thousand memories
-- queued two thousand rows. Now such an update queues nothing; one that
-- changes the key, the content or the labels queues as before.
DROP TRIGGER memories_fts_update;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF memory_key, content, labels ON memories
WHEN new.memory_key IS NOT old.memory_key OR new.content IS NOT old.content
    OR new.labels IS NOT old.labels
BEGIN
    INSERT INTO memories_fts_pending (fts_rowid, remove, memory_key, content, labels)
    VALUES (-old.id, 1, old.memory_key, old.content, old.labels);
    INSERT INTO memories_fts_pending (fts_rowid, remove, memory_key, content, labels)
    VALUES (-new.id, 0, new.memory_key, new.content, new.labels);
END;
