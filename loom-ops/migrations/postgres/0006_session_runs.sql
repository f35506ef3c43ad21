-- MCP sessions' implicit runs: one open run per (org, token subject,
-- session), closed when the session ends or goes idle. Its calls are its
-- agent_events rows; the run stores no count.
ALTER TABLE runs ADD COLUMN session_id TEXT;
ALTER TABLE runs ADD COLUMN close_reason TEXT;
CREATE UNIQUE INDEX runs_open_per_session ON runs (org, subject, session_id)
    WHERE session_id IS NOT NULL AND status = 'open';
CREATE INDEX runs_open_sessions ON runs (status, started_ms) WHERE session_id IS NOT NULL;
