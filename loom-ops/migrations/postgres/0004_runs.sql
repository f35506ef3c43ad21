-- Runs (a unit of an agent's work), the working memory scoped by run, and
-- the namespace's profile. Timestamps are milliseconds since the Unix epoch.

CREATE TABLE runs (
    org             TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    run_id          TEXT NOT NULL,
    agent           TEXT NOT NULL,
    subject         TEXT NOT NULL,
    goal            TEXT NOT NULL DEFAULT '',
    status          TEXT NOT NULL,          -- open, succeeded, failed, abandoned
    summary         TEXT NOT NULL DEFAULT '',
    started_ms      BIGINT NOT NULL,
    completed_ms    BIGINT,
    PRIMARY KEY (org, namespace, run_id)
);
CREATE INDEX runs_by_start ON runs (org, namespace, started_ms);

CREATE TABLE working_memory (
    org             TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    run_id          TEXT NOT NULL,
    name            TEXT NOT NULL,
    content         TEXT NOT NULL,
    agent           TEXT NOT NULL,
    updated_ms      BIGINT NOT NULL,
    PRIMARY KEY (org, namespace, run_id, name)
);

-- One profile per namespace (a personal namespace is a person's).
CREATE TABLE profile (
    org             TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    persona         TEXT NOT NULL DEFAULT '',
    preferences     TEXT NOT NULL DEFAULT '',
    goals           TEXT NOT NULL DEFAULT '',
    version         BIGINT NOT NULL,
    updated_ms      BIGINT NOT NULL,
    PRIMARY KEY (org, namespace)
);
