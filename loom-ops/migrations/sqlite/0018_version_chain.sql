-- A memory's versions are chained from its row instead of indexed by key:
-- each version holds the row id of the one before it (`prev`), and the
-- memory holds its newest (`memories.history`). History is read by
-- walking that chain, newest first (loom-ops, memory::chain).
--
-- Why: memory_versions' primary key (org, namespace, agent, memory_key,
-- version) put each write's entry on a leaf at a random place in the file
-- (a memory's key says nothing of when it is written), so every commit
-- wrote a page of the WAL for nearly each write in it, and more as its
-- leaves split: 41% of the WAL a `memory.set` wrote (bench/RESULTS.md).
-- A version row is appended at the table's end, and the memory's row is
-- a page the write changes anyway. On copies of a store of 100,000
-- memories, sets served 12-13% more a second (17-23% with no index and
-- no chain at all: the chain's upkeep, the memory's row written again by
-- the trigger below, is the difference).
--
-- What it costs: history is read a version at a time by row id, so a
-- read reaching far back (a version long ago, or at a time long ago, of a
-- memory written thousands of times, or a late page of its history)
-- walks every version after it. The first page of history and reads as
-- of a recent time walk only what they return; an inspection's count of
-- versions and a provenance walk them all, as they read them all.
CREATE TABLE memory_versions_chained (
    org             TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    agent           TEXT NOT NULL,
    memory_key      TEXT NOT NULL,
    version         BIGINT NOT NULL,
    change          TEXT NOT NULL,
    content         TEXT NOT NULL,
    kind            TEXT NOT NULL,
    labels          TEXT NOT NULL,
    source          TEXT NOT NULL,
    content_hash    TEXT NOT NULL,
    pinned          BIGINT NOT NULL,
    locked          BIGINT NOT NULL,
    deleted         BIGINT NOT NULL,
    expires_ms      BIGINT,
    run_id          TEXT,
    subject         TEXT NOT NULL,
    changed_by      TEXT NOT NULL,
    request_id      TEXT NOT NULL,
    at_ms           BIGINT NOT NULL,
    prev            INTEGER             -- the row id of the version before
);
-- In key and version order: each memory's versions in a run of rows, so
-- a version's previous one is the row before it when that row is of the
-- same memory, and a memory's newest is the last of its run.
INSERT INTO memory_versions_chained (org, namespace, agent, memory_key, version, change,
    content, kind, labels, source, content_hash, pinned, locked, deleted, expires_ms, run_id,
    subject, changed_by, request_id, at_ms)
SELECT org, namespace, agent, memory_key, version, change, content, kind, labels, source,
    content_hash, pinned, locked, deleted, expires_ms, run_id, subject, changed_by, request_id,
    at_ms
FROM memory_versions ORDER BY org, namespace, agent, memory_key, version;
UPDATE memory_versions_chained AS c SET prev = c.rowid - 1
WHERE EXISTS (SELECT 1 FROM memory_versions_chained p WHERE p.rowid = c.rowid - 1
    AND p.org = c.org AND p.namespace = c.namespace AND p.agent = c.agent
    AND p.memory_key = c.memory_key);

ALTER TABLE memories ADD COLUMN history INTEGER;
UPDATE memories SET history = newest.vid
FROM (SELECT org, namespace, agent, memory_key, MAX(rowid) AS vid FROM memory_versions_chained
      GROUP BY org, namespace, agent, memory_key) AS newest
WHERE newest.org = memories.org AND newest.namespace = memories.namespace
  AND newest.agent = memories.agent AND newest.memory_key = memories.memory_key;

DROP TABLE memory_versions;
ALTER TABLE memory_versions_chained RENAME TO memory_versions;

-- A run's changes (run.changes) were read through the primary key's
-- (org, namespace) prefix, every version of the namespace filtered; they
-- have an index of their own now. Versions written outside a run have no
-- entry, and a run's entries are written next to each other.
CREATE INDEX memory_versions_by_run ON memory_versions (org, namespace, run_id)
WHERE run_id IS NOT NULL;

-- Every version inserted becomes its memory's newest. Loom's writes name
-- the one before (`prev`, from the row they snapshot); for a version
-- another program inserts without one, it is taken from the memory here.
CREATE TRIGGER memory_versions_newest AFTER INSERT ON memory_versions BEGIN
    UPDATE memory_versions SET prev = (SELECT m.history FROM memories m
        WHERE m.org = new.org AND m.namespace = new.namespace AND m.agent = new.agent
          AND m.memory_key = new.memory_key)
    WHERE new.prev IS NULL AND rowid = new.rowid;
    UPDATE memories SET history = new.rowid
    WHERE org = new.org AND namespace = new.namespace AND agent = new.agent
      AND memory_key = new.memory_key;
END;
