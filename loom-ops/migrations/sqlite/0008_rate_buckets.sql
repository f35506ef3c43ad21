-- Shared rate-limit buckets are a PostgreSQL feature (LOOM_RATE_LIMIT_STORE=
-- postgres; one SQLite file has one server, whose in-process buckets suffice).
-- The table exists so both backends have the same schema; SQLite never
-- writes it.
CREATE TABLE rate_buckets (
    org TEXT NOT NULL,
    subject TEXT NOT NULL,
    class TEXT NOT NULL,
    tokens REAL NOT NULL,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (org, subject, class)
);
