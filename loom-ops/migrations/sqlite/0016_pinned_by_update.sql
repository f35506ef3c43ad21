-- On SQLite, memories_by_update (org, namespace, updated_ms) served one
-- statement: context.pack's pinned memories, newest first (PostgreSQL's
-- search reads its own copy, which stays). Every write of a memory moved
-- the row's entry in it, one more index leaf at a random place in the
-- file a `memory.set` (a fifth of the WAL a set wrote, bench/RESULTS.md).
-- An index of the pinned live rows alone serves that statement, and a
-- write of an unpinned memory leaves it untouched.
DROP INDEX memories_by_update;
CREATE INDEX memories_pinned_by_update ON memories (org, namespace, updated_ms)
WHERE pinned = 1 AND deleted = 0;
