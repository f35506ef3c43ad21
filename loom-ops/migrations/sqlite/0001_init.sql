-- Orgs, namespaces, server settings and the audit log.
-- Every table leads with org, so the schema can later be split by org.
-- Timestamps are milliseconds since the Unix epoch (BIGINT).

CREATE TABLE orgs (
    org         TEXT PRIMARY KEY,
    created_ms  BIGINT NOT NULL
);

CREATE TABLE namespaces (
    org         TEXT NOT NULL,
    namespace   TEXT NOT NULL,
    kind        TEXT NOT NULL DEFAULT 'memory',   -- personal, memory, collection, code, tracker
    restricted  BOOLEAN NOT NULL DEFAULT FALSE,   -- refuses every other org, platform admins included
    description TEXT NOT NULL DEFAULT '',
    created_ms  BIGINT NOT NULL,
    PRIMARY KEY (org, namespace)
);

-- Server-wide settings (the JWT signing key, …), shared by every replica.
CREATE TABLE settings (
    name        TEXT PRIMARY KEY,
    value       TEXT NOT NULL,
    created_ms  BIGINT NOT NULL
);

CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    org         TEXT NOT NULL,
    namespace   TEXT NOT NULL,
    subject     TEXT NOT NULL,
    agent       TEXT NOT NULL,
    op          TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    at_ms       BIGINT NOT NULL
);
CREATE INDEX audit_log_by_org_time ON audit_log (org, at_ms);
