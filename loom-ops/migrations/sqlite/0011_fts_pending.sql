-- The full-text index is written once per commit, not once per call.
--
-- Why: every write runs in a savepoint of its own (store::group,
-- store::direct), and FTS5 flushes its pending terms to a new segment
-- whenever a savepoint opens after it was written, and again whenever the
-- rows it is handed go down in rowid (random keys do, half the time). So a
-- group of 30 writes added ~30 one-row segments, and FTS5's automerge
-- rewrote them: under a memory.set load, 12% of the server's CPU. The
-- triggers now queue what the index must learn (the old text to remove,
-- the new text to add) in memories_fts_pending, and every commit drains
-- the queue first, outside any savepoint and in rowid order (the writer's
-- `store::full_text_queue::DRAIN_PENDING`), so FTS5 writes one segment per
-- commit. A queued row is in the same transaction as the change that
-- queued it: a call rolled back takes its rows with it, and no commit
-- leaves the index behind the table. A program other than Loom that
-- writes memories leaves its rows queued until Loom's next commit or
-- start drains them.
CREATE TABLE memories_fts_pending (
    seq             INTEGER PRIMARY KEY,
    fts_rowid       INTEGER NOT NULL,   -- the memory's id negated (0009)
    remove          INTEGER NOT NULL,   -- 1: FTS5 'delete' of this text; 0: add it
    memory_key      TEXT NOT NULL,
    content         TEXT NOT NULL,
    labels          TEXT NOT NULL
);

DROP TRIGGER memories_fts_insert;
DROP TRIGGER memories_fts_delete;
DROP TRIGGER memories_fts_update;

CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts_pending (fts_rowid, remove, memory_key, content, labels)
    VALUES (-new.id, 0, new.memory_key, new.content, new.labels);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts_pending (fts_rowid, remove, memory_key, content, labels)
    VALUES (-old.id, 1, old.memory_key, old.content, old.labels);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF memory_key, content, labels ON memories BEGIN
    INSERT INTO memories_fts_pending (fts_rowid, remove, memory_key, content, labels)
    VALUES (-old.id, 1, old.memory_key, old.content, old.labels);
    INSERT INTO memories_fts_pending (fts_rowid, remove, memory_key, content, labels)
    VALUES (-new.id, 0, new.memory_key, new.content, new.labels);
END;

-- With a segment per commit rather than per write, FTS5 can afford to
-- merge sooner: two segments of a level make one of the next, where the
-- default waits for four. After 20 seconds of sets on 100,000 memories the
-- index held 6 segments against 15, and searches right after the writes
-- served 13-62% more a second (paired runs), at 2-6% fewer sets.
INSERT INTO memories_fts (memories_fts, rank) VALUES ('automerge', 2);
