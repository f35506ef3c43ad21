-- The call ledger's index by run holds only the calls made in a run.
--
-- Why: every call writes a ledger row (agent_events), and most are made
-- outside any run (run_id NULL), yet each took an entry in the index by
-- run, which only reads by a run's id ever use (a run's calls, and the
-- sweep of idle session runs: `run_id = ...`, which PostgreSQL proves
-- implies `run_id IS NOT NULL`, so both read this index as before). 200
-- ledger rows a transaction from two connections (pgbench, a copy of the
-- table each): 1,257-1,352 transactions a second with the full index,
-- 1,623-1,666 with this one, whose size after ~4.6 million calls outside
-- a run was one page against 37 MB (bench/RESULTS.md).
--
-- Building it reads the whole ledger once, writes waiting meanwhile: a
-- few seconds for millions of rows. SQLite keeps its index as it is: its
-- ledger lives in the telemetry file, and its entries for calls outside a
-- run are appended at the index's end.
DROP INDEX agent_events_by_run;
CREATE INDEX agent_events_by_run ON agent_events (org, run_id) WHERE run_id IS NOT NULL;
