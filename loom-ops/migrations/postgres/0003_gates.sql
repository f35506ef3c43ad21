-- The gates every call passes: token revocations, namespace grants,
-- idempotency keys and the call ledger. Integers are BIGINT (milliseconds
-- since the Unix epoch for times) so both backends decode them alike.

-- Revoked token ids. Every replica reloads this list periodically.
CREATE TABLE revoked_tokens (
    jti         TEXT PRIMARY KEY,
    revoked_ms  BIGINT NOT NULL
);

-- A subject's role in a namespace, beyond what its token names.
CREATE TABLE grants (
    org         TEXT NOT NULL,
    namespace   TEXT NOT NULL,
    subject     TEXT NOT NULL,
    role        TEXT NOT NULL,                -- viewer, writer, admin
    granted_by  TEXT NOT NULL,
    created_ms  BIGINT NOT NULL,
    PRIMARY KEY (org, namespace, subject)
);

-- Stored answers of idempotent calls, per (org, principal, key).
CREATE TABLE idempotency_keys (
    org           TEXT NOT NULL,
    subject       TEXT NOT NULL,
    idem_key      TEXT NOT NULL,
    op            TEXT NOT NULL,
    request_hash  TEXT NOT NULL,
    state         TEXT NOT NULL,              -- in_flight, done
    status        BIGINT NOT NULL DEFAULT 0,
    body          TEXT NOT NULL DEFAULT '',
    created_ms    BIGINT NOT NULL,
    PRIMARY KEY (org, subject, idem_key)
);

-- One row per call, written off the request path in batches.
CREATE TABLE agent_events (
    id          BIGSERIAL PRIMARY KEY,
    org         TEXT NOT NULL,
    namespace   TEXT NOT NULL,
    subject     TEXT NOT NULL,
    agent       TEXT NOT NULL,
    consumer    TEXT,
    op          TEXT NOT NULL,
    transport   TEXT NOT NULL,
    run_id      TEXT,
    session_id  TEXT,
    request_id  TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    status      BIGINT NOT NULL,
    latency_ms  BIGINT NOT NULL,
    at_ms       BIGINT NOT NULL
);
CREATE INDEX agent_events_by_org_time ON agent_events (org, at_ms);
CREATE INDEX agent_events_by_run ON agent_events (org, run_id);
