-- The locked rows of a namespace, by key: a lock holds its key for every
-- agent's row, so memory.apply and a blacklist sweep ask which keys of the
-- namespace are locked (memory::store::locked_keys). Partial: it holds
-- only locked rows, a handful, and costs other writes nothing.
CREATE INDEX memories_locked ON memories (org, namespace, memory_key) WHERE locked = 1;
