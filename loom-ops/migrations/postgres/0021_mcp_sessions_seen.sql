-- When a server last found an MCP session in use (written at most once an
-- hour a session): retention keeps a session by its use, not its age, so
-- a client that stays connected for weeks keeps its session.
ALTER TABLE mcp_sessions ADD COLUMN seen_ms BIGINT;
UPDATE mcp_sessions SET seen_ms = created_ms;
