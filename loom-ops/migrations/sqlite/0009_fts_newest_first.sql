-- The full-text index files each memory under the negated id, so the
-- newest rows come first in FTS5's own (ascending rowid) order.
--
-- Why: search takes the newest rows matching its words (memory::rank).
-- FTS5 walks a doclist backwards only by loading each page and parsing it
-- to its end, where forwards it reads as it goes: the same retrieval cost
-- about twice as much walked backwards. A contentless index (content = '')
-- because an external-content index must share the content table's rowid;
-- nothing reads text back from the index (search joins to memories), and
-- the triggers hand FTS5 the old values a delete needs, as before.
DROP TRIGGER memories_fts_insert;
DROP TRIGGER memories_fts_delete;
DROP TRIGGER memories_fts_update;
DROP TABLE memories_fts;

CREATE VIRTUAL TABLE memories_fts USING fts5 (
    memory_key, content, labels,
    content = '', tokenize = 'porter unicode61'
);
-- In ascending rowid order, so FTS5 fills its segments in bulk instead of
-- flushing one per row.
INSERT INTO memories_fts (rowid, memory_key, content, labels)
SELECT -id, memory_key, content, labels FROM memories ORDER BY id DESC;

CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, memory_key, content, labels)
    VALUES (-new.id, new.memory_key, new.content, new.labels);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, memory_key, content, labels)
    VALUES ('delete', -old.id, old.memory_key, old.content, old.labels);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF memory_key, content, labels ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, memory_key, content, labels)
    VALUES ('delete', -old.id, old.memory_key, old.content, old.labels);
    INSERT INTO memories_fts (rowid, memory_key, content, labels)
    VALUES (-new.id, new.memory_key, new.content, new.labels);
END;
