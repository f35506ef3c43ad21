-- MCP sessions, kept in the store so that any replica (and the server after
-- a restart) can answer a request naming one: what `initialize` agreed
-- (the agent its client's name gives, the protocol revision), who holds it
-- (the token's org and subject; none until a bearer acts in a session
-- opened without one) and when `DELETE /mcp` ended it.
CREATE TABLE mcp_sessions (
    session_id  TEXT PRIMARY KEY,
    agent       TEXT NOT NULL,
    revision    TEXT NOT NULL,
    org         TEXT,
    subject     TEXT,
    created_ms  BIGINT NOT NULL,
    ended_ms    BIGINT
);
