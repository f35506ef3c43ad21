-- A lock holds its memory unchanged, its expiry included: memory.lock (and
-- memory.apply's lock) now removes the expiry, as a pin does. A locked
-- memory that expired before this held its key for good: the lock hid
-- every other agent's write, and no unlock could reach an expired row.
-- Such a row is gone, and so is its lock; a locked row still live keeps
-- its lock and loses its expiry.
UPDATE memories SET locked = 0
WHERE locked = 1 AND expires_ms IS NOT NULL
  AND expires_ms <= CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER);
UPDATE memories SET expires_ms = NULL WHERE locked = 1 AND expires_ms IS NOT NULL;
