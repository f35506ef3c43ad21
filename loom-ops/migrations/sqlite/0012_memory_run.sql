-- The run of a row's current version, kept on the row. memory.get answers
-- it with every read; looked up in memory_versions it cost a descent of
-- that table's key index and of the table itself (the largest of the
-- store) per read, ~30% of the point read's time. Every write that makes
-- a version (insert and save in loom-ops/src/memory/store.rs) sets both
-- from one value.
ALTER TABLE memories ADD COLUMN run_id TEXT;

UPDATE memories SET run_id = v.run_id
FROM memory_versions v
WHERE v.org = memories.org AND v.namespace = memories.namespace AND v.agent = memories.agent
  AND v.memory_key = memories.memory_key AND v.version = memories.version
  AND v.run_id IS NOT NULL;
