-- Retention finds the exposure rows past their time through a BRIN index.
--
-- Why: the exposures have no id and no index (0010 dropped the one they
-- had), and PostgreSQL reuses the space deleted rows leave, so their
-- order on disk is not their age: finding the old ones was a scan of the
-- whole table every sweep, also when none was old. A BRIN index keeps the
-- smallest and largest time of each range of pages: a few pages for
-- millions of rows, next to nothing per insert, and the scan reads only
-- the ranges that may hold an old row (and the newest pages, until
-- summarized).
CREATE INDEX memory_exposures_by_time ON memory_exposures USING BRIN (at_ms)
    WITH (autosummarize = on);
