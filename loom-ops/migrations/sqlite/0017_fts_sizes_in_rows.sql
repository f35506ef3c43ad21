-- Each memory keeps its size for search's ranking (the tokens the
-- full-text index counts in its key, content and labels) in its own row,
-- and the index keeps none (FTS5's `columnsize = 0`).
--
-- Why: FTS5 kept each row's size in a table of its own (memories_fts_docsize),
-- keyed by the row's id, which is at a random place with respect to when a
-- memory is written. So each batch of writes handed to the index rewrote
-- a leaf of that table for nearly every memory in it: a page of the
-- write-ahead log each, copied back to the file by a checkpoint later. A
-- memory's own row is a page the write changes anyway. On a copy of a
-- store of 100,000 memories, its index rebuilt without sizes, `memory.set`
-- served 9-10% more a second at 8% less of the server's CPU a set
-- (bench/RESULTS.md).
--
-- `fts_tokens` is counted by `loom_fts_tokens` (loom-fts5), a function
-- Loom registers on its connections, as FTS5 counts a row's size: Loom's
-- writes of a memory's text set it, and a row another program inserts
-- (the benchmark's pre-fill does) is queued for the index marked as
-- lacking it (`unsized`) and given it when Loom hands it to the index
-- (store::full_text_queue). Search reads it, or counts the row's tokens
-- there and then when it is missing (memory::rank). Another program that
-- changes the text of a row that has a size leaves that size as it was
-- until Loom writes the row again: only the length in its bm25 is off.
ALTER TABLE memories ADD COLUMN fts_tokens INTEGER;
UPDATE memories SET fts_tokens = loom_fts_tokens(memory_key, content, labels);

ALTER TABLE memories_fts_pending ADD COLUMN unsized INTEGER NOT NULL DEFAULT 0;
DROP TRIGGER memories_fts_insert;
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts_pending (fts_rowid, remove, memory_key, content, labels, unsized)
    VALUES (-new.id, 0, new.memory_key, new.content, new.labels, new.fts_tokens IS NULL);
END;
-- As 0015's, the text added marked as above.
DROP TRIGGER memories_fts_update;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF memory_key, content, labels ON memories
WHEN new.memory_key IS NOT old.memory_key OR new.content IS NOT old.content
    OR new.labels IS NOT old.labels
BEGIN
    INSERT INTO memories_fts_pending (fts_rowid, remove, memory_key, content, labels)
    VALUES (-old.id, 1, old.memory_key, old.content, old.labels);
    INSERT INTO memories_fts_pending (fts_rowid, remove, memory_key, content, labels, unsized)
    VALUES (-new.id, 0, new.memory_key, new.content, new.labels, new.fts_tokens IS NULL);
END;

-- The index made anew without sizes, from the rows themselves: it then
-- holds every row's current text, so nothing queued for it is left to do.
DROP TABLE memories_fts;
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    memory_key, content, labels,
    content = '', tokenize = 'porter unicode61', columnsize = 0
);
-- In ascending rowid order, so FTS5 fills its segments in bulk (0009).
INSERT INTO memories_fts (rowid, memory_key, content, labels)
SELECT -id, memory_key, content, labels FROM memories ORDER BY id DESC;
-- The merge setting 0011 gave the table it replaces.
INSERT INTO memories_fts (memories_fts, rank) VALUES ('automerge', 2);
DELETE FROM memories_fts_pending;
-- The merge worker's record of the old index's size (store::full_text).
DELETE FROM settings WHERE name = 'full_text.clean_pages';
