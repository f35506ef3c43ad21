-- The chain's trigger (0018) links only a version inserted without a link
-- (`prev` NULL): a version inserted with one is taken as linked by its
-- writer, which names it the memory's newest (`memories.history`) itself.
--
-- Why: Loom's change of a memory now writes its new version first, linked
-- to the memory's newest, and then the memory's row, naming that version
-- its newest in the same write (loom-ops, memory::store::sqlite_save).
-- The trigger wrote the memory's row a second time for every version,
-- after the write had read it back for the version's columns. Without
-- both, a `memory.set` takes 4.5% fewer instructions, its statements 9%
-- fewer (bench/instructions.sh; bench/RESULTS.md).
--
-- Another program that inserts versions leaves `prev` NULL, as it knows
-- nothing of it, and its versions are linked here as before. Loom's first
-- version of a new memory has none before it, and is linked here too.
DROP TRIGGER memory_versions_newest;
CREATE TRIGGER memory_versions_newest AFTER INSERT ON memory_versions
WHEN new.prev IS NULL BEGIN
    UPDATE memory_versions SET prev = (SELECT m.history FROM memories m
        WHERE m.org = new.org AND m.namespace = new.namespace AND m.agent = new.agent
          AND m.memory_key = new.memory_key)
    WHERE rowid = new.rowid;
    UPDATE memories SET history = new.rowid
    WHERE org = new.org AND namespace = new.namespace AND agent = new.agent
      AND memory_key = new.memory_key;
END;
